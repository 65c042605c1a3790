"""JSON-shaped data from YAML, built in one pass over the YAML parser's events, refusing what JSON cannot hold.

Data files (cases, engine and model specs, families) are JSON written as YAML. PyYAML's own loader accepts more,
and some of it hurts later: an alias bomb (ten lines whose aliases expand to a billion values) hangs every walk
over the data; 100,000 nested brackets overflow the C stack of its composer; a duplicate key silently replaces
the first; ``2024-01-01`` becomes a date and ``.nan`` a float that no JSON request can carry; ``on:`` becomes the
key True. So the data is built here from libyaml's events (its parser is a state machine, not recursive) under a
depth limit and a bound on what aliases may add (an anchored tool list reused by several cases is fine), and each
such construct is refused with the JSON path and the line where it stands.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import attrs
import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

JsonPath = tuple[str | int, ...]

# Deeper than any real spec or tool schema (they stay under 20), far below what the recursive walks over the
# data (JSON Schema validation, the checks) can take.
MAX_DEPTH = 64
# Values that aliases may add to one document: the library's largest reuse adds about 1,000; walking 100,000
# more takes well under a second, a billion never ends.
MAX_ALIASED = 100_000

_TAG = "tag:yaml.org,2002:"
STR, NULL, BOOL, INT, FLOAT, MERGE = (_TAG + name for name in ("str", "null", "bool", "int", "float", "merge"))
COLLECTION_TAGS = {None, "!", _TAG + "map", _TAG + "seq"}
# What plain YAML text is read as, where JSON would want a string; for the message that refuses it.
READ_AS = {_TAG + "timestamp": "a date", _TAG + "value": "a YAML value key (=)", NULL: "null", BOOL: "a boolean",
           INT: "an integer", FLOAT: "a number"}


@attrs.frozen
class Refusal:
    """A construct JSON cannot hold, where it stands."""

    path: JsonPath
    line: int
    message: str


@attrs.frozen
class YamlData:
    """The data, the source line of each value (a mapping entry: its key's line) and every refusal."""

    data: Any
    lines: dict[JsonPath, int]
    refusals: tuple[Refusal, ...]


def load_json_yaml(text: str) -> YamlData:
    """Parse one YAML document into JSON data; a syntax error raises ``yaml.YAMLError`` (the first one only)."""
    try:
        return _load(text, getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's parser when built: far faster
    except yaml.YAMLError:
        # libyaml's own limits (a nesting depth, since PyYAML 6.0.4) can stop it before the checks here, with less
        # to say and in words that vary by build: the pure-Python parser reads the text again and says where.
        return _load(text, yaml.SafeLoader)


def _load(text: str, loader_class: type) -> YamlData:
    loader = loader_class(text)
    try:
        return _Builder(loader).build()
    finally:
        loader.dispose()


class _Stop(Exception):
    """A refusal after which the rest of the document cannot be read."""


@attrs.define
class _Open:
    """A mapping or sequence being filled; a mapping holds the key whose value comes next."""

    value: dict | list
    path: JsonPath
    anchor: str | None
    first: int  # values built before this one: its size (aliases in it expanded) is the count at its end minus this
    key: str | None = None


@attrs.define
class _Builder:
    loader: Any
    lines: dict[JsonPath, int] = attrs.field(factory=dict)
    refusals: list[Refusal] = attrs.field(factory=list)
    stack: list[_Open] = attrs.field(factory=list)
    anchors: dict[str, tuple[Any, int]] = attrs.field(factory=dict)  # name -> (value, its size in values)
    count: int = 0  # values built so far, aliases expanded
    aliased: int = 0  # of which aliases added
    root: Any = None

    def build(self) -> YamlData:
        self.loader.get_event()  # stream start
        if not self.loader.check_event(StreamEndEvent):
            self.loader.get_event()  # document start
            try:
                while not self.loader.check_event(DocumentEndEvent):
                    self.take(self.loader.get_event())
                self._one_document_only()
            except _Stop:
                pass  # the data read so far stays: it names the item (a case id) the refusal is in
        return YamlData(self.root, self.lines, tuple(self.refusals))

    def _one_document_only(self) -> None:
        self.loader.get_event()  # document end
        if not self.loader.check_event(StreamEndEvent):
            mark = self.loader.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "expected a single document, found another", mark)

    def take(self, event: Any) -> None:
        if isinstance(event, (MappingEndEvent, SequenceEndEvent)):
            self._end()
        elif self._wants_key():
            self._key(event)
        elif isinstance(event, ScalarEvent):
            self._scalar(event)
        elif isinstance(event, AliasEvent):
            self._alias(event)
        else:
            self._start(event)

    def _wants_key(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1].value, dict) and self.stack[-1].key is None

    def _key(self, event: Any) -> None:
        top = self.stack[-1]
        if not isinstance(event, ScalarEvent):
            self._stop(top.path, event, "a mapping key must be a string, not a mapping, a list or an alias")
        key, tag = event.value, self._tag(event)
        path = top.path + (key,)
        if tag == MERGE:
            self._refuse(path, event, "merge keys (<<) are not supported in data files: write the keys out")
        elif tag != STR:
            self._refuse(path, event, f"key {_shown(key)} is read by YAML as {READ_AS.get(tag, _short(tag))}, not a "
                                      "string: quote it")
        if key in top.value:
            self._refuse(path, event, f"duplicate key {_shown(key)} (first at line {self.lines[path]})")
        self.lines[path] = _line(event)
        self._remember(event.anchor, key, 1)
        top.key = key

    def _scalar(self, event: ScalarEvent) -> None:
        value = self._value(event)
        self._place(value, event, 1)
        self._remember(event.anchor, value, 1)

    def _start(self, event: MappingStartEvent | SequenceStartEvent) -> None:
        if len(self.stack) >= MAX_DEPTH:
            self._stop(self._slot(), event, f"nested deeper than {MAX_DEPTH} levels")
        if event.tag not in COLLECTION_TAGS:
            self._refuse(self._slot(), event, f"YAML type {_short(event.tag)} has no JSON equivalent")
        value: dict | list = {} if isinstance(event, MappingStartEvent) else []
        path, first = self._slot(), self.count
        self._place(value, event, 1)
        self.stack.append(_Open(value, path, event.anchor, first))

    def _end(self) -> None:
        done = self.stack.pop()
        self._remember(done.anchor, done.value, self.count - done.first)

    def _alias(self, event: AliasEvent) -> None:
        anchor = event.anchor
        if anchor is None or anchor not in self.anchors:
            opened = any(frame.anchor == anchor for frame in self.stack)
            self._stop(self._slot(), event, f"alias *{anchor} " + ("is inside its own anchor" if opened else
                                                                   "names no anchor before it"))
        value, size = self.anchors[anchor]
        self.aliased += size
        if self.aliased > MAX_ALIASED:  # an alias bomb: the walks over the data would never end
            self._stop(self._slot(), event, f"aliases expand to more than {MAX_ALIASED:,} values")
        self._place(value, event, size)  # shared, as PyYAML shares it: the data is never changed in place

    def _remember(self, anchor: str | None, value: Any, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = (value, size)

    def _value(self, event: ScalarEvent) -> Any:
        tag = self._tag(event)
        if tag == STR:
            return event.value
        if tag not in (NULL, BOOL, INT, FLOAT):
            self._refuse(self._slot(), event, _not_json(event, tag))
            return event.value
        try:
            value = yaml.SafeLoader.yaml_constructors[tag](self.loader, ScalarNode(tag, event.value))
        except (ValueError, KeyError):  # an explicit tag on a value it cannot read: !!int abc, !!bool maybe
            self._refuse(self._slot(), event, f"{_shown(event.value)} is not a valid {_short(tag)}")
            return event.value
        if isinstance(value, float) and not math.isfinite(value):
            self._refuse(self._slot(), event, f"{_shown(event.value)} is not a JSON number (NaN and Infinity cannot "
                                              "be sent)")
        return value

    def _tag(self, event: ScalarEvent) -> str:
        if event.tag in (None, "!"):
            return self.loader.resolve(ScalarNode, event.value, event.implicit)
        return event.tag

    def _slot(self) -> JsonPath:
        """The path of the value that comes next."""
        if not self.stack:
            return ()
        top = self.stack[-1]
        if isinstance(top.value, dict):  # no key yet (one being read): the mapping's own path, never a None in it
            return top.path + ((top.key,) if top.key is not None else ())
        return top.path + (len(top.value),)

    def _place(self, value: Any, event: Any, size: int) -> None:
        self.count += size
        if not self.stack:
            self.root = value
            self.lines[()] = _line(event)
            return
        top = self.stack[-1]
        if isinstance(top.value, dict):
            top.value[top.key] = value  # its line is its key's, kept when the key was read
            top.key = None
        else:
            self.lines[top.path + (len(top.value),)] = _line(event)
            top.value.append(value)

    def _refuse(self, path: JsonPath, event: Any, message: str) -> None:
        self.refusals.append(Refusal(path, _line(event), message))

    def _stop(self, path: JsonPath, event: Any, message: str) -> NoReturn:
        self._refuse(path, event, message)
        raise _Stop


def _not_json(event: ScalarEvent, tag: str) -> str:
    if event.tag in (None, "!"):  # read from plain text: quoting it makes it the string it looks like
        return (f"{_shown(event.value)} is read by YAML as {READ_AS.get(tag, _short(tag))}, which JSON has no type for: "
                "quote it to mean the text")
    return f"YAML type {_short(tag)} has no JSON equivalent"


def _shown(text: str) -> str:
    """A value in a one-line message: a 5,000-digit number is not shown whole."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _line(event: Any) -> int:
    return event.start_mark.line + 1


def _short(tag: str | None) -> str:
    return (tag or "?").replace(_TAG, "!!")

"""YAML data files validated by JSON Schema, with errors that point at file, line and field.

Cases, engine specs and model specs are all loaded through here, so every data error reads the same way:
``cases/parallel.yaml:14: parallel.two_cities: $.expect.calls[0].name: 'get_wether' is not an offered tool``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import attrs
import jsonschema
import jsonschema_rs
import yaml

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.features import fill_vocabulary
from toolmatrix.base.yamldata import JsonPath, Refusal, load_json_yaml


@attrs.frozen
class SpecError:
    """One problem in one data file."""

    file: str
    line: int | None
    where: str  # the item id (case id, engine id) when known, else ""
    json_path: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        item = f" {self.where}:" if self.where else ""
        return f"{loc}:{item} {self.json_path}: {self.message}"


class SpecErrors(ToolmatrixError):
    """All problems found in a set of data files (never only the first)."""

    def __init__(self, errors: Iterable[SpecError]):
        self.errors = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def format_path(path: Iterable[str | int]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


@attrs.frozen
class YamlDoc:
    """A parsed YAML file, the source line of every value keyed by JSON path, and what JSON cannot hold in it."""

    path: Path
    data: Any
    lines: dict[JsonPath, int]
    refusals: tuple[Refusal, ...] = ()  # reported by schema_errors, with the item they are in

    def line(self, path: JsonPath) -> int | None:
        # The deepest known ancestor: a missing key has no line of its own, its parent does.
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return self.lines[path[:cut]]
        return None

    def error(self, path: JsonPath, message: str, where: str = "") -> SpecError:
        return SpecError(str(self.path), self.line(path), where, format_path(path), message)


def read_yaml(path: Path) -> YamlDoc:
    """Parse one YAML file; an unreadable, binary or syntactically broken file is a SpecErrors of one line."""
    text = _read_text(path)
    try:
        parsed = load_json_yaml(text)
    except yaml.YAMLError as exc:
        line, message = _yaml_error(exc, text)
        raise SpecErrors([SpecError(str(path), line, "", "$", message)]) from None
    return YamlDoc(path, parsed.data, parsed.lines, parsed.refusals)


def _read_text(path: Path) -> str:
    def fail(line: int | None, message: str) -> SpecErrors:
        return SpecErrors([SpecError(str(path), line, "", "$", message)])

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise fail(None, f"cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise fail(line, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): a binary file?") from None


def _yaml_error(exc: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """The line and a one-line message of a YAML error."""
    if isinstance(exc, yaml.reader.ReaderError):  # a control character: binary content in a UTF-8 file
        # Its position counts bytes in libyaml, characters in PyYAML: find the character itself instead.
        index = text.find(chr(exc.character))
        line = text[:index].count("\n") + 1 if index >= 0 else None
        return line, f"control character #x{exc.character:02x} is not allowed in YAML: a binary file?"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return (mark.line + 1 if mark else None), f"invalid YAML: {problem}"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped in ``toolmatrix/schemas/``, with the feature vocabulary filled in."""
    text = resources.files("toolmatrix.schemas").joinpath(name).read_text(encoding="utf-8")
    schema = fill_vocabulary(json.loads(text))
    if not isinstance(schema, dict):  # every shipped schema is an object
        raise ValueError(f"toolmatrix/schemas/{name} is not a JSON Schema object")
    return schema


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown field(s)")
    if error.validator == "required":
        return error.message
    value = json.dumps(error.instance, ensure_ascii=False, default=str)
    if error.validator == "enum" and len(error.message) >= 120:  # a vocabulary: name what would do, readably
        options: Any = error.validator_value  # set on every error a validator yields (the stubs allow it unset)
        return f"{error.instance!r} is not one of {', '.join(map(str, options))}"
    if len(value) > 60:
        value = value[:57] + "..."
    return f"{error.message if len(error.message) < 120 else str(error.validator) + ' failed'} (got {value})"


def schema_errors(doc: YamlDoc, schema_name: str, where_of=None) -> list[SpecError]:
    """Every schema violation in ``doc``; ``where_of(path)`` names the item (e.g. the case id) at a path.

    A file that is not a mapping, or that holds what JSON cannot (a date, NaN, a duplicate key, an alias bomb),
    gets only those errors: the schema has nothing sound to judge.
    """
    if load_schema(schema_name).get("type") == "object" and not isinstance(doc.data, dict):
        return [doc.error((), _not_a_mapping(doc.data))]  # before where_of, which may expect a mapping
    if doc.refusals:
        return [SpecError(str(doc.path), r.line, _where(where_of, r.path), format_path(r.path), r.message)
                for r in doc.refusals]
    if fast_validator(schema_name)(doc.data):  # the common yes: every case file is read by every xdist worker
        return []
    errors = []
    for error in sorted(_validator(schema_name).iter_errors(doc.data), key=lambda e: list(map(str, e.path))):
        # anyOf/oneOf failures: report the most specific sub-error, it names the real field.
        best = (jsonschema.exceptions.best_match([error]) if error.context else None) or error  # never None: one given
        best, message = unknown_operator(best) or (best, _describe(best))
        path = tuple(best.absolute_path)
        errors.append(doc.error(path, message, _where(where_of, path)))
    return errors


def unknown_operator(error: jsonschema.ValidationError) -> tuple[jsonschema.ValidationError, str] | None:
    """A key no branch knows, or two operators in one object, in a choice among one-key operator objects
    ({regx: ...} for a matcher): the keys that would do, read from the choice itself, instead of what its closest
    branch wanted. Of ``error`` and the choices it lies in, the innermost such."""
    while error is not None:
        operators = _operator_keys(error)  # [] unless the instance is an object
        instance: Any = error.instance  # a validated value: set on every error (the stubs allow it unset)
        unknown = [k for k in instance if k not in operators] if operators else []
        if unknown:
            return error, f"unknown key {unknown[0]!r}: expected one of {', '.join(operators)}"
        if operators and len(instance) != 1:
            given = " and ".join(map(repr, instance)) + " together" if instance else "an empty object"
            return error, f"{given}: expected one of {', '.join(operators)}"
        # A ValidationError's parent is one too; the stubs type it as the base class.
        error = error.parent  # type: ignore[assignment]
    return None


def _operator_keys(error: jsonschema.ValidationError) -> list[str]:
    """The operators of an anyOf/oneOf ``error`` on an object where every branch that takes objects is an object
    of one required key and nothing else (two or more of them); none for any other error."""
    if error.validator not in ("anyOf", "oneOf") or not isinstance(error.instance, dict):
        return []
    keys = []
    branches: Any = error.validator_value  # the anyOf/oneOf list (the stubs allow it unset)
    for branch in branches:
        if branch.get("additionalProperties") is False and len(branch.get("required", ())) == 1:
            keys.append(branch["required"][0])
        elif not _refuses_objects(branch):
            return []
    return keys if len(keys) > 1 else []


def _refuses_objects(schema: Mapping[str, Any]) -> bool:
    types = schema.get("type", "object")
    return schema.get("not") == {"type": "object"} or "object" not in ([types] if isinstance(types, str) else types)


def _where(where_of, path: JsonPath) -> str:
    return where_of(path) if where_of else ""


def _not_a_mapping(data: Any) -> str:
    if data is None:
        return "the file is empty: expected a mapping of fields"
    kind = {list: "a list", str: "a string", bool: "a boolean"}.get(type(data), "a number")
    return f"the top level is {kind}: expected a mapping of fields"


@cache
def _metaschema() -> tuple[Callable[[Any], bool], jsonschema.protocols.Validator]:
    # A fast yes/no (jsonschema-rs, 200x faster: every tool of every case file is checked at each start) and the
    # wording of jsonschema; both read `pattern` with Python's re, as the checks will.
    cls = jsonschema.Draft202012Validator
    fast = jsonschema_rs.validator_for(cls.META_SCHEMA, validate_formats=True, formats={"regex": _compiles})
    return fast.is_valid, cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def json_schema_problem(schema: Any) -> tuple[JsonPath, str] | None:
    """Why ``schema`` is not a JSON Schema (draft 2020-12, as the checks read it): the path in it and a message."""
    fast, meta = _metaschema()
    if fast(schema):
        return None
    error = jsonschema.exceptions.best_match(meta.iter_errors(schema))
    if error is None:  # jsonschema-rs is stricter on some formats (uri-reference); jsonschema is the judge
        return None
    return tuple(error.absolute_path), f"not a valid JSON Schema: {_describe(error)}"


@cache
def fast_validator(schema_name: str) -> Callable[[Any], bool]:
    """A yes/no against a shipped schema, 100x faster than jsonschema (jsonschema-rs, formats asserted as
    jsonschema asserts them): the common "yes" of 10^6 records or 30,000 fixtures costs seconds, not minutes."""
    schema = load_schema(schema_name)
    return jsonschema_rs.validator_for(schema, validate_formats=True, formats={"regex": _compiles}).is_valid


def validate_instance(instance: Any, schema_name: str) -> list[str]:
    """Schema violations of an in-memory object (results records, run info, fixtures), as ``$.path: message``
    lines: a fast yes first, jsonschema's words for a no."""
    if fast_validator(schema_name)(instance):
        return []
    return [
        f"{format_path(e.absolute_path)}: {_describe(e)}"
        for e in _validator(schema_name).iter_errors(instance)
    ]

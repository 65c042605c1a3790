"""Formats made of delimited call items: a header naming the call, arguments, a closing token.

Mistral v11, Harmony, DeepSeek V3/V3.1, Kimi K2 (items inside a section), Gemma 4, FunctionGemma.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import attrs

from ._coerce import param_schemas
from ._model import ParsedCall, ParseResult
from ._scan import Block, Parser, clip, decode_json, find_end, matched_end, scan, skip_ws

Decoder = Callable[[str, int, dict[str, Any]], tuple[Any, int] | None]
"""(text, position, parameter schemas of the call) -> (arguments, end) or None."""


def json_arguments(text: str, pos: int, schemas: dict[str, Any]) -> tuple[Any, int] | None:
    return decode_json(text, pos)


@attrs.frozen
class ItemSpec:
    head: re.Pattern[str]
    """Matched where the item starts; group `name`, optional group `id`."""
    tail: re.Pattern[str]
    """Matched right after the arguments; ends the item."""
    end_token: str | None = None
    """Searched for when the arguments are broken; without one such an item runs to the end of the text."""
    decode: Decoder = json_arguments


@attrs.frozen
class SectionSpec:
    """Items wrapped in a section: `opener item item … closer`."""

    opener: re.Pattern[str]
    closer: re.Pattern[str]
    item: ItemSpec


def items(opener: re.Pattern[str], spec: ItemSpec) -> Parser:
    def parse(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
        return scan(text, opener, partial(read_item, spec, tools=tools))

    return parse


def sections(spec: SectionSpec, *, bare: re.Pattern[str] | None = None) -> Parser:
    """Parse sections of items; with `bare`, also items that start at a match of it outside any section."""
    opener = spec.opener if bare is None else re.compile(f"{spec.opener.pattern}|{bare.pattern}")

    def parse(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
        item = partial(read_item, spec.item, tools=tools)
        section = partial(read_section, opener=spec.opener, item_head=spec.item.head, read=item, closer=spec.closer)

        def read(text: str, start: int) -> Block:
            return section(text, start) if spec.opener.match(text, start) else item(text, start)

        return scan(text, opener, read)

    return parse


def read_item(spec: ItemSpec, text: str, start: int, *, tools: list[dict[str, Any]] | None) -> Block:
    head = spec.head.match(text, start)
    if head is None:
        end = find_end(text, spec.end_token, start)
        problem = f"unreadable call header at {start}: {clip(text[start:])}"
        return Block(start, len(text) if end is None else end, errors=(problem,))
    name, call_id = head["name"], head.groupdict().get("id")
    decoded = spec.decode(text, head.end(), param_schemas(tools, name))
    tail = spec.tail.match(text, decoded[1]) if decoded else None
    if decoded and tail and isinstance(decoded[0], dict):  # a tail is only looked for after decoded arguments
        return Block(start, tail.end(), (ParsedCall(name, decoded[0], text[start : tail.end()], call_id),))
    end = tail.end() if tail else find_end(text, spec.end_token, head.end())
    if end is None:
        return Block(start, len(text), errors=(f"call {name!r} at {start} is truncated: {clip(text[start:])}",))
    problem = f"arguments of {name!r} at {start} are not an object: {clip(text[head.end() : end])}"
    return Block(start, end, (ParsedCall(name, None, text[start:end], call_id),), (problem,))


def read_section(
    text: str,
    start: int,
    *,
    opener: re.Pattern[str],
    item_head: re.Pattern[str],
    read: Callable[[str, int], Block],
    closer: re.Pattern[str],
) -> Block:
    """Read a section opener, the items that follow it, then its closer."""
    calls: list[ParsedCall] = []
    errors: list[str] = []
    pos = skip_ws(text, matched_end(opener, text, start))
    while item_head.match(text, pos):
        item = read(text, pos)
        calls += item.calls
        errors += item.errors
        pos = skip_ws(text, item.end)
    close = closer.match(text, pos)
    if close and (calls or errors):
        return Block(start, close.end(), tuple(calls), tuple(errors))
    late = closer.search(text, pos)
    problem = "empty section" if close else "unexpected text in section" if late else "unclosed section"
    errors.append(f"{problem} at {start}: {clip(text[start:])}")
    return Block(start, late.end() if late else len(text), tuple(calls), tuple(errors))

"""Formats whose payload is JSON call objects: Hermes, Llama 3 JSON, Mistral v3, Granite, Phi-4-mini."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import attrs

from ._model import ParsedCall, ParseResult
from ._scan import Block, Parser, clip, decode_json, find_end, gathered, json_or_text, matched_end, scan, skip_ws


@attrs.frozen
class JsonSpec:
    """Where the JSON payload of a format sits."""

    opener: re.Pattern[str]
    """Starts a block; the payload follows it."""
    closer: str | None = None
    """Ends the block after the payload; consumed when present."""
    closer_required: bool = False
    separator: str | None = None
    """Between consecutive payloads of one block (Llama 3 writes `{…}; {…}`)."""


def json_blocks(spec: JsonSpec) -> Parser:
    def parse(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
        return scan(text, spec.opener, partial(_read, spec))

    return parse


def call_from_object(value: Any, raw: str) -> tuple[ParsedCall | None, str | None]:
    """A call from `{"name": …, "arguments"|"parameters": {…}}`, keys in any order.

    Returns the call (with `arguments=None` when they are not an object) and an error line or None.
    """
    name = value.get("name") if isinstance(value, dict) else None
    if not isinstance(name, str) or not name:
        return None, f"no call name in {clip(raw)}"
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # some models double-encode the arguments
        arguments = json_or_text(arguments)
    if not isinstance(arguments, dict):
        return ParsedCall(name, None, raw), f"arguments of {name!r} are not a JSON object: {clip(raw)}"
    return ParsedCall(name, arguments, raw), None


def json_items(text: str, pos: int) -> tuple[list[tuple[Any, int, int]], int] | None:
    """Decode the JSON value at `pos`; an array yields its elements, each with its own span.

    Returns ([(value, start, end), …], end) or None when the JSON is broken or cut.
    """
    pos = skip_ws(text, pos)
    if not text.startswith("[", pos):
        decoded = decode_json(text, pos)
        return None if decoded is None else ([(decoded[0], pos, decoded[1])], decoded[1])
    items: list[tuple[Any, int, int]] = []
    pos = skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        return items, pos + 1
    while (decoded := decode_json(text, pos)) is not None:
        items.append((decoded[0], pos, decoded[1]))
        pos = skip_ws(text, decoded[1])
        if text.startswith("]", pos):
            return items, pos + 1
        if not text.startswith(",", pos):
            return None
        pos = skip_ws(text, pos + 1)
    return None


def _read(spec: JsonSpec, text: str, start: int) -> Block:
    opener_end = matched_end(spec.opener, text, start)
    results: list[tuple[ParsedCall | None, str | None]] = []
    pos = opener_end
    while True:
        payload = json_items(text, pos)
        if payload is None:
            return _broken(spec, text, start, opener_end, "broken or truncated JSON")
        items, pos = payload
        results += [call_from_object(value, text[item_start:item_end]) for value, item_start, item_end in items]
        after = skip_ws(text, pos)
        if not (spec.separator and text.startswith(spec.separator, after)):
            break
        pos = after + len(spec.separator)
    after = skip_ws(text, pos)
    if spec.closer and text.startswith(spec.closer, after):
        return gathered(start, after + len(spec.closer), results)
    if spec.closer_required:
        return _broken(spec, text, start, pos, f"expected {spec.closer!r}")
    return gathered(start, pos, results)


def _broken(spec: JsonSpec, text: str, start: int, pos: int, problem: str) -> Block:
    """A block that cannot be trusted: it runs to its closer, or to the end of the text."""
    end = find_end(text, spec.closer, pos)
    where = f"at {start}" if end is not None else f"at {start}, never closed"
    return Block(start, len(text) if end is None else end, errors=(f"{problem} {where}: {clip(text[start:])}",))

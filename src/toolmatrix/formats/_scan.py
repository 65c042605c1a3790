"""Helpers every parser shares: block scanning, JSON decoding, error snippets."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import attrs

from toolmatrix.base import jsontext

from ._model import ParsedCall, ParseResult

_WS = re.compile(r"\s*")


class Parser(Protocol):
    def __call__(self, text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult: ...


@attrs.frozen
class Block:
    """A span of text that held, or tried to hold, tool calls; it is cut out of `content`."""

    start: int
    end: int
    calls: tuple[ParsedCall, ...] = ()
    errors: tuple[str, ...] = ()


def scan(text: str, opener: re.Pattern[str], read: Callable[[str, int], Block]) -> ParseResult:
    """Read a block at every match of `opener`, left to right, and assemble the result."""
    blocks: list[Block] = []
    pos = 0
    while (match := opener.search(text, pos)) is not None:
        block = read(text, match.start())
        blocks.append(block)
        # Progress even on an empty block, so a zero-width opener cannot loop.
        pos = max(block.end, match.start() + 1)
    return assemble(text, blocks)


def gathered(start: int, end: int, results: Iterable[tuple[ParsedCall | None, str | None]]) -> Block:
    """A block from (call or None, error or None) pairs."""
    results = list(results)
    return Block(start, end, tuple(call for call, _ in results if call), tuple(error for _, error in results if error))


def assemble(text: str, blocks: list[Block]) -> ParseResult:
    pieces: list[str] = []
    pos = 0
    for block in blocks:
        pieces.append(text[pos : block.start])
        pos = block.end
    pieces.append(text[pos:])
    return ParseResult(
        calls=tuple(call for block in blocks for call in block.calls),
        content="".join(pieces).strip(),
        errors=tuple(error for block in blocks for error in block.errors),
    )


def skip_ws(text: str, pos: int) -> int:
    return matched_end(_WS, text, pos)


def matched_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where ``pattern``, known to match at ``pos`` (a scanner found it there, or it matches empty), ends."""
    match = pattern.match(text, pos)
    if match is None:
        raise ValueError(f"{pattern.pattern!r} does not match at {pos}: {clip(text[pos:])}")
    return match.end()


def decode_json(text: str, pos: int) -> tuple[Any, int] | None:
    """Decode one strict JSON value at `pos` (after whitespace): (value, end), or None.

    `raw_decode` stops where the value ends, so a closing tag written inside a
    JSON string cannot cut the value short. Strict as the chat answer is read
    (no NaN, no lone surrogate, bounded depth), so the model's own text and the
    engine's answer are held to one standard.
    """
    try:
        return jsontext.raw_decode(text, skip_ws(text, pos))
    except jsontext.NotJSON:
        return None


def json_or_text(text: str) -> Any:
    """The JSON value `text` holds, or `text` itself."""
    decoded = decode_json(text, 0)
    if decoded is None or text[decoded[1] :].strip():
        return text
    return decoded[0]


def find_end(text: str, token: str | None, pos: int) -> int | None:
    """Index just past the next `token` from `pos`; None without a token or when absent."""
    if token is None:
        return None
    index = text.find(token, pos)
    return None if index < 0 else index + len(token)


def clip(text: str, limit: int = 40) -> str:
    """A short one-line quote of untrusted text for an error message."""
    return repr(text[:limit] + ("…" if len(text) > limit else ""))

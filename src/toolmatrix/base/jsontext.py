"""JSON as an engine must send it: RFC 8259 text that is also I-JSON (RFC 7493), nested to a sane depth.

Python's ``json`` reads more than JSON: ``NaN`` and ``Infinity``, lone surrogates (``"\\ud800"``), and nesting
until the interpreter's stack runs out. An engine that sends any of these sent something no strict client can
use, and a record could not keep it as sent. So every reading of an engine's JSON (the body, a stream chunk, a
call's arguments, a native call in the model's own text) goes through here, and such text is not JSON, with
the reason. The text itself is kept by the caller, verbatim.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import orjson

# Deeper than any tool schema or chat body needs, and shallow enough that a record holding the value stays
# within orjson's encoding depth (254) and every recursive check stays within Python's stack.
MAX_DEPTH = 128


class NotJSON(ValueError):
    """Text that is not strict JSON; the message says why."""


def _reject_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of ``text``; raises ``NotJSON`` for anything but strict JSON of at most ``max_depth`` levels."""
    try:
        value = orjson.loads(text)  # refuses NaN, Infinity and lone surrogates already
    except orjson.JSONDecodeError as fast:
        # orjson also refuses integers beyond 64 bits, which are JSON: ask the standard parser, strictly.
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise NotJSON(f"not UTF-8: {fast}") from None
        value, end = raw_decode(text, 0, max_depth=max_depth)
        if text[end:].strip():
            raise NotJSON(f"extra data after the value at char {end}") from None
        return value
    _check_depth(value, text, max_depth)
    return value


def raw_decode(text: str, pos: int, *, max_depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """One strict JSON value at ``pos`` of ``text``: ``(value, end)``; raises ``NotJSON``."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise NotJSON(f"nested deeper than {max_depth} levels") from None
    except NotJSON:
        raise
    except ValueError as exc:
        raise NotJSON(str(exc)) from None
    _check_depth(value, text[pos:end], max_depth)  # first: encoding a deep value would overflow json's stack
    if "\\u" in text[pos:end]:
        try:  # a lone surrogate escape decodes to a string that cannot be UTF-8
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NotJSON(f"lone surrogate {exc.object[exc.start]!r}: not Unicode text") from None
    return value, end


def _check_depth(value: Any, text: str | bytes, max_depth: int) -> None:
    if _openers(text) <= max_depth:  # cannot be that deep: skip the walk
        return
    if _encoder_refuses_deeper_than(max_depth) and _encodes(value):  # proven shallow enough, in C
        return
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise NotJSON(f"nested deeper than {max_depth} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _openers(text: str | bytes) -> int:
    if isinstance(text, bytes):
        return text.count(b"[") + text.count(b"{")
    return text.count("[") + text.count("{")


@cache
def _encoder_refuses_deeper_than(max_depth: int) -> bool:
    """Does orjson refuse to encode a value nested deeper than ``max_depth``? (It stops after 255 levels.)

    Where it does, a value it encodes is shallow enough: a far cheaper proof than walking a value of thousands of
    containers (a results.jsonl line of a long stream). Asked of orjson itself rather than assumed."""
    value: list = []
    for _ in range(max_depth):
        value = [value]
    return not _encodes(value)


def _encodes(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True

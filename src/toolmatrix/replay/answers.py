"""Answers compared call by call: what a parser made of a text (calls, content, reasoning), in one plain shape.

A harvested fixture keeps the live engine's answer in this shape (``Fixture.live``), the reference parser's is the
fixture's ``expected``, and a replayed record's is read back into it; ``differences`` says how two of them differ.
Stricter than a verdict: every call's name and arguments (as parsed JSON, key order aside, types kept: ``1`` is
not ``1.0`` nor ``true``), in order, and the content and reasoning (whitespace at their ends aside, empty = none).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from toolmatrix.wire.answer import Message

Answer = Mapping[str, Any]
"""``{"tool_calls": [{"name", "arguments"}], "content", "reasoning"}``; arguments an object where they parse as
one, else whatever the engine sent (an unreadable string stays a string)."""


def answer_of(message: Message) -> dict[str, Any]:
    """An engine's message in the plain shape."""
    calls = [{"name": c.name, "arguments": c.parsed_arguments() if c.parsed_arguments() is not None else c.arguments}
             for c in message.tool_calls]
    return {"tool_calls": calls, "content": message.content, "reasoning": message.reasoning}


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "…"


def differences(want: Answer, got: Answer, names: tuple[str, str] = ("live", "replay")) -> list[str]:
    """One line per difference between two answers (empty: they agree); ``names`` label ``want`` and ``got``."""
    a, b = names
    found: list[str] = []
    want_calls, got_calls = list(want["tool_calls"]), list(got["tool_calls"])
    if len(want_calls) != len(got_calls):
        found.append(f"{len(want_calls)} call(s) {a} {_show([c['name'] for c in want_calls])}, "
                     f"{len(got_calls)} {b} {_show([c['name'] for c in got_calls])}")
    for index, (one, other) in enumerate(zip(want_calls, got_calls)):
        if one["name"] != other["name"]:
            found.append(f"call {index}: name {_show(one['name'])} {a}, {_show(other['name'])} {b}")
        if _canonical(one["arguments"]) != _canonical(other["arguments"]):
            found.append(f"call {index}: arguments {_show(one['arguments'])} {a}, {_show(other['arguments'])} {b}")
    for field in ("content", "reasoning"):
        if _text(want.get(field)) != _text(got.get(field)):
            found.append(f"{field} {_show(_text(want.get(field)))} {a}, {_show(_text(got.get(field)))} {b}")
    return found

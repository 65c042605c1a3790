"""What every API surface is: ``Surface``, the interface each one's module fills, and the pieces of the
translation and reading that more than one surface shares."""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from toolmatrix.wire.answer import Message

CHAT, RESPONSES, MESSAGES = "chat", "responses", "messages"


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text(parts: Any, kinds: tuple[str, ...]) -> str | None:
    """The joined text of the content parts of the given types; None when there is none."""
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") in kinds
             and isinstance(p.get("text"), str)] if isinstance(parts, list) else []
    return "".join(texts) if texts else None


def joined_text(content: Any, kinds: tuple[str, ...] = ("text",)) -> Any:
    """A message's or a tool result's text: a list of parts of the given types joined, anything else as it is."""
    return _text(content, kinds) or "" if isinstance(content, list) else content


def _key(value: Any) -> Any:
    """An event's index or id as a dict key: an engine may send a list or an object there (wire_shape says so)."""
    return value if value is None or isinstance(value, (int, str)) else json.dumps(value, sort_keys=True, default=str)


def _object(value: Any) -> dict[str, Any]:
    """A JSON value that should be an object, or ``{}`` when it is not (an engine's field of the wrong type)."""
    return value if isinstance(value, dict) else {}


def _events(chunks: Iterable[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(number, event)`` for every stream payload that is an object with a string ``type``."""
    for number, event in enumerate(chunks):
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            yield number, event


class Surface:
    """One API surface: where requests go, how a chat request is said there, and how its answers read."""

    id: str
    name: str  # as a person knows it (the page's label)
    path: str  # below the base URL's /v1
    wire_schema: str  # the JSON Schema file with $defs completion, chunk (and error, where checked)
    answer_key: str  # the top-level key every non-streamed answer holds (``errors.not_an_answer``)
    checks_error_shape = True  # a 4xx answer in the surface's own error shape (wire_shape)

    def request(self, chat: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def message(self, body: Any) -> Message | None:
        """The non-streamed answer as a message; None when the body holds none."""
        raise NotImplementedError

    def assemble(self, chunks: tuple[Any, ...]) -> Message:
        """A stream reassembled as the surface's official client reassembles it."""
        raise NotImplementedError

    def stream_problem(self, chunks: tuple[Any, ...]) -> str | None:
        """What breaks the surface's stream grammar (events out of order, pieces that do not add up), or None."""
        raise NotImplementedError

    def finish_problem(self, message: Message, named_choice: bool) -> str | None:
        """Why the answer's stop word is wrong for what it holds, or None."""
        raise NotImplementedError


def _text_parts(content: Any, kind: str) -> Any:
    """Chat's text parts as the surface names them (Responses ``input_text``, Messages ``text``)."""
    if not isinstance(content, list):
        return content
    return [{"type": kind, "text": p.get("text")} if isinstance(p, dict) and p.get("type") == "text" else p
            for p in content]


def _flat_tool(tool: Any) -> Any:
    """A chat tool ``{type: function, function: {name, ...}}`` as the Responses API writes it: flat."""
    if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        return {"type": "function", **tool["function"]}
    return tool


def _flat_choice(choice: Any) -> Any:
    """A named (or malformed) chat tool_choice, flat: ``{type, name}``; strings and other values as they are."""
    if isinstance(choice, dict) and "function" in choice:
        function = choice["function"] if isinstance(choice["function"], dict) else {}
        return {"type": choice.get("type"), **({"name": function["name"]} if "name" in function else {})}
    return choice

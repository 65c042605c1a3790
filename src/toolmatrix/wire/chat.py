"""Chat Completions: its answers read into a ``Message``, whole or reassembled from the stream as the official
``openai`` client reassembles it, and its stream grammar and stop words judged for the checks."""

from __future__ import annotations

from typing import Any, Iterator

import attrs
import orjson
from openai.lib.streaming._deltas import accumulate_delta  # what the client's ChatCompletionStreamState uses

from toolmatrix.wire.answer import Call, Message
from toolmatrix.wire.base import CHAT, Surface, _object, _short


def _first_choice(body: Any) -> dict[str, Any] | None:
    if not isinstance(body, dict):
        return None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return None


def _call_from(raw: Any) -> Call:
    raw = _object(raw)
    function = _object(raw.get("function"))
    return Call(raw.get("id"), raw.get("type"), function.get("name"), function.get("arguments"), raw.get("index"))


def _reasoning(message: dict[str, Any]) -> str | None:
    # Engines disagree on the field name; both are seen in the wild.
    value = message.get("reasoning_content", message.get("reasoning"))
    return value if isinstance(value, str) else None


def message_from_response(body: Any) -> Message | None:
    choice = _first_choice(body)
    if choice is None or not isinstance(choice.get("message"), dict):
        return None
    message = choice["message"]
    raw_calls = message.get("tool_calls")
    calls = tuple(_call_from(c) for c in raw_calls) if isinstance(raw_calls, list) else ()
    content = message.get("content")
    return Message(
        content=content if isinstance(content, str) else None,
        reasoning=_reasoning(message),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        cut=choice.get("finish_reason") == "length",
    )


@attrs.define
class _CallBuilder:
    id: Any = None
    type: Any = None
    name: Any = None
    arguments: str | None = None
    index: Any = None

    def add(self, delta: dict[str, Any]) -> None:
        self.id = self.id or delta.get("id")
        self.type = self.type or delta.get("type")
        function = _object(delta.get("function"))
        name = function.get("name")
        if name:
            # Joined like the official client joins it; a name of the wrong type is kept as sent, for the checks.
            self.name = self.name + name if isinstance(self.name, str) and isinstance(name, str) else name
        fragment = function.get("arguments")
        if isinstance(fragment, str):
            self.arguments = (self.arguments or "") + fragment

    def build(self) -> Call:
        return Call(self.id, self.type, self.name, self.arguments, self.index)


def stream_deltas(chunks: tuple[Any, ...]) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """Yield ``(chunk_number, choice_delta, finish_reason)`` for every chunk that carries a first choice."""
    for number, chunk in enumerate(chunks):
        choice = _first_choice(chunk)
        if choice is None:
            continue
        delta = _object(choice.get("delta"))
        yield number, delta, choice.get("finish_reason")


def assemble_stream(chunks: tuple[Any, ...]) -> Message:
    """Reassemble deltas as the official ``openai`` client does (its own accumulator), so a stream bug shows as a
    client sees it: a name sent twice arrives doubled. A stream that client could not read at all is read by the
    same rules, tolerantly, for the checks to judge."""
    try:
        return _assemble_as_client(chunks)
    except (TypeError, KeyError, IndexError, RuntimeError, AttributeError):
        return _assemble_tolerantly(chunks)


def _assemble_as_client(chunks: tuple[Any, ...]) -> Message:
    snapshot: dict[Any, Any] = {}  # the accumulator's own type: dict[object, object]
    finish = None
    for _, delta, finish_reason in stream_deltas(chunks):
        # The accumulator keeps (and extends) the dicts it is given: give it copies, the chunks stay as recorded.
        accumulate_delta(snapshot, orjson.loads(orjson.dumps(delta)))
        if finish_reason is not None:
            finish = finish_reason
    raw_calls = snapshot.get("tool_calls")
    return Message(
        content=snapshot["content"] if isinstance(snapshot.get("content"), str) else None,
        reasoning=_reasoning(snapshot) or None,
        tool_calls=tuple(_call_from(c) for c in raw_calls) if isinstance(raw_calls, list) else (),
        finish_reason=finish,
        cut=finish == "length",
    )


def _assemble_tolerantly(chunks: tuple[Any, ...]) -> Message:
    content: list[str] = []
    reasoning: list[str] = []
    builders: dict[Any, _CallBuilder] = {}
    finish = None
    for _, delta, finish_reason in stream_deltas(chunks):
        if isinstance(delta.get("content"), str):
            content.append(delta["content"])
        if (r := _reasoning(delta)) is not None:
            reasoning.append(r)
        raw_calls = delta.get("tool_calls")
        for raw in raw_calls if isinstance(raw_calls, list) else [raw_calls] if isinstance(raw_calls, dict) else []:
            if not isinstance(raw, dict):
                continue
            key = raw.get("index")
            if not isinstance(key, int):
                key = raw.get("id") or len(builders)
            builder = builders.setdefault(key, _CallBuilder(index=raw.get("index")))
            builder.add(raw)
        if finish_reason is not None:
            finish = finish_reason
    return Message(
        content="".join(content) if content else None,
        reasoning="".join(reasoning) if reasoning else None,
        tool_calls=tuple(b.build() for b in builders.values()),
        finish_reason=finish,
        cut=finish == "length",
    )


class Chat(Surface):
    id, path, wire_schema = CHAT, "/chat/completions", "chat-response.schema.json"
    answer_key = "choices"  # what every answer of this surface holds (an answer without it is none of the API's)
    name = "Chat Completions"
    checks_error_shape = False  # engines' chat errors predate this check; the openai client copes with any shape

    def request(self, chat: dict[str, Any]) -> dict[str, Any]:
        return chat

    def message(self, body: Any) -> Message | None:
        return message_from_response(body)

    def assemble(self, chunks: tuple[Any, ...]) -> Message:
        return assemble_stream(chunks)

    def stream_problem(self, chunks: tuple[Any, ...]) -> str | None:
        """Tool-call deltas without an integer index, a first delta without id or name, an index reused by
        another call, a name sent again (a client joins it: NAMENAME), a fragment not a string, no finish."""
        seen: dict[int, dict[str, Any]] = {}
        finished = False
        for number, delta, finish in stream_deltas(chunks):
            finished = finished or finish is not None
            for raw in delta.get("tool_calls") or []:
                index = raw.get("index") if isinstance(raw, dict) else None
                if not isinstance(index, int) or isinstance(index, bool):
                    return f"chunk {number}: tool-call delta without an integer index: {_short(raw)}"
                function = raw.get("function") or {}
                state = seen.get(index)
                if state is None:
                    if not raw.get("id") or not function.get("name"):
                        return f"chunk {number}: first delta of call {index} lacks id or name: {_short(raw)}"
                    seen[index] = {"id": raw["id"], "name": function["name"]}
                    continue
                if raw.get("id") and raw["id"] != state["id"]:
                    return f"chunk {number}: index {index} reused by another call id {raw['id']!r} (calls merged)"
                if function.get("name") and function["name"] == state["name"]:
                    return (f"chunk {number}: name of call {index} sent again "
                            f"(a client reads {state['name'] + function['name']!r})")
                if isinstance(function.get("name"), str) and isinstance(state["name"], str):
                    state["name"] += function["name"]  # a name split over deltas is joined, as the client joins it
                if function.get("arguments") is not None and not isinstance(function["arguments"], str):
                    return f"chunk {number}: argument fragment is not a string: {_short(function['arguments'])}"
        return None if finished else "no chunk carried a finish_reason"

    def finish_problem(self, message: Message, named_choice: bool) -> str | None:
        reason = message.finish_reason
        if message.tool_calls:
            # 'length' is the truth when max_tokens cut the answer; OpenAI answers 'stop' for a named tool_choice.
            allowed = ("tool_calls", "length") + (("stop",) if named_choice else ())
            if reason not in allowed:
                return f"finish_reason {reason!r} with {len(message.tool_calls)} call(s), expected 'tool_calls'"
        elif reason not in ("stop", "length"):
            return f"finish_reason {reason!r} with no call, expected 'stop' or 'length'"
        return None

"""One request and its answer, captured raw, plus the reassembly of a stream into one message.

No I/O here: ``client`` fills an ``Exchange``; ``checks`` read it. Streams are kept chunk by chunk, exactly as
parsed from the wire, so a check can look at the deltas and a person can read them later.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson
from openai.lib.streaming._deltas import accumulate_delta  # what the client's ChatCompletionStreamState uses

from toolmatrix import jsontext
from toolmatrix.results import Cut

Mode = str  # "nonstream" | "stream"
MODES: tuple[Mode, ...] = ("nonstream", "stream")


@attrs.frozen
class Call:
    """A tool call as the engine returned it (``arguments`` is the raw string, or whatever non-string came)."""

    id: Any
    type: Any
    name: Any
    arguments: Any
    index: Any = None

    def parsed_arguments(self) -> dict | None:
        """The arguments as an object, or None when they are not a strict JSON string of an object."""
        if not isinstance(self.arguments, str):
            return None
        try:
            value = jsontext.loads(self.arguments)
        except jsontext.NotJSON:
            return None
        return value if isinstance(value, dict) else None


@attrs.frozen
class Message:
    """The assistant's answer, the same shape whether it came whole or in chunks."""

    content: str | None
    reasoning: str | None
    tool_calls: tuple[Call, ...]
    finish_reason: Any  # in the surface's own words
    cut: bool = False  # the output limit (max tokens) ended the answer


@attrs.frozen
class Exchange:
    """A request and what came back: a JSON body, a list of stream chunks, or an error."""

    mode: Mode
    request: dict
    http_status: int | None = None  # None when nothing came back
    response: Any = None  # parsed JSON body (non-stream, or the error body)
    chunks: tuple[Any, ...] = ()  # every stream chunk in order, parsed JSON (or the raw line if not JSON)
    error: str | None = None  # transport problem: timeout, refused connection, broken stream, answer over the limit
    latency_s: float = 0.0
    raw_text: str | None = None  # body text when it was not JSON
    cut: Cut | None = None  # the answer was longer than the client keeps
    broken_off: bool = False  # the engine began an answer (status and headers) and closed it unfinished
    api: str = "chat"  # the surface it went over (see ``surfaces``)

    @property
    def ok(self) -> bool:
        return self.error is None and self.http_status is not None and 200 <= self.http_status < 300

    def message(self) -> Message | None:
        """The answer as one message; None when there is none to read (error, or a body with no choice)."""
        if not self.ok:
            return None
        from toolmatrix.surfaces import surface  # surfaces builds on this module

        read = surface(self.api)
        return read.assemble(self.chunks) if self.mode == "stream" else read.message(self.response)


def _first_choice(body: Any) -> dict | None:
    if not isinstance(body, dict):
        return None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return None


def _call_from(raw: Any) -> Call:
    raw = raw if isinstance(raw, dict) else {}
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    return Call(raw.get("id"), raw.get("type"), function.get("name"), function.get("arguments"), raw.get("index"))


def _reasoning(message: dict) -> str | None:
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

    def add(self, delta: dict) -> None:
        self.id = self.id or delta.get("id")
        self.type = self.type or delta.get("type")
        function = delta.get("function") if isinstance(delta.get("function"), dict) else {}
        name = function.get("name")
        if name:
            # Joined like the official client joins it; a name of the wrong type is kept as sent, for the checks.
            self.name = self.name + name if isinstance(self.name, str) and isinstance(name, str) else name
        fragment = function.get("arguments")
        if isinstance(fragment, str):
            self.arguments = (self.arguments or "") + fragment

    def build(self) -> Call:
        return Call(self.id, self.type, self.name, self.arguments, self.index)


def stream_deltas(chunks: tuple[Any, ...]):
    """Yield ``(chunk_number, choice_delta, finish_reason)`` for every chunk that carries a first choice."""
    for number, chunk in enumerate(chunks):
        choice = _first_choice(chunk)
        if choice is None:
            continue
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
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
    snapshot: dict = {}
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

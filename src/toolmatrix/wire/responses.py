"""OpenAI's Responses API: a chat request said as its input items, its answers read back as the openai client's
stream state reads them, its stream grammar and status judged for the checks."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from toolmatrix.wire.answer import Call, Message
from toolmatrix.wire.base import (
    RESPONSES,
    Surface,
    _events,
    _flat_choice,
    _flat_tool,
    _key,
    _object,
    _short,
    _text,
    _text_parts,
    joined_text,
)


def _output_keys(chunks: Iterable[Any]) -> Iterator[tuple[int, dict[str, Any], Any]]:
    """Responses events with the output item each is about: its ``output_index``, or, from an engine that leaves
    that out (a wire_shape failure of its own), its item's id, so that two calls are still two."""
    by_id: dict[Any, Any] = {}
    for number, event in _events(chunks):
        item = _object(event.get("item"))
        item_id = _key(event.get("item_id", item.get("id")))
        key = _key(event["output_index"]) if "output_index" in event else by_id.get(item_id, item_id)
        if item_id is not None:
            by_id.setdefault(item_id, key)
        yield number, event, key


def _responses_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": joined_text(message.get("content"))}]
    if role != "assistant":
        return [{"role": role, "content": _text_parts(message.get("content"), "input_text")}]
    # An earlier answer's text as the answer's own output item: what a client replaying its history sends back.
    items: list[dict[str, Any]] = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": message["content"]}]}
             ] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                      "arguments": function.get("arguments")})
    return items


def _reasoning_text(item: dict[str, Any]) -> str | None:
    return _text(item.get("content"), ("reasoning_text",)) or _text(item.get("summary"), ("summary_text",))


def _output_message(items: list[Any], status: Any, incomplete: Any) -> Message:
    content, reasoning, calls = [], [], []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message" and (text := _text(item.get("content"), ("output_text",))) is not None:
            content.append(text)
        elif kind == "reasoning" and (text := _reasoning_text(item)) is not None:
            reasoning.append(text)
        elif kind == "function_call":
            calls.append(Call(item.get("call_id"), kind, item.get("name"), item.get("arguments")))
    why = incomplete.get("reason") if isinstance(incomplete, dict) else None
    return Message("".join(content) if content else None, "".join(reasoning) if reasoning else None, tuple(calls),
                   f"{status} ({why})" if why else status, cut=why == "max_output_tokens")


class Responses(Surface):
    id, path, wire_schema = RESPONSES, "/responses", "responses.schema.json"
    answer_key = "output"
    name = "Responses"

    def request(self, chat: dict[str, Any]) -> dict[str, Any]:
        renamed = {"messages": None, "tools": None, "tool_choice": None, "max_tokens": "max_output_tokens"}
        body = {new: v for k, v in chat.items() if (new := renamed.get(k, k))}
        body["input"] = [item for m in chat.get("messages", []) for item in _responses_items(m)]
        if "tools" in chat:
            body["tools"] = [_flat_tool(t) for t in chat["tools"]]
        if "tool_choice" in chat:
            body["tool_choice"] = _flat_choice(chat["tool_choice"])
        return body

    def message(self, body: Any) -> Message | None:
        if not isinstance(body, dict) or not isinstance(body.get("output"), list):
            return None
        return _output_message(body["output"], body.get("status"), body.get("incomplete_details"))

    def assemble(self, chunks: tuple[Any, ...]) -> Message:
        """As the openai client's stream state does: items as announced, their text and arguments from the deltas;
        the status from the terminal event."""
        items: dict[Any, dict[str, Any]] = {}
        final: dict[str, Any] = {}
        for _, event, index in _output_keys(chunks):
            kind = event["type"]
            if kind == "response.output_item.added" and isinstance(event.get("item"), dict):
                item = dict(event["item"])
                if item.get("type") == "function_call":
                    item["arguments"] = item.get("arguments") or ""
                items[index] = {**item, "content": [], "parts": []} if item.get("type") != "function_call" else item
            elif kind == "response.function_call_arguments.delta" and isinstance(event.get("delta"), str):
                item = items.setdefault(index, {"type": "function_call", "arguments": ""})
                item["arguments"] = (item.get("arguments") if isinstance(item.get("arguments"), str) else "") + event["delta"]
            elif kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
                items.setdefault(index, {"type": "message", "content": [], "parts": []})["parts"].append(event["delta"])
            elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
                items.setdefault(index, {"type": "reasoning", "content": [], "parts": []})["parts"].append(
                    str(event.get("delta", "")))
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                final = _object(event.get("response"))
        output = []
        for item in items.values():
            if "parts" in item:
                part = "output_text" if item.get("type") == "message" else "reasoning_text"
                item = {**item, "content": [{"type": part, "text": "".join(item["parts"])}] if item["parts"] else []}
            output.append(item)
        return _output_message(output, final.get("status"), final.get("incomplete_details"))

    def stream_problem(self, chunks: tuple[Any, ...]) -> str | None:
        """A call's argument deltas before its item is announced, a call announced without call_id or name, the
        arguments .done or output_item.done other than the deltas joined, an item never done, no terminal
        ``response.completed``, several items without ``output_index``, or a completed response whose calls are
        not the streamed ones."""
        calls: dict[Any, dict[str, Any]] = {}
        done: set[Any] = set()
        final = None
        for number, event, index in _output_keys(chunks):
            kind = event["type"]
            item = _object(event.get("item"))
            if kind == "error" or kind == "response.failed":  # the error event carries code and message itself
                said = event.get("error") or event.get("message") or event.get("response")
                return f"event {number}: {kind}: {_short(said, 120)}"
            if kind == "response.output_item.added" and item.get("type") == "function_call":
                if not item.get("call_id") or not item.get("name"):
                    return f"event {number}: function_call announced without call_id or name: {_short(item)}"
                calls[index] = {"name": item["name"], "arguments": item.get("arguments") or ""}
            elif kind == "response.function_call_arguments.delta":
                if index not in calls:
                    return f"event {number}: arguments delta for output {index}, which no function_call announced"
                calls[index]["arguments"] += str(event.get("delta", ""))
            elif kind == "response.function_call_arguments.done" and index in calls:
                if event.get("arguments") != calls[index]["arguments"]:
                    return (f"event {number}: arguments .done {_short(event.get('arguments'), 60)} != the deltas "
                            f"joined {_short(calls[index]['arguments'], 60)}")
            elif kind == "response.output_item.done":
                done.add(index)
                if index in calls and item.get("arguments") != calls[index]["arguments"]:
                    return (f"event {number}: output_item.done arguments {_short(item.get('arguments'), 60)} != the "
                            f"deltas joined {_short(calls[index]['arguments'], 60)}")
            elif kind in ("response.completed", "response.incomplete"):
                final = event.get("response")
        if final is None:
            return "no response.completed (or response.incomplete) event ended the stream"
        items = [e for _, e in _events(chunks) if e["type"] == "response.output_item.added"]
        if len(items) > 1 and any("output_index" not in e for _, e in _events(chunks) if "item_id" in e or "item" in e):
            # The openai client's stream state keys items by output_index: a second one so named makes it raise
            # ("Duplicate response output index None"); one alone it copes with.
            return f"{len(items)} output items streamed without output_index (named by item_id alone)"
        if missing := [i for i in calls if i not in done]:
            return f"function_call at output {missing[0]} never done (no response.output_item.done)"
        answer = self.message(final)
        whole = [(c.name, c.arguments) for c in answer.tool_calls] if answer else []
        streamed = [(c["name"], c["arguments"]) for c in calls.values()]
        if whole != streamed:
            return f"response.completed holds calls {_short(whole, 60)}, the events streamed {_short(streamed, 60)}"
        return None

    def finish_problem(self, message: Message, named_choice: bool) -> str | None:
        if message.finish_reason == "completed" or message.cut:
            return None
        return f"status {message.finish_reason!r}, expected 'completed' (or incomplete at max_output_tokens)"

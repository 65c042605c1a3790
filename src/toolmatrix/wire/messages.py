"""Anthropic's Messages API: a chat request said as its system text, turns and blocks, its answers read back as
the anthropic client's accumulator reads them, its stream grammar and stop reasons judged for the checks."""

from __future__ import annotations

import json
from typing import Any

from toolmatrix.base import jsontext
from toolmatrix.wire.answer import Call, Message
from toolmatrix.wire.base import (
    MESSAGES,
    Surface,
    _events,
    _flat_choice,
    _flat_tool,
    _key,
    _object,
    _short,
    _text_parts,
    joined_text,
)

MESSAGES_MAX_TOKENS = 1024  # the Messages API requires max_tokens; sent when the case and the model give none


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    try:
        value = jsontext.loads(arguments) if isinstance(arguments, str) else arguments
    except jsontext.NotJSON:
        value = arguments  # sent as it came: a broken argument string stays broken
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": value}


def _anthropic_messages(messages: list[dict[str, Any]]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The system text and the turns: tool results become tool_result blocks of one user turn, joined to their
    calls by ``tool_use_id``; an assistant's calls, tool_use blocks after its text."""
    system: list[Any] = []  # each system message's text, or its content as it came (request() keeps strings)
    turns: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            system.append(joined_text(content))
        elif role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": _text_parts(content, "text")}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list) and all(
                    b.get("type") == "tool_result" for b in turns[-1]["content"]):
                turns[-1]["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result]})
        elif role == "assistant" and message.get("tool_calls"):
            text = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
            turns.append({"role": "assistant", "content": text + [_tool_use(c) for c in message["tool_calls"]]})
        else:
            turns.append({"role": role, "content": _text_parts(content, "text")})
    return system, turns


_CHOICES = {"auto": "auto", "required": "any", "none": "none"}


def _anthropic_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return {"type": _CHOICES.get(choice, choice)}  # an unknown word stays unknown
    if isinstance(choice, dict) and "function" in choice:
        flat = _flat_choice(choice)
        return {**flat, "type": "tool" if flat.get("type") == "function" else flat.get("type")}
    return choice


def _anthropic_tool(tool: Any) -> Any:
    flat = _flat_tool(tool)
    if not (isinstance(flat, dict) and flat.get("type") == "function"):
        return tool
    out = {"name": flat.get("name"), "input_schema": flat.get("parameters") or {"type": "object", "properties": {}}}
    return {**out, "description": flat["description"]} if "description" in flat else out


def _block_message(blocks: list[Any], stop: Any) -> Message:
    content, reasoning, calls = [], [], []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            content.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reasoning.append(block["thinking"])
        elif kind == "tool_use":
            raw = block.get("input")
            # The object as a JSON string, the form every check reads; what is not an object stays as it came.
            arguments = block["partial_json"] if "partial_json" in block else (
                json.dumps(raw, ensure_ascii=False) if isinstance(raw, dict) else raw)
            calls.append(Call(block.get("id"), kind, block.get("name"), arguments))
    return Message("".join(content) if content else None, "".join(reasoning) if reasoning else None, tuple(calls),
                   stop, cut=stop == "max_tokens")


class Messages(Surface):
    id, path, wire_schema = MESSAGES, "/messages", "messages.schema.json"
    answer_key = "content"
    name = "Anthropic Messages"

    def request(self, chat: dict[str, Any]) -> dict[str, Any]:
        moved = ("messages", "tools", "tool_choice", "parallel_tool_calls")
        body = {k: v for k, v in chat.items() if k not in moved}
        system, body["messages"] = _anthropic_messages(chat.get("messages", []))
        if system:
            body["system"] = "\n\n".join(s for s in system if isinstance(s, str))
        body.setdefault("max_tokens", MESSAGES_MAX_TOKENS)
        if "tools" in chat:
            body["tools"] = [_anthropic_tool(t) for t in chat["tools"]]
        choice = _anthropic_choice(chat["tool_choice"]) if "tool_choice" in chat else None
        if chat.get("parallel_tool_calls") is False:
            choice = {**(choice if isinstance(choice, dict) else {"type": "auto"}), "disable_parallel_tool_use": True}
        if choice is not None:
            body["tool_choice"] = choice
        return body

    def message(self, body: Any) -> Message | None:
        if not isinstance(body, dict) or not isinstance(body.get("content"), list):
            return None
        return _block_message(body["content"], body.get("stop_reason"))

    def assemble(self, chunks: tuple[Any, ...]) -> Message:
        """As the anthropic client's stream accumulator does: blocks as started, text and thinking from their
        deltas, a tool_use's input from its input_json_delta fragments joined; the stop from message_delta."""
        blocks: dict[Any, dict[str, Any]] = {}
        stop = None
        for _, event in _events(chunks):
            kind, index = event["type"], _key(event.get("index"))
            if kind == "message_start" and isinstance(event.get("message"), dict):
                stop = event["message"].get("stop_reason")
            elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
                blocks[index] = dict(event["content_block"])
            elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
                block, delta = blocks.setdefault(index, {"type": "text", "text": ""}), event["delta"]
                if delta.get("type") == "input_json_delta":
                    block["partial_json"] = block.get("partial_json", "") + str(delta.get("partial_json", ""))
                elif delta.get("type") == "text_delta":
                    block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
                elif delta.get("type") == "thinking_delta":
                    block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
            elif kind == "message_delta" and isinstance(event.get("delta"), dict) and "stop_reason" in event["delta"]:
                stop = event["delta"]["stop_reason"]
        return _block_message(list(blocks.values()), stop)

    def stream_problem(self, chunks: tuple[Any, ...]) -> str | None:
        """No message_start first or message_stop last, a delta or stop for a block never started, a tool_use
        started without id or name, a tool_use fed other than input_json_delta, a block never stopped, an error
        event, or no message_delta with a stop_reason."""
        events = list(_events(chunks))
        if not events or events[0][1]["type"] != "message_start":
            return "the stream does not begin with message_start"
        open_blocks: dict[Any, str] = {}
        stopped: set[Any] = set()
        stop_reason = None
        for number, event in events:
            kind, index = event["type"], _key(event.get("index"))
            if kind == "error":
                return f"event {number}: error: {_short(event.get('error'), 120)}"
            if kind == "content_block_start":
                block = _object(event.get("content_block"))
                if block.get("type") == "tool_use" and (not block.get("id") or not block.get("name")):
                    return f"event {number}: tool_use block started without id or name: {_short(block)}"
                open_blocks[index] = str(block.get("type"))
            elif kind in ("content_block_delta", "content_block_stop") and index not in open_blocks:
                return f"event {number}: {kind} for block {index}, which no content_block_start began"
            elif kind == "content_block_delta":
                delta_kind = (event.get("delta") or {}).get("type")
                if open_blocks[index] == "tool_use" and delta_kind != "input_json_delta":
                    return f"event {number}: a {delta_kind} fed the tool_use block {index} (input_json_delta expected)"
            elif kind == "content_block_stop":
                stopped.add(index)
            elif kind == "message_delta":
                stop_reason = (event.get("delta") or {}).get("stop_reason") or stop_reason
        if unstopped := [i for i in open_blocks if i not in stopped]:
            return f"block {unstopped[0]} ({open_blocks[unstopped[0]]}) never stopped (no content_block_stop)"
        if stop_reason is None:
            return "no message_delta carried a stop_reason"
        if events[-1][1]["type"] != "message_stop":
            return "the stream does not end with message_stop"
        return None

    def finish_problem(self, message: Message, named_choice: bool) -> str | None:
        reason = message.finish_reason
        if message.tool_calls and reason not in ("tool_use", "max_tokens"):
            return f"stop_reason {reason!r} with {len(message.tool_calls)} tool_use block(s), expected 'tool_use'"
        if not message.tool_calls and reason not in ("end_turn", "max_tokens", "stop_sequence"):
            return f"stop_reason {reason!r} with no tool_use, expected 'end_turn'"
        return None

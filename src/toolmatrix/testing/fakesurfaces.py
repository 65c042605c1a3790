"""The fake server's Responses and Messages endpoints: what an engine does that serves them over its chat core.

A request over either surface is read back into a chat request (as llama-server and vLLM convert them), the fake
'model' answers it, and the answer is written in the surface's own shapes, whole or as its stream of events.
Each fault in ``SURFACE_FAULTS`` bends that the way a real engine or proxy was seen to; the chat faults that bend
the answer itself (calls dropped, left unparsed, markers leaked) carry over to every surface unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from toolmatrix.wire.base import joined_text
from toolmatrix.wire.surfaces import MESSAGES, RESPONSES

SURFACE_FAULTS = {
    "resp_status_wrong": "Responses: a finished answer with status 'in_progress'",
    "resp_stream_done_mismatch": "Responses: function_call_arguments.done carries other arguments than its deltas",
    "resp_stream_no_completed": "Responses: the stream ends without response.completed",
    "resp_stream_calls_only_at_end": "Responses: function calls are not streamed, only the final response holds them",
    "resp_error_shape": "Responses: an invalid request refused with a bare string, not an error object",
    "resp_stream_no_output_index": "Responses: stream events name their item by item_id only, no output_index "
                                   "(llama-server b11434)",
    "msg_input_string": "Messages: tool_use.input is a JSON string instead of an object",
    "msg_stop_end_turn": "Messages: stop_reason 'end_turn' although tool_use blocks are returned",
    "msg_stream_text_delta_tool": "Messages: a tool_use block's input streamed as text_delta, not input_json_delta",
    "msg_stream_no_block_stop": "Messages: no content_block_stop for the blocks",
    "msg_stream_no_message_stop": "Messages: the stream ends without message_stop",
    "msg_error_shape": "Messages: an invalid request refused in OpenAI's error shape, not {type: error, error}",
}


def _pieces(text: Any, size: int = 7) -> list[Any]:
    if not isinstance(text, str):
        return [text]
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# -- requests, back into chat -------------------------------------------------------------------------------------


def _chat_tool(name: Any, description: Any, parameters: Any) -> dict:
    function = {"name": name, **({"description": description} if description is not None else {})}
    return {"type": "function", "function": {**function, **({"parameters": parameters} if parameters else {})}}


def _named(choice: dict, kind: Any) -> dict:
    return {"type": kind, **({"function": {"name": choice["name"]}} if "name" in choice else {})}


def _responses_to_chat(body: dict) -> dict:
    messages: list[dict] = [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        kind = item.get("type")
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        else:
            messages.append({"role": item.get("role"), "content": joined_text(item.get("content"), ("input_text", "output_text"))})
    chat = {k: v for k, v in body.items() if k not in ("input", "instructions", "tools", "tool_choice", "max_output_tokens")}
    chat["messages"] = messages
    if "tools" in body:
        chat["tools"] = [_chat_tool(t.get("name"), t.get("description"), t.get("parameters"))
                         if isinstance(t, dict) and t.get("type") == "function" else t for t in body["tools"]]
    if "tool_choice" in body:
        choice = body["tool_choice"]
        chat["tool_choice"] = _named(choice, choice.get("type")) if isinstance(choice, dict) and "name" in choice else choice
    if "max_output_tokens" in body:
        chat["max_tokens"] = body["max_output_tokens"]
    return chat


_CHAT_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def _messages_to_chat(body: dict) -> dict:
    messages: list[dict] = [{"role": "system", "content": body["system"]}] if body.get("system") else []
    for turn in body.get("messages") or []:
        content = turn.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if turn.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input"))}}
                     for b in blocks if b.get("type") == "tool_use"]
            messages.append({"role": "assistant", "content": texts or None, **({"tool_calls": calls} if calls else {})})
            continue
        messages += [{"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": joined_text(b.get("content"))}
                     for b in blocks if b.get("type") == "tool_result"]
        if any(b.get("type") == "text" for b in blocks):
            messages.append({"role": turn.get("role"), "content": texts})
    chat = {k: v for k, v in body.items() if k not in ("system", "messages", "tools", "tool_choice")}
    chat["messages"] = messages
    if "tools" in body:
        chat["tools"] = [_chat_tool(t.get("name"), t.get("description"), t.get("input_schema")) for t in body["tools"]]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        if choice.get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
        kind = choice.get("type")
        chat["tool_choice"] = _named(choice, "function" if kind == "tool" else kind) if kind == "tool" or "name" in choice \
            else _CHAT_CHOICES.get(kind, kind) if isinstance(kind, str) else kind
    elif "tool_choice" in body:
        chat["tool_choice"] = choice
    return chat


def to_chat(api: str, body: dict) -> dict:
    """A surface's request as the chat request an engine's core would take."""
    return _responses_to_chat(body) if api == RESPONSES else _messages_to_chat(body)


# -- answers, in the surface's shapes -----------------------------------------------------------------------------


def error(api: str, status: int, message: str, faults: frozenset[str]) -> dict:
    if api == MESSAGES and "msg_error_shape" not in faults:
        return {"type": "error", "error": {"type": "invalid_request_error" if status < 500 else "api_error",
                                           "message": message}}
    if api == RESPONSES and "resp_error_shape" in faults:
        return {"error": message}
    return {"error": {"message": message, "type": "invalid_request_error", "code": status}}


def _responses_output(content: str | None, reasoning: str | None, calls: list[dict]) -> list[dict]:
    output: list[dict] = []
    if reasoning:
        output.append({"type": "reasoning", "id": "rs_0", "summary": [],
                       "content": [{"type": "reasoning_text", "text": reasoning}]})
    if content:
        output.append({"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": content, "annotations": []}]})
    for number, call in enumerate(calls):
        item = {"type": "function_call", "id": f"fc_{number}", "name": call["function"]["name"],
                "arguments": call["function"]["arguments"], "status": "completed"}
        output.append({**item, "call_id": call["id"]} if "id" in call else item)
    return output


def _responses(content: str | None, reasoning: str | None, calls: list[dict], finish: str,
               faults: frozenset[str], stream: bool) -> Any:
    output = _responses_output(content, reasoning, calls)
    status = "in_progress" if "resp_status_wrong" in faults else "incomplete" if finish == "length" else "completed"
    body = {"id": "resp_fake", "object": "response", "model": "fake", "status": status, "output": output,
            **({"incomplete_details": {"reason": "max_output_tokens"}} if finish == "length" else {})}
    if not stream:
        return body
    events: list[dict] = [{"type": "response.created", "response": {**body, "status": "in_progress", "output": []}}]
    for index, item in enumerate(output):
        if item["type"] == "function_call" and "resp_stream_calls_only_at_end" in faults:
            continue
        fresh = {**item, "arguments": ""} if item["type"] == "function_call" else {**item, "content": []}
        events.append({"type": "response.output_item.added", "output_index": index, "item": fresh})
        if item["type"] == "function_call":
            events += [{"type": "response.function_call_arguments.delta", "output_index": index, "item_id": item["id"],
                        "delta": piece} for piece in _pieces(item["arguments"])]
            done = item["arguments"] + " " if "resp_stream_done_mismatch" in faults else item["arguments"]
            events.append({"type": "response.function_call_arguments.done", "output_index": index,
                           "item_id": item["id"], "arguments": done})
        else:
            kind = "output_text" if item["type"] == "message" else "reasoning_text"
            events += [{"type": f"response.{kind}.delta", "output_index": index, "content_index": 0, "delta": piece}
                       for piece in _pieces(item["content"][0]["text"])]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    if "resp_stream_no_completed" not in faults:
        events.append({"type": f"response.{'incomplete' if finish == 'length' else 'completed'}", "response": body})
    if "resp_stream_no_output_index" in faults:
        events = [{k: v for k, v in e.items() if k != "output_index"} for e in events]
    return events


_STOPS = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}


def _tool_use(call: dict, faults: frozenset[str]) -> dict:
    arguments = call["function"]["arguments"]
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        value = arguments  # what the model wrote cannot be an object: sent as it is
    block = {"type": "tool_use", "name": call["function"]["name"],
             "input": json.dumps(value) if "msg_input_string" in faults else value}
    return {**block, "id": call["id"]} if "id" in call else block


def _messages(content: str | None, reasoning: str | None, calls: list[dict], finish: str,
              faults: frozenset[str], stream: bool) -> Any:
    blocks = ([{"type": "thinking", "thinking": reasoning, "signature": ""}] if reasoning else []) + (
        [{"type": "text", "text": content}] if content else []) + [_tool_use(c, faults) for c in calls]
    stop = "end_turn" if "msg_stop_end_turn" in faults else _STOPS.get(finish, finish)
    body = {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": blocks,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    if not stream:
        return body
    events: list[dict] = [{"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}]
    raw_arguments = iter(c["function"]["arguments"] for c in calls)
    for index, block in enumerate(blocks):
        kind = block["type"]
        start = {**block, "input": {}} if kind == "tool_use" else {**block, kind: ""}
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if kind == "tool_use":
            delta = "text_delta" if "msg_stream_text_delta_tool" in faults else "input_json_delta"
            key = "text" if delta == "text_delta" else "partial_json"
            events += [{"type": "content_block_delta", "index": index, "delta": {"type": delta, key: piece}}
                       for piece in _pieces(next(raw_arguments))]
        else:
            events += [{"type": "content_block_delta", "index": index, "delta": {"type": f"{kind}_delta", kind: piece}}
                       for piece in _pieces(block[kind])]
        if "msg_stream_no_block_stop" not in faults:
            events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": 1}})
    if "msg_stream_no_message_stop" not in faults:
        events.append({"type": "message_stop"})
    return events


def answer(api: str, content: str | None, reasoning: str | None, calls: list[dict], finish: str,
           faults: frozenset[str], stream: bool) -> Any:
    """The answer in the surface's shape: a body, or the list of its stream's events."""
    write = _responses if api == RESPONSES else _messages
    return write(content, reasoning, calls, finish, faults, stream)

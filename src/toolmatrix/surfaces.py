"""The API surfaces a case is sent over: Chat Completions, OpenAI's Responses API, Anthropic's Messages API.

The case library and the runner speak Chat Completions. A surface translates a chat request into its own wire
form, faithfully (tools, ``tool_choice``, parallel calls, multi-turn calls and results joined by their ids), and
reads its answers, whole or streamed, back into the one ``Message`` every check reads, as that surface's official
client reads them. What only a surface has is judged here for the checks: its stream's grammar and its stop words.
No I/O here: ``client`` sends, ``checks`` judge.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

from toolmatrix import jsontext
from toolmatrix.exchange import Call, Message, assemble_stream, message_from_response, stream_deltas

CHAT, RESPONSES, MESSAGES = "chat", "responses", "messages"
MESSAGES_MAX_TOKENS = 1024  # the Messages API requires max_tokens; sent when the case and the model give none


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


def _events(chunks: Iterable[Any]) -> Iterator[tuple[int, dict]]:
    """``(number, event)`` for every stream payload that is an object with a string ``type``."""
    for number, event in enumerate(chunks):
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            yield number, event


def _output_keys(chunks: Iterable[Any]) -> Iterator[tuple[int, dict, Any]]:
    """Responses events with the output item each is about: its ``output_index``, or, from an engine that leaves
    that out (a wire_shape failure of its own), its item's id, so that two calls are still two."""
    by_id: dict[Any, Any] = {}
    for number, event in _events(chunks):
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        item_id = _key(event.get("item_id", item.get("id")))
        key = _key(event["output_index"]) if "output_index" in event else by_id.get(item_id, item_id)
        if item_id is not None:
            by_id.setdefault(item_id, key)
        yield number, event, key


class Surface:
    """One API surface: where requests go, how a chat request is said there, and how its answers read."""

    id: str
    name: str  # as a person knows it (the page's label)
    path: str  # below the base URL's /v1
    wire_schema: str  # the JSON Schema file with $defs completion, chunk (and error, where checked)
    checks_error_shape = True  # a 4xx answer in the surface's own error shape (wire_shape)

    def request(self, chat: dict) -> dict:
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


# -- Chat Completions ---------------------------------------------------------------------------------------------


class Chat(Surface):
    id, path, wire_schema = CHAT, "/chat/completions", "chat-response.schema.json"
    name = "Chat Completions"
    checks_error_shape = False  # engines' chat errors predate this check; the openai client copes with any shape

    def request(self, chat: dict) -> dict:
        return chat

    def message(self, body: Any) -> Message | None:
        return message_from_response(body)

    def assemble(self, chunks: tuple[Any, ...]) -> Message:
        return assemble_stream(chunks)

    def stream_problem(self, chunks: tuple[Any, ...]) -> str | None:
        """Tool-call deltas without an integer index, a first delta without id or name, an index reused by
        another call, a name sent again (a client joins it: NAMENAME), a fragment not a string, no finish."""
        seen: dict[int, dict] = {}
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


# -- the Responses API --------------------------------------------------------------------------------------------


def _text_parts(content: Any, kind: str) -> Any:
    """Chat's text parts as the surface names them (Responses ``input_text``, Messages ``text``)."""
    if not isinstance(content, list):
        return content
    return [{"type": kind, "text": p.get("text")} if isinstance(p, dict) and p.get("type") == "text" else p
            for p in content]


def _responses_items(message: dict) -> list[dict]:
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": joined_text(message.get("content"))}]
    if role != "assistant":
        return [{"role": role, "content": _text_parts(message.get("content"), "input_text")}]
    # An earlier answer's text as the answer's own output item: what a client replaying its history sends back.
    items = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": message["content"]}]}
             ] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                      "arguments": function.get("arguments")})
    return items


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


def _reasoning_text(item: dict) -> str | None:
    return _text(item.get("content"), ("reasoning_text",)) or _text(item.get("summary"), ("summary_text",))


def _output_message(items: list, status: Any, incomplete: Any) -> Message:
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
    name = "Responses"

    def request(self, chat: dict) -> dict:
        renamed = {"messages": None, "tools": None, "tool_choice": None, "max_tokens": "max_output_tokens"}
        body = {renamed.get(k, k): v for k, v in chat.items() if renamed.get(k, k)}
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
        items: dict[Any, dict] = {}
        final: dict = {}
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
                final = event.get("response") if isinstance(event.get("response"), dict) else {}
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
        calls: dict[Any, dict] = {}
        done: set = set()
        final = None
        for number, event, index in _output_keys(chunks):
            kind = event["type"]
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
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


# -- the Anthropic Messages API -----------------------------------------------------------------------------------


def _tool_use(call: dict) -> dict:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    try:
        value = jsontext.loads(arguments) if isinstance(arguments, str) else arguments
    except jsontext.NotJSON:
        value = arguments  # sent as it came: a broken argument string stays broken
    return {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": value}


def _anthropic_messages(messages: list[dict]) -> tuple[list[str], list[dict]]:
    """The system text and the turns: tool results become tool_result blocks of one user turn, joined to their
    calls by ``tool_use_id``; an assistant's calls, tool_use blocks after its text."""
    system, turns = [], []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            system.append(joined_text(content))
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": _text_parts(content, "text")}
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


def _block_message(blocks: list, stop: Any) -> Message:
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
    name = "Anthropic Messages"

    def request(self, chat: dict) -> dict:
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
        blocks: dict[Any, dict] = {}
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
        stopped: set = set()
        stop_reason = None
        for number, event in events:
            kind, index = event["type"], _key(event.get("index"))
            if kind == "error":
                return f"event {number}: error: {_short(event.get('error'), 120)}"
            if kind == "content_block_start":
                block = event.get("content_block") if isinstance(event.get("content_block"), dict) else {}
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


SURFACES: dict[str, Surface] = {s.id: s for s in (Chat(), Responses(), Messages())}


def surface(api: str) -> Surface:
    return SURFACES[api]

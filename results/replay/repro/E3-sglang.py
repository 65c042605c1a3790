# Triage cluster E3 (engine bug; results/replay/TRIAGE.md): SGLang gpt-oss: a call that is the completion's first
# message (no analysis before it, so the generation prompt already wrote its `<|start|>assistant`:
# `<|channel|>commentary to=functions.x <|constrain|>json<|message|> …<|call|>`) is left in content non-streamed,
# while the stream reads the call: `GptOssDetector.has_tool_call` asks for
# `<|start|>assistant<|channel|>commentary`, which the completion itself never writes for its first message. After
# an analysis message (the plain fixtures) the call is read both ways.
# Replay fixture harmony.variant.call_first on sglang==0.5.23: the non-streamed answer, and the stream cut by chunking 'token'.
# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
# The fixture expects: {"content": null, "reasoning": null, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
TEXT = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>'
TOOLS = [{'type': 'function',
  'function': {'name': 'get_weather',
               'parameters': {'type': 'object',
                              'properties': {'city': {'type': 'string'}, 'unit': {'type': 'string'}},
                              'required': ['city']}}},
 {'type': 'function',
  'function': {'name': 'search',
               'parameters': {'type': 'object',
                              'properties': {'query': {'type': 'string'},
                                             'filters': {'type': 'object'},
                                             'limit': {'type': 'integer'}},
                              'required': ['query']}}},
 {'type': 'function', 'function': {'name': 'ping', 'parameters': {'type': 'object', 'properties': {}}}}]
TOOL_PARSER = 'gpt-oss'
REASONING_PARSER = 'gpt-oss'
CHAT_TEMPLATE_KWARGS = {}
PIECES = [('<|channel|>', [200005]),
 ('comment', [12606]),
 ('ary', [815]),
 (' to', [316]),
 ('=', [28]),
 ('functions', [44580]),
 ('.get', [775]),
 ('_weather', [170154]),
 (' ', [220]),
 ('<|constrain|>', [200003]),
 ('json', [4108]),
 ('<|message|>', [200008]),
 ('{"', [10848]),
 ('city', [17500]),
 ('":"', [7534]),
 ('Paris', [72782]),
 ('"}', [18583]),
 ('<|call|>', [200012])]

# SGLang's own parsers, called as its OpenAI server calls them (srt/entrypoints/openai/serving_chat.py): the
# reasoning split first, then the tool calls from what is left; streamed, per piece, with the server's final
# check for call arguments not yet sent. Needs only the sglang package. Run: python THIS_FILE
import json
import types

from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest, Function, Tool
from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser

tools = [Tool(type="function", function=Function(**t["function"])) for t in TOOLS]
request = ChatCompletionRequest(model="repro", messages=[{"role": "user", "content": "repro"}], tools=tools or None,
                                chat_template_kwargs=CHAT_TEMPLATE_KWARGS or None)
# The server's force_reasoning: its template manager's (False here: no chat template is rendered) or, as the
# server reads the request's thinking switch, OpenAIServingChat._get_reasoning_from_request.
server = types.SimpleNamespace(
    reasoning_parser=REASONING_PARSER, template_manager=types.SimpleNamespace(reasoning_config=None, force_reasoning=False),
    _reasoning_detector=ReasoningParser(model_type=REASONING_PARSER, stream_reasoning=True).detector
    if REASONING_PARSER else None)
force_reasoning = bool(REASONING_PARSER) and OpenAIServingChat._get_reasoning_from_request(server, request)


def call_id(name, index):
    # serving_chat._process_tool_call_id: Kimi K2's ids are functions.NAME:INDEX, the others random (call_N here)
    return f"functions.{name}:{index}" if TOOL_PARSER == "kimi_k2" else f"call_{index}"


def reasoning_parser(stream):
    return ReasoningParser(model_type=REASONING_PARSER, stream_reasoning=stream, force_reasoning=force_reasoning,
                           request=request, tool_call_parser_active=bool(TOOL_PARSER))


# Non-streamed
text, reasoning, calls = TEXT, None, []
if REASONING_PARSER:
    reasoning, text = reasoning_parser(stream=False).parse_non_stream(text)
parser = FunctionCallParser(tools, TOOL_PARSER) if tools else None  # no tools offered: no tool parser runs
if parser is not None and parser.has_tool_call(text):
    try:
        rest, items = parser.parse_non_stream(text)
    except Exception:  # the server logs it and keeps the text as content
        rest, items = text, []
    if items:  # an incomplete call is dropped and the text kept
        text = rest
        calls = [{"id": call_id(c.name, i), "type": "function", "function": {"name": c.name, "arguments": c.parameters}}
                 for i, c in enumerate(items)]
message = {"role": "assistant", "content": text, "reasoning_content": reasoning, "tool_calls": calls}
print("non-streamed message:", json.dumps(message, ensure_ascii=False))

# Streamed, one delta per piece
if PIECES is not None:
    rp = reasoning_parser(stream=True) if REASONING_PARSER else None
    fp = FunctionCallParser(tools, TOOL_PARSER) if tools else None
    deltas, seen = [], 0
    for number, (piece, _ids) in enumerate(PIECES):
        last, delta = number == len(PIECES) - 1, piece
        if rp is not None:
            reasoning, delta = rp.parse_stream_chunk(piece)
            if last:
                end_reasoning, end_normal = rp.parse_stream_end()
                reasoning, delta = (reasoning or "") + (end_reasoning or ""), (delta or "") + (end_normal or "")
            if reasoning:
                deltas.append({"reasoning_content": reasoning})
        if fp is None:
            deltas += [{"content": delta}] if delta else []
            continue
        normal, items = fp.parse_stream_chunk(delta or "")
        if last:
            end_text, end_items = fp.parse_stream_end()
            normal, items = (normal or "") + end_text, list(items) + end_items
        if normal:
            deltas.append({"content": normal})
        for item in items:
            call = {"index": item.tool_index, "function": {"arguments": item.parameters}}
            if item.name:
                call.update(id=call_id(item.name, seen), type="function")
                call["function"]["name"] = item.name
                seen += 1
            deltas.append({"tool_calls": [call]})
    # serving_chat._check_for_unstreamed_tool_args: the last call's arguments not yet sent go out at the end
    calls, sent = (fp.detector.prev_tool_call_arr, fp.detector.streamed_args_for_tool) if fp else ([], [])
    if calls and len(calls) - 1 < len(sent):
        index = len(calls) - 1
        expected = calls[index].get("arguments", {})
        expected = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
        remaining = expected[len(sent[index]):] if expected.startswith(sent[index]) else ""
        if remaining:
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": remaining}}]})
    print("streamed deltas:")
    for delta in deltas:
        print(json.dumps(delta, ensure_ascii=False))

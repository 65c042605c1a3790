# Triage cluster E6 (engine bug; results/replay/TRIAGE.md): Streamed in pieces: text before a call loses its tail
# when one delta holds the end of the text and the start of the marker (`"Let me check that for"` instead of `"...
# for you."`): SGLang Hermes, pythonic, DeepSeek, GLM-4.5. (vLLM's DeepSeek parsers showed the same; vLLM's DeepSeek
# families are now a cannot-replay cell: the offline DeepSeek V3 vocabulary lacks the `<think>` its reasoning parser
# needs.)
# Replay fixture deepseek_v3.choose.time_not_weather.text_before on sglang==0.5.23: the non-streamed answer, and the stream cut by chunking 'random'.
# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
# The fixture expects: {"content": "Let me check that for you.", "reasoning": "The user wants the weather, so I call the tool.", "tool_calls": [{"name": "get_time", "arguments": {"timezone": "europe/london"}}]}
TEXT = ('<think>\n'
 'The user wants the weather, so I call the tool.\n'
 '</think>\n'
 '\n'
 'Let me check that for you.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n'
 '```json\n'
 '{"timezone": "europe/london"}\n'
 '```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
TOOLS = [{'type': 'function',
  'function': {'name': 'get_weather',
               'description': 'Get the current weather for a city.',
               'parameters': {'type': 'object',
                              'properties': {'city': {'type': 'string',
                                                      'description': 'City name, e.g. "Paris" or "San Francisco".'},
                                             'unit': {'type': 'string',
                                                      'enum': ['celsius', 'fahrenheit'],
                                                      'description': 'Temperature unit. Defaults to celsius.'}},
                              'required': ['city'],
                              'additionalProperties': False}}},
 {'type': 'function',
  'function': {'name': 'get_forecast',
               'description': 'Get the daily weather forecast for a city for the next few days.',
               'parameters': {'type': 'object',
                              'properties': {'city': {'type': 'string', 'description': 'City name.'},
                                             'days': {'type': 'integer',
                                                      'minimum': 1,
                                                      'maximum': 14,
                                                      'description': 'Number of days to forecast (1 to 14).'}},
                              'required': ['city', 'days'],
                              'additionalProperties': False}}},
 {'type': 'function',
  'function': {'name': 'get_time',
               'description': 'Get the current local time in a timezone.',
               'parameters': {'type': 'object',
                              'properties': {'timezone': {'type': 'string',
                                                          'description': 'IANA timezone name, e.g. "Europe/Paris" '
                                                                         'or "Asia/Tokyo".'}},
                              'required': ['timezone'],
                              'additionalProperties': False}}}]
TOOL_PARSER = 'deepseekv3'
REASONING_PARSER = 'deepseek-v3'
CHAT_TEMPLATE_KWARGS = {'thinking': True}
PIECES = [('<think>\nThe user', [30, 37947, 1018, 671, 3967]),
 (' wants the weather, so', [10059, 270, 9670, 14, 832]),
 (' I call', [342, 1926]),
 (' the tool.\n</', [270, 4105, 603, 1718]),
 ('think>\n\nLet me', [37947, 4697, 5718, 678]),
 (' check', [4085]),
 (' that for', [396, 362]),
 (' you.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time',
  [440, 16, 128806, 128808, 8701, 128814, 1133, 20035]),
 ('\n```json', [201, 9854, 14479]),
 ('\n', [201]),
 ('{"timezone": "europe', [24313, 8322, 16448, 3362, 582, 71, 22503]),
 ('/london"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>', [7923, 5941, 60676, 9854, 128809, 128807]),
 ('', [1])]

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

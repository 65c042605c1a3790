# Triage cluster L8 (engine bug; results/replay/TRIAGE.md): LMDeploy Hermes (`qwen-qwq` reasoning parser), streamed:
# when one delta holds `<think>` and the reasoning after it (`<think>\nThe user wants the weather`),
# `QwenQwQReasoningParser.extract_reasoning_content_streaming` sends the marker inside reasoning_content; it strips
# `<think>` only when the marker is a delta of its own. The non-streamed parse is right. (The earlier part of this
# cluster, plain text read as reasoning, was the replay's: thinking was not asked.)
# Replay fixture hermes.choose.time_not_weather.think on lmdeploy==0.12.2: the non-streamed answer, and the stream cut by chunking 'random'.
# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
# The fixture expects: {"content": null, "reasoning": "The user wants the weather, so I call the tool.", "tool_calls": [{"name": "get_time", "arguments": {"timezone": "europe/london"}}]}
TEXT = ('<think>\n'
 'The user wants the weather, so I call the tool.\n'
 '</think>\n'
 '\n'
 '<tool_call>\n'
 '{"name": "get_time", "arguments": {"timezone": "europe/london"}}\n'
 '</tool_call>')
TOKEN_IDS = [151667,
 198,
 785,
 1196,
 6801,
 279,
 9104,
 11,
 773,
 358,
 1618,
 279,
 5392,
 624,
 151668,
 271,
 151657,
 198,
 4913,
 606,
 788,
 330,
 455,
 3009,
 497,
 330,
 16370,
 788,
 5212,
 43271,
 788,
 330,
 68,
 4084,
 13328,
 6474,
 95642,
 151658,
 151645]
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
TOOL_PARSER = 'qwen3'
REASONING_PARSER = 'qwen-qwq'
CHAT_TEMPLATE_KWARGS = {'enable_thinking': True}
TOKENIZER = 'Qwen/Qwen3-8B'
PIECES = [('<think>\nThe user wants the weather', [151667, 198, 785, 1196, 6801, 279, 9104]),
 (', so I call the', [11, 773, 358, 1618, 279]),
 (' tool.\n</think>\n\n<tool_call>', [5392, 624, 151668, 271, 151657]),
 ('\n{"name": "get_time', [198, 4913, 606, 788, 330, 455, 3009]),
 ('", "', [497, 330]),
 ('arguments', [16370]),
 ('": {"timezone":', [788, 5212, 43271, 788]),
 (' "europe', [330, 68, 4084]),
 ('/london"}}\n</tool_call>', [13328, 6474, 95642, 151658, 151645])]

# LMDeploy's own parsers, called as its OpenAI server calls them (lmdeploy/serve/openai/api_server.py): the tool
# parser first, then the reasoning parser on what it left (skipped when the request turns thinking off); gpt-oss
# through harmony_utils.GptOssChatParser on token ids. Streamed: per piece, with the text and token ids so far.
# Needs only the lmdeploy package (and the transformers it installs, for the model's tokenizer); TOKENIZER is the
# model's Hugging Face repo (offline: that repo's tokenizer.json and tokenizer_config.json in the Hugging Face cache, HF_HUB_OFFLINE=1).
# Call ids are random, as on the server. Run: python THIS_FILE
import json

from lmdeploy.serve.openai import harmony_utils, protocol
from lmdeploy.serve.openai.reasoning_parser import ReasoningParserManager
from lmdeploy.serve.openai.tool_parser import ToolParserManager
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
request = protocol.ChatCompletionRequest(model="repro", messages=[{"role": "user", "content": "repro"}],
                                         tools=TOOLS or None, tool_choice="auto",
                                         chat_template_kwargs=CHAT_TEMPLATE_KWARGS or None)
thinking = (request.chat_template_kwargs or {}).get("enable_thinking") is not False  # api_server.py:464-472
harmony = TOOL_PARSER == "GptOssChatParser"  # built for GptOssForCausalLM models, with no flag


def encode(text):
    return list(tokenizer.encode(text, add_special_tokens=False))


def parsers():
    # api_server.set_parsers: one object per name, built with the model's tokenizer
    return (ToolParserManager.get(TOOL_PARSER)(tokenizer) if TOOL_PARSER and not harmony else None,
            ReasoningParserManager.get(REASONING_PARSER)(tokenizer) if REASONING_PARSER else None)


def show(message):
    return json.dumps(json.loads(message.model_dump_json()), ensure_ascii=False)


def non_streamed():
    if harmony:
        return harmony_utils.GptOssChatParser().parse_full(TOKEN_IDS or encode(TEXT))
    tool_parser, reasoning_parser = parsers()
    text, calls, reasoning = TEXT, None, None
    if tool_parser is not None:
        info = tool_parser.extract_tool_calls(text, request=request)
        text, calls = info.content, info.tool_calls
    if reasoning_parser is not None and thinking:
        reasoning, text = reasoning_parser.extract_reasoning_content(text, request)
    return protocol.ChatMessage(role="assistant", content=text, tool_calls=calls, reasoning_content=reasoning)


# Non-streamed
try:
    print("non-streamed message:", show(non_streamed()))
except Exception as exc:  # api_server.py:625-627: the parser raising is logged and answered with HTTP 400
    print(f"non-streamed answer: HTTP 400 Failed to parse fc related info to json format! ({type(exc).__name__}: {exc})")

# Streamed, one engine step per piece
if PIECES is not None:
    print("streamed deltas:")
    pieces = [(text, ids if ids is not None else encode(text)) for text, ids in PIECES]
    # async_engine.py:444-517: a step without text (the stop token's) sends no ids, and one more output follows
    # the engine's last, "" with the finish reason; each goes through the parsers (no end-of-stream flush)
    *body, (text, ids) = pieces
    pieces = [*body, (text, ids if text else []), ("", [])]
    if harmony:
        stream = harmony_utils.GptOssChatParser()
        for _text, ids in pieces:
            print(show(stream.parse_streaming(ids)))
    else:
        tool_parser, reasoning_parser = parsers()
        previous_text, previous_ids = "", []
        for text, ids in pieces:
            delta = protocol.DeltaMessage(role="assistant", content=text)
            current_text, current_ids = previous_text + text, previous_ids + ids
            if tool_parser is not None:
                tool_delta = tool_parser.extract_tool_calls_streaming(
                    previous_text=previous_text, current_text=current_text, delta_text=delta.content,
                    previous_token_ids=previous_ids, current_token_ids=current_ids, delta_token_ids=ids,
                    request=request)
                if tool_delta is not None:
                    delta.tool_calls, delta.content = tool_delta.tool_calls, tool_delta.content
            if reasoning_parser is not None and thinking:
                reasoning_delta = reasoning_parser.extract_reasoning_content_streaming(
                    previous_text=previous_text, current_text=current_text, delta_text=delta.content or "",
                    previous_token_ids=previous_ids, current_token_ids=current_ids, delta_token_ids=ids)
                if reasoning_delta is not None:
                    delta.reasoning_content, delta.content = reasoning_delta.reasoning_content, reasoning_delta.content
            previous_text, previous_ids = current_text, current_ids
            print(show(delta))

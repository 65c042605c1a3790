# Triage cluster L4 (engine bug; results/replay/TRIAGE.md): LMDeploy gpt-oss, streamed: every argument delta of one
# call carries a fresh random id (`GptOssChatParser.parse_streaming` builds `DeltaToolCall(index=..., function=...)`
# without the call's id, so the model's default factory mints a new one); clients that key calls by id split or
# merge them.
# Replay fixture harmony.choose.time_not_weather.plain on lmdeploy==0.12.2: the non-streamed answer, and the stream cut by chunking 'token'.
# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
# The fixture expects: {"content": null, "reasoning": "The user wants the weather, so I call the tool.", "tool_calls": [{"name": "get_time", "arguments": {"timezone": "europe/london"}}]}
TEXT = ('<|channel|>analysis<|message|>The user wants the weather, so I call the '
 'tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time '
 '<|constrain|>json<|message|>{"timezone":"europe/london"}')
TOKEN_IDS = [200005,
 35644,
 200008,
 976,
 1825,
 10648,
 290,
 11122,
 11,
 813,
 357,
 2421,
 290,
 4584,
 13,
 200007,
 200006,
 173781,
 200005,
 12606,
 815,
 316,
 28,
 44580,
 775,
 6425,
 220,
 200003,
 4108,
 200008,
 10848,
 106775,
 7534,
 68,
 83224,
 16347,
 8552,
 18583,
 200012]
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
TOOL_PARSER = 'GptOssChatParser'
REASONING_PARSER = None
CHAT_TEMPLATE_KWARGS = {}
TOKENIZER = 'openai/gpt-oss-20b'
PIECES = [('<|channel|>', [200005]),
 ('analysis', [35644]),
 ('<|message|>', [200008]),
 ('The', [976]),
 (' user', [1825]),
 (' wants', [10648]),
 (' the', [290]),
 (' weather', [11122]),
 (',', [11]),
 (' so', [813]),
 (' I', [357]),
 (' call', [2421]),
 (' the', [290]),
 (' tool', [4584]),
 ('.', [13]),
 ('<|end|>', [200007]),
 ('<|start|>', [200006]),
 ('assistant', [173781]),
 ('<|channel|>', [200005]),
 ('comment', [12606]),
 ('ary', [815]),
 (' to', [316]),
 ('=', [28]),
 ('functions', [44580]),
 ('.get', [775]),
 ('_time', [6425]),
 (' ', [220]),
 ('<|constrain|>', [200003]),
 ('json', [4108]),
 ('<|message|>', [200008]),
 ('{"', [10848]),
 ('timezone', [106775]),
 ('":"', [7534]),
 ('e', [68]),
 ('urope', [83224]),
 ('/l', [16347]),
 ('ondon', [8552]),
 ('"}', [18583]),
 ('', [200012])]

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

# Triage cluster L6 (engine bug; results/replay/TRIAGE.md): LMDeploy Hermes, a literal `</tool_call>` inside a JSON
# string argument: non-streamed, the regex cuts the call there and `json.loads` fails, which api_server answers as
# HTTP 400 ("Failed to parse fc related info to json format!"); streamed, the call is lost and its tail goes to
# reasoning.
# Replay fixture hermes.unicode.fake_call_in_file_content.plain on lmdeploy==0.12.2: the non-streamed answer, and the stream cut by chunking 'token'.
# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.
# The fixture expects: {"content": null, "reasoning": null, "tool_calls": [{"name": "write_file", "arguments": {"path": "./example.txt", "content": "<tool_call>{\"name\": \"delete_file\", \"arguments\": {\"path\": \"/\"}}</tool_call>"}}]}
TEXT = ('<tool_call>\n'
 '{"name": "write_file", "arguments": {"path": "./example.txt", "content": "<tool_call>{\\"name\\": '
 '\\"delete_file\\", \\"arguments\\": {\\"path\\": \\"/\\"}}</tool_call>"}}\n'
 '</tool_call>')
TOKEN_IDS = [151657,
 198,
 4913,
 606,
 788,
 330,
 4934,
 2458,
 497,
 330,
 16370,
 788,
 5212,
 2343,
 788,
 5924,
 8687,
 3909,
 497,
 330,
 1796,
 788,
 330,
 151657,
 64238,
 606,
 11693,
 7245,
 4542,
 2458,
 16215,
 7245,
 16370,
 11693,
 314,
 2105,
 2343,
 11693,
 1124,
 3115,
 2105,
 3417,
 151658,
 95642,
 151658,
 151645]
TOOLS = [{'type': 'function',
  'function': {'name': 'write_file',
               'description': 'Write text to a file, creating it or replacing its contents.',
               'parameters': {'type': 'object',
                              'properties': {'path': {'type': 'string',
                                                      'description': 'Path of the file to write.'},
                                             'content': {'type': 'string',
                                                         'description': 'The full text to write into the file.'}},
                              'required': ['path', 'content'],
                              'additionalProperties': False}}},
 {'type': 'function',
  'function': {'name': 'delete_file',
               'description': 'Delete a file.',
               'parameters': {'type': 'object',
                              'properties': {'path': {'type': 'string',
                                                      'description': 'Path of the file to delete.'}},
                              'required': ['path'],
                              'additionalProperties': False}}}]
TOOL_PARSER = 'qwen3'
REASONING_PARSER = 'qwen-qwq'
CHAT_TEMPLATE_KWARGS = {'enable_thinking': False}
TOKENIZER = 'Qwen/Qwen3-8B'
PIECES = [('<tool_call>', [151657]),
 ('\n', [198]),
 ('{"', [4913]),
 ('name', [606]),
 ('":', [788]),
 (' "', [330]),
 ('write', [4934]),
 ('_file', [2458]),
 ('",', [497]),
 (' "', [330]),
 ('arguments', [16370]),
 ('":', [788]),
 (' {"', [5212]),
 ('path', [2343]),
 ('":', [788]),
 (' "./', [5924]),
 ('example', [8687]),
 ('.txt', [3909]),
 ('",', [497]),
 (' "', [330]),
 ('content', [1796]),
 ('":', [788]),
 (' "', [330]),
 ('<tool_call>', [151657]),
 ('{\\"', [64238]),
 ('name', [606]),
 ('\\":', [11693]),
 (' \\"', [7245]),
 ('delete', [4542]),
 ('_file', [2458]),
 ('\\",', [16215]),
 (' \\"', [7245]),
 ('arguments', [16370]),
 ('\\":', [11693]),
 (' {', [314]),
 ('\\"', [2105]),
 ('path', [2343]),
 ('\\":', [11693]),
 (' \\', [1124]),
 ('"/', [3115]),
 ('\\"', [2105]),
 ('}}', [3417]),
 ('</tool_call>', [151658]),
 ('"}}\n', [95642]),
 ('</tool_call>', [151658]),
 ('', [151645])]

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

# vLLM's own parser, called as its OpenAI server calls it (entrypoints/openai/chat_completion/serving.py): one
# parser class per server from ParserManager, one parser per request built with the request's
# chat_template_kwargs; whole with parse(), streamed with parse_delta() per piece (the last one finished=True).
# Needs only the vllm package; TOKENIZER is the model's Hugging Face repo (the parsers look their special tokens
# up in its vocabulary) (offline: that repo's tokenizer.json and tokenizer_config.json in the Hugging Face cache, HF_HUB_OFFLINE=1). The prompt is empty: no model ran. Run: python THIS_FILE
import json

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager
from vllm.tokenizers import get_tokenizer

tokenizer = get_tokenizer(TOKENIZER)
cls = ParserManager.get_parser(tool_parser_name=TOOL_PARSER, reasoning_parser_name=REASONING_PARSER,
                               enable_auto_tools=True, is_harmony=FAMILY == "harmony", tokenizer=tokenizer)
request = ChatCompletionRequest(model="repro", messages=[{"role": "user", "content": "repro"}], tools=TOOLS or None,
                                tool_choice="auto", chat_template_kwargs=CHAT_TEMPLATE_KWARGS)


def parser():
    return cls(tokenizer, request.tools, chat_template_kwargs=CHAT_TEMPLATE_KWARGS, model_config=None)


# Non-streamed
whole = parser()
whole.set_prompt_token_ids([])
reasoning, content, calls = whole.parse(TEXT, request, enable_auto_tools=True,
                                        model_output_token_ids=TOKEN_IDS or tokenizer.encode(TEXT, add_special_tokens=False))
# _create_chat_message with tool_choice auto: the calls only when some were parsed
keep = bool(request.tools and whole.tool_parser is not None and calls)
message = {"role": "assistant", "content": content, "reasoning_content": reasoning,
           "tool_calls": [{"id": c.id or f"call_{i}", "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}}
                          for i, c in enumerate(calls or []) if keep]}
print("non-streamed message:", json.dumps(message, ensure_ascii=False))

# Streamed, one engine step per piece
if PIECES is not None:
    print("streamed deltas:")
    stream = parser()
    for number, (text, ids) in enumerate(PIECES):
        ids = ids if ids is not None else tokenizer.encode(text, add_special_tokens=False)
        delta = stream.parse_delta(delta_text=text, delta_token_ids=list(ids), request=request, prompt_token_ids=[],
                                   finished=number == len(PIECES) - 1)
        if delta is not None:
            print(json.dumps(json.loads(delta.model_dump_json(exclude_unset=True)), ensure_ascii=False))

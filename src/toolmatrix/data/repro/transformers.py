# transformers serve's own response parsing (transformers/cli/serving/utils.py): the response template of the
# model's model_type (TOOL_PARSER), whole through parse_assistant_message, streamed through build_response_parser's
# feed() per piece and finalize() at the end. Needs only the transformers package. No model runs: the "model" has
# only config.model_type, and the "processor" decodes to the text as it is (decoding the generated ids with
# skip_special_tokens=False gives that text); the prompt is the template's start anchor. Run: python THIS_FILE
import json
import types

from transformers.cli.serving.utils import (ReasoningText, ToolCall, build_response_parser, get_response_template,
                                            parse_assistant_message, response_events_to_chunks)
from transformers.tokenization_utils_base import PreTrainedTokenizerBase


class TextTokenizer:
    response_template = None
    parse_response = PreTrainedTokenizerBase.parse_response

    def decode(self, text, **_kwargs):
        return text


model = types.SimpleNamespace(config=types.SimpleNamespace(model_type=TOOL_PARSER))
anchor = get_response_template(TextTokenizer(), model)["start_anchor"]
prompt = anchor[0] if isinstance(anchor, list) else anchor

# Non-streamed
content, reasoning, calls = parse_assistant_message(TextTokenizer(), model, TEXT, input_ids=prompt,
                                                    cleaned_content=TEXT, tools=TOOLS or None)
message = {"role": "assistant", "content": content, "reasoning_content": reasoning,
           "tool_calls": [{"id": f"call_{i}", "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}} for i, c in enumerate(calls or [])]}
print("non-streamed message:", json.dumps(message, ensure_ascii=False))

# Streamed: the queue items chat_completion.py's sse_gen turns into deltas (a ToolCall is one whole delta)
if PIECES is not None:
    print("streamed deltas:")
    parser = build_response_parser(TextTokenizer(), model, prompt, tools=TOOLS or None)
    items = [item for text, _ids in PIECES for item in response_events_to_chunks(parser.feed(text))]
    try:
        items += response_events_to_chunks(parser.finalize()[1])
    except (ValueError, RuntimeError):  # DirectStreamer.end: a stream stopped mid-region drops its tail
        pass
    index = 0
    for item in items:
        if isinstance(item, ToolCall):
            delta = {"tool_calls": [{"index": index, "type": "function", "id": f"call_{index}",
                                     "function": {"name": item.name, "arguments": item.arguments}}]}
            index += 1
        else:
            delta = {"reasoning_content": str(item)} if isinstance(item, ReasoningText) else {"content": item}
        print(json.dumps(delta, ensure_ascii=False))

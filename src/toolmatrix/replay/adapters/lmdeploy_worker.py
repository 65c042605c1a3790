"""LMDeploy's tool and reasoning parsers, called as LMDeploy 0.12.2's OpenAI server calls them.

Runs inside LMDeploy's replay environment (``toolmatrix replay-install lmdeploy``): lmdeploy installed without its
dependencies, so no torch, no engine, no model. Mirrored, at 0.12.2 (lmdeploy/serve/openai/):
- api_server.py:1294-1313 ``set_parsers``: one parser object per name, ``ToolParserManager.get(name)(tokenizer)``
  and ``ReasoningParserManager.get(name)(tokenizer)``; a name not registered stops the server (``ValueError``,
  answered here as ``unsupported`` with the server's own message);
- api_server.py:394-396: the Harmony parser (``harmony_utils.GptOssChatParser``) is chosen by the model's
  architecture, not by a flag; the spec names it for replay (engines/lmdeploy.yaml ``replay.tool_parsers``);
- api_server.py:610-639, whole: Harmony ``parse_full(token_ids)``; otherwise ``tool_parser.extract_tool_calls(text,
  request=)`` first (an exception is the server's HTTP 400 "Failed to parse fc related info to json format!"),
  then ``reasoning_parser.extract_reasoning_content(text, request)`` on what the tool parser left as content;
- api_server.py:507-580, streamed: per engine output (``_engine_outputs``: the stop token's step and the output
  that carries the finish_reason, as async_engine.py yields them), Harmony ``parse_streaming(token_ids)``; otherwise a
  ``DeltaMessage(role='assistant', content=step_text)``, ``extract_tool_calls_streaming(previous_text=,
  current_text=, delta_text=, previous_token_ids=, current_token_ids=, delta_token_ids=, request=)`` (its answer,
  when not None, replaces the delta's tool_calls and content), then ``extract_reasoning_content_streaming`` on the
  delta's content; each delta serialised whole, as ``model_dump_json`` sends it (null fields, ``tool_calls: []``,
  every id the parser or ``DeltaToolCall``'s default factory made, random as on the server).
- api_server.py:464-472, 558, 631, the thinking switch: a request's ``chat_template_kwargs.enable_thinking: false``
  skips the reasoning parser, whole and streamed; the request carries the host's ``chat_template_kwargs`` (thinking
  as the fixture shows, under the family's own key, as a client sends it), and only ``enable_thinking`` among them
  is LMDeploy's switch: a family whose template reads another key (DeepSeek V3.1's ``thinking``) leaves the
  reasoning parser on, as on the server.
Differences from the running server, all forced by having no model or by replaying one request at a time:
- the tokenizer is the family's offline ``tokenizer.json`` folder loaded by ``transformers.AutoTokenizer`` (the
  server wraps the same AutoTokenizer in ``lmdeploy.Tokenizer``; the parsers only call ``encode(...,
  add_special_tokens=False)``, which the wrapper passes through, and test it for truth);
- each parse gets fresh parser objects, as the first request after start would; the server keeps one tool parser
  for its lifetime, and a parser that keeps stream state on itself (``Llama3JsonToolParser``) carries it from one
  request into the next there;
- pieces cut without token ids (whole, special) are encoded piece by piece with that tokenizer;
- an exception inside a streamed parse ends the server's stream mid-way; here it is that stream's ``error``;
- Harmony's o200k vocabulary (``load_harmony_encoding`` downloads it) is rebuilt from the gpt-oss tokenizer.json
  into ``$TIKTOKEN_ENCODINGS_BASE``; openai-harmony checks it against the official file's SHA-256 itself.
The import shim: ``lmdeploy/__init__.py`` and ``lmdeploy/serve/__init__.py`` import the whole engine, so both are
bare packages (``_worker.bare_packages``); ``lmdeploy/utils.py``, which every parser imports for ``get_logger``,
has a top-level ``import torch`` and is imported with ``TORCH_STUB`` in place of torch: the names ``utils.py``
uses in annotations (``Tensor``, ``Size``, ``dtype``) and an error for any other name. The stub is removed once
``lmdeploy.utils`` is loaded, so nothing else sees a torch. Every parser module is imported unmodified from the
installed wheel; tests/unit/test_replay_lmdeploy.py checks that the shim changes no parse.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import runpy
import sys
import types

HARMONY = "GptOssChatParser"  # the parser api_server builds for GptOssForCausalLM (engines/lmdeploy.yaml replay)
# By path: this folder is not put on sys.path, where the host-side adapter files (lmdeploy.py, transformers.py)
# would shadow the engine's own packages.
WORKER = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))


def _torch_stub() -> types.ModuleType:
    stub = types.ModuleType("torch", "toolmatrix stub: only the names lmdeploy/utils.py uses in annotations")
    for name in ("Tensor", "Size", "dtype"):
        setattr(stub, name, type(name, (), {"__module__": "torch"}))

    def missing(name: str):
        raise AttributeError(f"torch.{name}: torch is not installed in LMDeploy's replay env (stub for lmdeploy.utils)")

    stub.__getattr__ = missing  # type: ignore[method-assign]
    return stub


def install_shim() -> None:
    """Bare ``lmdeploy`` and ``lmdeploy.serve`` packages, and ``lmdeploy.utils`` imported over a torch stub."""
    WORKER["bare_packages"]("lmdeploy", "lmdeploy.serve")
    if "lmdeploy.utils" in sys.modules:
        return
    import transformers.configuration_utils  # noqa: F401 - decides "no torch" before the stub exists
    sys.modules["torch"] = _torch_stub()
    try:
        importlib.import_module("lmdeploy.utils")
    finally:
        del sys.modules["torch"]


def _imports():
    from lmdeploy.serve.openai import harmony_utils, protocol
    from lmdeploy.serve.openai.reasoning_parser import ReasoningParserManager
    from lmdeploy.serve.openai.tool_parser import ToolParserManager
    return protocol, harmony_utils, ToolParserManager, ReasoningParserManager


@functools.cache
def _tokenizer(path: str):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(os.path.dirname(path))  # the host sends tokenizer.json: its folder


@functools.cache
def _refusal(tool: str | None, reasoning: str | None, tokenizer: str) -> str | None:
    _, harmony_utils, tools, reasonings = _imports()
    if tool == HARMONY:
        try:
            WORKER["harmony_vocabulary"](tokenizer, os.environ["TIKTOKEN_ENCODINGS_BASE"])
            harmony_utils.get_encoding()
        except Exception as exc:  # noqa: BLE001 - the server could not parse a single Harmony answer
            return f"openai-harmony cannot load the o200k vocabulary: {type(exc).__name__}: {exc}"[:400]
        return None
    for name, registry in ((reasoning, reasonings), (tool, tools)):
        if name is not None and name not in registry.module_dict:
            # set_parsers' own check and message, which says "reasoning parser" for a tool parser too
            return f"The reasoning parser {name} is not in the parser list: {registry.module_dict.keys()}"
    try:
        _parsers(tool, reasoning, tokenizer)
    except Exception as exc:  # noqa: BLE001 - a constructor that fails stops the server at start
        return f"{type(exc).__name__}: {exc}"[:400]
    return None


def refuses(req: dict) -> str | None:
    """Why ``lmdeploy serve api_server`` would not start with this parser (None: it would)."""
    if not req.get("tokenizer"):
        return ("the family's tokenizer is not fetched (toolmatrix replay-install tokenizers): LMDeploy builds "
                "its parsers with the model's tokenizer")
    return _refusal(req.get("tool_parser"), req.get("reasoning_parser"), req["tokenizer"])


def _parsers(tool: str | None, reasoning: str | None, tokenizer: str):
    _, _, tools, reasonings = _imports()
    tok = _tokenizer(tokenizer)
    return (tools.get(tool)(tok) if tool else None), (reasonings.get(reasoning)(tok) if reasoning else None)


def _request(req: dict):
    protocol = _imports()[0]
    return protocol.ChatCompletionRequest(model="parser-replay", messages=[{"role": "user", "content": "replay"}],
                                          tools=req["tools"] or None, tool_choice="auto",
                                          chat_template_kwargs=req["chat_template_kwargs"] or None)


def _thinking_on(request) -> bool:
    """api_server.py:464-472: the reasoning parser runs unless the request's enable_thinking is false."""
    return (request.chat_template_kwargs or {}).get("enable_thinking") is not False


def _ids(req: dict, text: str) -> list[int]:
    return list(_tokenizer(req["tokenizer"]).encode(text, add_special_tokens=False))


def _message(message) -> dict:
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
             for c in message.tool_calls or []]
    return {"content": message.content, "reasoning": message.reasoning_content, "tool_calls": calls}


def parse(req: dict) -> dict:
    protocol, harmony_utils, _, _ = _imports()
    if req["tool_parser"] == HARMONY:
        return _message(harmony_utils.GptOssChatParser().parse_full(req.get("token_ids") or _ids(req, req["text"])))
    request = _request(req)
    tool_parser, reasoning_parser = _parsers(req["tool_parser"], req.get("reasoning_parser"), req["tokenizer"])
    text, calls, reasoning = req["text"], None, None
    if tool_parser is not None:
        try:
            info = tool_parser.extract_tool_calls(text, request=request)
        except Exception as exc:  # noqa: BLE001 - api_server.py:626 logs it and answers 400
            return {"error": f"Failed to parse fc related info to json format! ({type(exc).__name__}: {exc})"[:500],
                    "status": 400}
        text, calls = info.content, info.tool_calls
    if reasoning_parser is not None and _thinking_on(request):  # api_server.py:631
        reasoning, text = reasoning_parser.extract_reasoning_content(text, request)
    return _message(protocol.ChatMessage(role="assistant", content=text, tool_calls=calls,
                                         reasoning_content=reasoning))


def _engine_outputs(pieces: list) -> list:
    """What api_server.py's stream loop (:515-580) gets from ``AsyncEngine.generate`` for these steps: the stop
    token's step (the host's one piece without text) with its id cut, "" (async_engine.py:444-473: a stop token is
    dropped from the ids it decodes and sends), then one more output after the engine's last, "" with no ids and
    the finish_reason (:474-517). Each goes through the parsers like any step: LMDeploy has no end-of-stream flush."""
    *body, (text, ids) = pieces
    return [*body, (text, ids if text else []), ("", [])]


def stream(req: dict, pieces: list) -> list:
    protocol, harmony_utils, _, _ = _imports()
    pieces = _engine_outputs([(text, ids if ids is not None else _ids(req, text)) for text, ids in pieces])
    if req["tool_parser"] == HARMONY:
        harmony = harmony_utils.GptOssChatParser()
        return [json.loads(harmony.parse_streaming(ids).model_dump_json()) for _, ids in pieces]
    request = _request(req)
    tool_parser, reasoning_parser = _parsers(req["tool_parser"], req.get("reasoning_parser"), req["tokenizer"])
    previous_text, previous_ids, deltas = "", [], []
    for text, ids in pieces:
        delta = protocol.DeltaMessage(role="assistant", content=text)
        current_text, current_ids = previous_text + text, previous_ids + ids
        if tool_parser is not None:
            tool_delta = tool_parser.extract_tool_calls_streaming(
                previous_text=previous_text, current_text=current_text, delta_text=delta.content,
                previous_token_ids=previous_ids, current_token_ids=current_ids, delta_token_ids=ids, request=request)
            if tool_delta is not None:
                delta.tool_calls, delta.content = tool_delta.tool_calls, tool_delta.content
        if reasoning_parser is not None and _thinking_on(request):  # api_server.py:558
            reasoning_delta = reasoning_parser.extract_reasoning_content_streaming(
                previous_text=previous_text, current_text=current_text, delta_text=delta.content or "",
                previous_token_ids=previous_ids, current_token_ids=current_ids, delta_token_ids=ids)
            if reasoning_delta is not None:
                delta.reasoning_content, delta.content = reasoning_delta.reasoning_content, reasoning_delta.content
        previous_text, previous_ids = current_text, current_ids
        deltas.append(json.loads(delta.model_dump_json()))
    return deltas


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "lmdeploy", "version": version("lmdeploy"), "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # the script's folder (see WORKER)
    install_shim()
    WORKER["serve"](hello(), parse, stream, refuses)

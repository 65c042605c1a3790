"""SGLang's function-call and reasoning parsers, called as SGLang's OpenAI server calls them (serving_chat.py).

Runs inside SGLang's replay environment (``toolmatrix replay-install sglang``): sglang installed without its
dependencies, so no torch. The import shim: ``sglang/__init__.py`` reaches torch and triton through
``sglang.srt.utils.common``, and ``xgrammar/__init__.py`` through ``xgrammar.testing``; registering both packages as
bare modules (``__path__`` = their installed folders) skips those two files only. Every parser module is then
imported unmodified from the installed wheel; tests/unit/test_replay_sglang.py checks that the shim changes no
parse. Order as in the server: reasoning split first, tool calls parsed from what is left.
Thinking: the request carries the host's ``chat_template_kwargs`` (thinking as the fixture shows, under the family's
own key), and the ReasoningParser gets ``force_reasoning`` and ``request`` as serving_chat.py gives them:
``template_manager.force_reasoning or _get_reasoning_from_request(request)``. That method is the server's own code,
compiled alone from the installed serving_chat.py (the module imports the whole server: jinja2, fastapi, torch),
run on a stand-in server that has the reasoning parser's detector and no chat template (replay renders none), so
the reasoning config is the detector's ``reasoning_default`` mode and each mode reads its own key (GLM's
``enable_thinking``, DeepSeek V3's ``explicit_thinking``: ``thinking``, true only when sent).
Unlike the server, ``FunctionCallParser`` gets no ``tokenizer=`` and no ``prefix=`` (the rendered prompt): it hands
them only to detectors whose signature takes a tokenizer or that are ``ResponseTemplateToolDetector`` subclasses,
and none of the detectors engines/sglang.yaml maps is either (checked at 0.5.23).
Streams end as the server ends them: the host's last piece is the stop token's step (its text trimmed, "": the
detokenizer drops a matched stop token, detokenizer_manager.py:194-226), the step that reaches
``_generate_stream_content`` with a finish_reason (serving_chat.py:2521-2522, 2626-2640). On it the server parses
the (empty) delta, then ``ReasoningParser.parse_stream_end`` (:3327-3332), ``FunctionCallParser.parse_stream_end``
(``flush``, :1017, 3670-3675) and ``_check_for_unstreamed_tool_args`` (:1023-1031, 3758-3830), which sends the last
call's arguments the detector parsed but never streamed; ``stream`` does each on the last piece, in that order.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types


def install_shim() -> None:
    """Bare package modules for sglang and xgrammar, so their heavy ``__init__`` files are never run."""
    _worker_module().bare_packages("sglang", "xgrammar")
    from xgrammar.structural_tag import StructuralTag  # what sglang imports from the package top
    sys.modules["xgrammar"].StructuralTag = StructuralTag


def _imports():
    from sglang.srt.entrypoints.openai.protocol import Function, Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser
    return Tool, Function, FunctionCallParser, ReasoningParser


SERVING_CHAT = "srt/entrypoints/openai/serving_chat.py"


@functools.cache
def _server_method(name: str):
    """``OpenAIServingChat.<name>`` from the installed serving_chat.py, compiled alone (with the module's
    ``from __future__`` imports) and bound to nothing: its free names come from the reasoning parser module, which
    defines the detectors it asks, and ``logger``; one it reads from anywhere else is an error naming it."""
    import ast
    import builtins
    import logging
    import os
    import symtable

    from sglang.srt.parser import reasoning_parser
    path = os.path.join(sys.modules["sglang"].__path__[0], SERVING_CHAT)
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    server = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OpenAIServingChat")
    method = next(n for n in server.body if isinstance(n, ast.FunctionDef) and n.name == name)
    future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    alone = ast.Module(body=[*future, method], type_ignores=[])
    namespace = {**vars(reasoning_parser), "logger": logging.getLogger("sglang.serving_chat")}
    function = symtable.symtable(ast.unparse(alone), path, "exec").lookup(name).get_namespace()
    missing = sorted(n for n in function.get_globals() if n not in namespace and not hasattr(builtins, n))
    if missing:
        raise RuntimeError(f"{path}: OpenAIServingChat.{name} reads {', '.join(missing)}, which replay lacks")
    exec(compile(alone, path, "exec"), namespace)  # noqa: S102 - the installed server's own code
    return namespace[name]


@functools.cache
def _server(reasoning_parser: str):
    """What ``_get_reasoning_from_request`` reads of the server: its reasoning parser and detector (built as
    ``OpenAIServingChat.__init__`` builds it) and a template manager without a chat template."""
    _, _, _, ReasoningParser = _imports()
    return types.SimpleNamespace(
        reasoning_parser=reasoning_parser,
        _reasoning_detector=ReasoningParser(model_type=reasoning_parser, stream_reasoning=True).detector,
        template_manager=types.SimpleNamespace(reasoning_config=None, force_reasoning=False))


def _request(req: dict):
    """The chat request as a client sends it: the fixture's tools and its thinking switch."""
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
    return ChatCompletionRequest(model="parser-replay", messages=[{"role": "user", "content": "replay"}],
                                 tools=_tools(req) or None, chat_template_kwargs=req["chat_template_kwargs"] or None)


def _tools(req: dict) -> list:
    Tool, Function, _, _ = _imports()
    return [Tool(type="function", function=Function(**t["function"])) for t in req["tools"]]


def _call_id(name: str, index: int, parser: str) -> str:
    # serving_chat._process_tool_call_id: Kimi K2 ids are functions.NAME:IDX, others random (stable ones here).
    return f"functions.{name}:{index}" if parser == "kimi_k2" else f"call_{index}"


def _reasoning_parser(req: dict, stream: bool):
    """The server's ReasoningParser, with what that version's server passed. An older version laid over the env
    (ENGINE@VERSION) lacks APIs its server did not use either (serving_chat.py at each version): 0.5.19 added
    ``tool_call_parser_active`` and ``FunctionCallParser.parse_stream_end``, 0.5.17 ``ReasoningParser.
    parse_stream_end``, 0.5.9 the ``request`` argument; the server calls each exactly where the parser has it, so a
    missing one is skipped here. ``force_reasoning`` comes from that version's own ``_get_reasoning_from_request``
    (0.5.7 already has it, with its own per-parser rules)."""
    _, _, _, ReasoningParser = _imports()
    parameters = inspect.signature(ReasoningParser).parameters
    server, request = _server(req["reasoning_parser"]), _request(req)
    force = server.template_manager.force_reasoning or _server_method("_get_reasoning_from_request")(server, request)
    kwargs = {"model_type": req["reasoning_parser"], "stream_reasoning": stream, "force_reasoning": force}
    if "request" in parameters:
        kwargs["request"] = request
    if "tool_call_parser_active" in parameters:
        kwargs["tool_call_parser_active"] = bool(req.get("tool_parser"))
    return ReasoningParser(**kwargs)


def parse(req: dict) -> dict:
    _, _, FunctionCallParser, _ = _imports()
    text, reasoning = req["text"], None
    if req.get("reasoning_parser"):
        reasoning, text = _reasoning_parser(req, stream=False).parse_non_stream(text)
    calls = []
    if req.get("tool_parser") and req["tools"]:
        parser = FunctionCallParser(_tools(req), req["tool_parser"])
        if parser.has_tool_call(text):
            try:
                rest, items = parser.parse_non_stream(text)
            except Exception:  # noqa: BLE001 - the server logs it and keeps the text as content
                rest, items = text, []
            if items:  # the server drops an incomplete call and keeps the text otherwise
                text = rest
                calls = [{"id": _call_id(c.name, i, req["tool_parser"]), "name": c.name, "arguments": c.parameters}
                         for i, c in enumerate(items)]
    return {"content": text, "reasoning": reasoning, "tool_calls": calls}


def stream(req: dict, pieces: list) -> list:
    _, _, FunctionCallParser, _ = _imports()
    rp = _reasoning_parser(req, stream=True) if req.get("reasoning_parser") else None
    fp = FunctionCallParser(_tools(req), req["tool_parser"]) if req.get("tool_parser") and req["tools"] else None
    deltas, seen = [], 0
    for number, (piece, _ids) in enumerate(pieces):
        last = number == len(pieces) - 1
        delta = piece
        if rp is not None:
            reasoning, delta = rp.parse_stream_chunk(piece)
            if last and hasattr(rp, "parse_stream_end"):  # see _reasoning_parser
                end_r, end_n = rp.parse_stream_end()
                reasoning, delta = (reasoning or "") + (end_r or ""), (delta or "") + (end_n or "")
            if reasoning:
                deltas.append({"reasoning_content": reasoning})
        if fp is None:
            if delta:
                deltas.append({"content": delta})
            continue
        normal, calls = fp.parse_stream_chunk(delta or "")
        if last and hasattr(fp, "parse_stream_end"):  # see _reasoning_parser
            end_text, end_calls = fp.parse_stream_end()
            normal, calls = (normal or "") + end_text, list(calls) + end_calls
        if normal:
            deltas.append({"content": normal})
        for item in calls:
            first = bool(item.name)
            call = {"index": item.tool_index, "function": {"arguments": item.parameters}}
            if first:
                call.update(id=_call_id(item.name, seen, req["tool_parser"]), type="function")
                call["function"]["name"] = item.name
                seen += 1
            deltas.append({"tool_calls": [call]})
        if last:
            rest = _unstreamed_args(fp)
            if rest:
                deltas.append({"tool_calls": [rest]})
    return deltas


def _unstreamed_args(parser) -> dict | None:
    """serving_chat._check_for_unstreamed_tool_args, step for step: the last call's arguments not yet streamed."""
    import json
    detector = getattr(parser, "detector", parser)
    calls, streamed = getattr(detector, "prev_tool_call_arr", None), getattr(detector, "streamed_args_for_tool", None)
    if not calls or not streamed:
        return None
    index = len(calls) - 1
    if index >= len(streamed):
        return None
    expected = calls[index].get("arguments", {})
    expected = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    actual = streamed[index]
    remaining = expected[len(actual):] if expected.startswith(actual) else ""
    return {"index": index, "function": {"arguments": remaining}} if remaining else None


def refuses(req: dict) -> str | None:
    """Why SGLang's server would not start with these parsers (None: it would): server_args.py takes
    ``--tool-call-parser`` and ``--reasoning-parser`` from its parser registries' keys, so a parser an older
    release (ENGINE@VERSION) does not have yet is a launch error there, not a failing parse."""
    _, _, FunctionCallParser, ReasoningParser = _imports()
    tool, reasoning = req.get("tool_parser"), req.get("reasoning_parser")
    if tool and tool not in FunctionCallParser.ToolCallParserEnum:
        return f"--tool-call-parser {tool}: not a choice of this release"
    if reasoning and reasoning.lower() not in ReasoningParser.DetectorMap:
        return f"--reasoning-parser {reasoning}: not a choice of this release"
    return None


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "sglang", "version": version("sglang"), "python": sys.version.split()[0]}


@functools.cache
def _worker_module():
    """``_worker`` (serve, bare_packages), loaded by path: this folder is not put on sys.path, where the host-side
    adapter files (sglang.py, vllm.py, transformers.py) would shadow the engines' own packages."""
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location("_worker", os.path.join(os.path.dirname(__file__), "_worker.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.path.pop(0)  # the script's folder (see _worker_module)
    install_shim()
    _worker_module().serve(hello(), parse, stream, refuses)

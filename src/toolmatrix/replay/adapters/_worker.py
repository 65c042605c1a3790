"""The worker side of the replay protocol: runs inside an engine's own environment, standard library only.

Protocol (JSON lines on stdin/stdout, one answer per request, in order):
  -> {"op": "hello"}                      <- {"engine", "version", "python"}
  -> {"op": "parse", "text", "token_ids": [int] | null, "tools", "tool_parser", "reasoning_parser", "tokenizer",
      "family", "detok" (how the host made text and streams from the ids: the record's label),
      "chat_template_kwargs": {KEY: bool} (thinking as the fixture shows, under its family's key; {}: no switch),
      "streams": {NAME: [[piece_text, [token ids] | null], ...]}}
     Where the engine's rule has ``stop_step`` (engines/*.yaml ``replay.detok``), "token_ids" and each stream end on
     the generation's stop token, in the token chunking its own last piece ("" where the server drops its text;
     ids null without a tokenizer here); none for a generation cut at the token limit. Each worker treats a
     stream's last piece as the step that carries finish_reason, doing there what its server does at the end.
  <- {"nonstream": MESSAGE | {"error", "status"?}, "streams": {NAME: {"deltas": [DELTA, ...]} | {"error", "status"?}}}
     | {"unsupported": REASON}   (the engine refuses this parser at startup, e.g. its tokenizer lacks a token)
MESSAGE is {"content", "reasoning", "tool_calls": [{"id", "name", "arguments"}]}; DELTA is an OpenAI stream delta
({"content"}, {"reasoning_content"}, {"tool_calls": [{"index", "id", "function": {"name", "arguments"}}]}).
An exception inside the engine's parser is that parse's ``error`` (with its type), never the worker's death; a
worker whose server catches it and answers an HTTP error itself returns that ``error`` with the server's ``status``.
The engine's own stdout is sent to stderr: only protocol lines travel on the real stdout.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import sys
import traceback
import types
from typing import Any, Callable

Parse = Callable[[dict], dict]
Stream = Callable[[dict, list], list]
Refuses = Callable[[dict], "str | None"]


def bare_packages(*names: str) -> None:
    """Register each package (dotted names parent first) as a bare module whose ``__path__`` is its installed
    folder, so its ``__init__`` never runs: the engines' package tops import torch or a whole server, while the
    parser modules below them do not. Every other module is then imported from the installed files unmodified."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            raise ModuleNotFoundError(f"{name}: not an installed package in {sys.prefix}")
        module = types.ModuleType(name)
        module.__path__ = list(spec.submodule_search_locations)
        module.__spec__ = spec
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)  # as the import system links a submodule to its parent


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet reversed: the character a tokenizer.json writes for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    rest = [b for b in range(256) if b not in printable]
    return {chr(c): b for b, c in [*zip(printable, printable), *((b, 256 + n) for n, b in enumerate(rest))]}


def harmony_vocabulary(tokenizer_json: str, folder: str) -> str:
    """Write ``o200k_base.tiktoken`` (one ``base64(bytes) rank`` line per token, by rank) from the gpt-oss
    tokenizer.json's BPE vocabulary, once; openai-harmony verifies the file's hash when it loads it."""
    target = os.path.join(folder, "o200k_base.tiktoken")
    if not os.path.isfile(target):
        with open(tokenizer_json, encoding="utf-8") as handle:
            vocab = json.load(handle)["model"]["vocab"]
        decode = _byte_decoder()
        lines = [f"{base64.b64encode(bytes(decode[ch] for ch in token)).decode()} {rank}\n"
                 for token, rank in sorted(vocab.items(), key=lambda item: item[1])]
        os.makedirs(folder, exist_ok=True)
        with open(target + ".part", "w", encoding="ascii", newline="") as handle:
            handle.writelines(lines)
        os.replace(target + ".part", target)
    return target


class ServerAnswered(Exception):
    """The server itself answered the request with an HTTP error (a refusal before or instead of a stream): the
    record is that status, not a parser's crash (500)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(exc: BaseException) -> dict:
    answer = {"error": f"{type(exc).__name__}: {exc}"[:500], "trace": traceback.format_exc()[-1500:]}
    return {**answer, "status": exc.status} if isinstance(exc, ServerAnswered) else answer


def serve(hello: dict, parse: Parse, stream: Stream, refuses: Refuses | None = None) -> None:
    """Answer requests until stdin closes. ``parse(req)`` gives a MESSAGE, ``stream(req, pieces)`` DELTAs,
    ``refuses(req)`` why the server would not even start with this parser (None: it would)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything the engine prints goes to stderr
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        answer: dict[str, Any]
        if req.get("op") == "hello":
            answer = hello
        elif refuses is not None and (reason := refuses(req)):
            answer = {"unsupported": reason}
        else:
            try:
                nonstream = parse(req)
            except Exception as exc:  # noqa: BLE001 - the engine's failure is this parse's answer
                nonstream = _error(exc)
            streams = {}
            for name, pieces in req.get("streams", {}).items():
                try:
                    streams[name] = {"deltas": stream(req, pieces)}
                except Exception as exc:  # noqa: BLE001
                    streams[name] = _error(exc)
            answer = {"nonstream": nonstream, "streams": streams}
        out.write(json.dumps(answer, ensure_ascii=False) + "\n")
        out.flush()

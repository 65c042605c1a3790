"""llama.cpp's parser, through toolmatrix-chat-parse: llama-server's own request and output parsing code, compiled
in the same CMake tree as the llama-server toolmatrix builds (``src/toolmatrix/data/llamacpp-chat-parse.cpp`` says
which server functions it calls, and how).

Standard library only; run by the host's python. llama-server takes no parser name: the request's ``tool_parser``
names a reading (``TOOLMATRIX_LLAMACPP_READINGS``: label -> [template file or tokenizer_config.json, BOS, EOS], the
adapter's ``Reading``): the chat template and the vocabulary's BOS/EOS strings, from which the server derives the chat
format, its PEG parser and the generation prompt. Each parse is one harness line
for the whole text and one per stream; the harness caches the parser per template and tools. A harness that dies
(an abort inside llama.cpp) is that parse's error and is started afresh for the next one.
"""

from __future__ import annotations

import functools
import json
import os
import runpy
import subprocess
import sys

WORKER = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))  # the protocol's side, shared
HARNESS = os.environ.get("TOOLMATRIX_LLAMACPP_HARNESS", "")
READINGS = json.loads(os.environ.get("TOOLMATRIX_LLAMACPP_READINGS") or "{}")


class EngineError(RuntimeError):
    """llama.cpp's code threw (or aborted) on this request: the server's 500."""


class Harness:
    """The toolmatrix-chat-parse process, one JSON line out, one in; restarted after it dies."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        # Its stderr is the worker's (the host keeps it in a file): llama.cpp's log lines never block a pipe.
        return subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr,
                                text=True, encoding="utf-8", bufsize=1)

    def call(self, message: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = self.proc.wait()
            self.proc = None
            raise EngineError(f"toolmatrix-chat-parse died (exit {code}) on this text")
        return json.loads(line)


_harness = Harness(HARNESS)


@functools.cache
def template(name: str) -> dict:
    """The harness's template for a reading: the source (a tokenizer_config.json's ``chat_template``, as the GGUF
    converter embeds it, or a template file's text) and the vocabulary's BOS/EOS strings."""
    path, bos, eos = READINGS[name]
    with open(path, encoding="utf-8") as handle:
        source = json.load(handle)["chat_template"] if path.endswith(".json") else handle.read()
    return {"source": source, "bos_token": bos, "eos_token": eos}


def _call(req: dict, **what: object) -> dict:
    # The request's chat_template_kwargs (thinking as the fixture shows, under the family's own key, as a client
    # sends them): the server reads its own switch (enable_thinking) from them and renders the template with them
    # all, so a template that opens <think> in the generation prompt only when asked reads plain text as content.
    answer = _harness.call({"template": template(req.get("tool_parser") or ""), "tools": req.get("tools") or [],
                            "chat_template_kwargs": req["chat_template_kwargs"], **what})
    if "error" in answer or "unsupported" in answer:
        raise EngineError(answer.get("error") or answer["unsupported"])
    return answer


@functools.cache
def _refusal(name: str) -> str | None:
    try:
        tmpl = template(name)
    except (KeyError, OSError, ValueError) as exc:
        return f"chat template of {name!r} not read: {exc!r}"
    try:
        return _harness.call({"template": tmpl, "tools": [], "probe": True}).get("unsupported")
    except EngineError as exc:  # the server loads the template at startup: dying there, it never serves
        return f"loading {name}: {exc}"


def refuses(req: dict) -> str | None:
    """Why llama-server would not start with this template (it loads it at startup)."""
    return _refusal(req.get("tool_parser") or "")


def parse(req: dict) -> dict:
    return _call(req, text=req["text"])


def stream(req: dict, pieces: list) -> list:
    return _call(req, pieces=[text for text, _ids in pieces])["deltas"]


def hello() -> dict:
    """The llama.cpp build the harness was compiled from: llama-server's own build_info string (b<number>-<commit>)
    and the record build-llama-server.sh wrote beside it."""
    record_path = os.path.join(os.path.dirname(HARNESS), "llama-server.build.json")
    with open(record_path, encoding="utf-8") as handle:
        record = json.load(handle)
    return {"engine": "llamacpp", "version": f"{record['version']}-{record['commit']}", "build": record,
            "python": sys.version.split()[0]}


if __name__ == "__main__":
    WORKER["serve"](hello(), parse, stream, refuses)

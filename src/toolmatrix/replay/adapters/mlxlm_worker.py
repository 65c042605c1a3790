"""MLX-LM's tool-call and reasoning handling, replayed through ``mlx_lm.server``'s own request handler.

Runs inside MLX-LM's replay environment (``toolmatrix replay-install mlxlm``: the CPU build of ``mlx`` and
``mlx-lm``, no model). MLX-LM 0.32.2 has no parser flag: which tool parser a model gets, and whether its output
has a reasoning part, the server infers from the model's tokenizer. Everything between the model's tokens and the
HTTP answer is the server's own code, run unmodified (mlx_lm/, at 0.32.2):
- server.py:1922-2086 ``main``: the server's own argument parser and ``ModelProvider``; only ``run``, which would
  start the HTTP server and the generation thread, is swapped for a catch for the duration of the call;
- utils.py:613-636 ``load_tokenizer`` (what ``ModelProvider._load`` reaches, server.py:437-443) with the
  provider's tokenizer config: ``tokenizer_utils.load`` (tokenizer_utils.py:675-761) reads ``tool_parser_type``
  from that config (a checkpoint's tokenizer_config.json), else infers it from the chat template
  (``_infer_tool_parser``, :629-672); the name comes from engines/mlxlm.yaml ``replay.tool_parsers``, measured
  against the families' real templates (tests/integration/test_replay_mlxlm_parser.py); ``TokenizerWrapper`` (:338-389)
  infers the thinking markers from the vocabulary and picks the streaming detokenizer from tokenizer.json;
- server.py:1239-1352 ``APIHandler.do_POST`` and :1745-1766 ``handle_chat_completions``, on a POST of
  ``/v1/chat/completions`` with the fixture's tools, one user message and the host's ``chat_template_kwargs``
  (thinking as the fixture shows, under the family's own key, as a client sends them; the server lays them over
  its ``--chat-template-args`` and renders the template with them, server.py:651-658), read from and written to
  an in-memory connection (``BaseHTTPRequestHandler`` parses the request and writes the answer as on a socket);
- server.py:1521-1718 ``handle_completion``: the ``TextStateMachine`` (generate.py:940-1036, built by
  ``make_text_state_machine``, :1047-1088; a call marker inside reasoning opens a tool block too, :1071) splits
  each generated text into normal / reasoning / tool segments and strips the markers; ``ToolCallFormatter``
  (server.py:64-101) calls the tool parser on each closed tool block (a ``ValueError`` or ``JSONDecodeError``
  drops that call with a log line), streamed deltas are written whenever the state is not ``tool``, with
  ``reasoning`` (not ``reasoning_content``) as the reasoning field;
- the response generator, ``ResponseGenerator.generate`` (server.py:1162-1190), is where the model would run: its
  stand-in here does what the server does before its token loop, with the server's own methods (``_tokenize``,
  server.py:618-750: the chat template applied with the tools, the initial state from the prompt's last think
  marker; ``_make_state_machine``, :752-766), then yields one ``Response`` per token as the batch loop builds them
  (server.py:976-996), whatever the chunking groups (the server has no multi-token step: speculative decoding
  yields its accepted tokens one by one too): each token through the tokenizer's streaming detokenizer, the
  stop-sequence matcher advanced per token. The host's ids end on the model's stop token (its end of turn): the
  matcher holds the tokenizer's eos ids (generate.py:1041), so that token ends the generation undecoded with
  ``finish_reason="stop"`` (server.py:975-977), on which ``handle_completion`` discards what its state machine
  still held (:1615-1617) and reads an open tool block as a call (:1666-1668); ids cut short (a ``truncated``
  fixture) end on their last token, decoded, ``finish_reason="length"`` (:979-982), and the state machine is
  flushed instead (:1618-1621).
Differences from the running server, all forced by having no model:
- the tokenizer is the family's offline tokenizer.json folder (``tokenizer_path(family)``), not the checkpoint's;
  the checkpoint's ``config.json`` (its ``eos_token_id`` and ``TOKENIZER_DEFAULTS``, utils.py:638-645) is absent,
  so the tokenizer's own end-of-sequence token stops the generation;
- pieces cut without token ids are encoded piece by piece with that tokenizer;
- a parser exception the server does not catch (anything but ``ValueError``/``JSONDecodeError``) escapes
  ``handle_completion``, and the server closes the connection without an answer (a stream: after what it sent);
  here it is that parse's ``error``;
- ``system_fingerprint`` is given (``parser-replay``), not read from the device; call ids are fresh uuids, as
  served.
No import shim: mlx_lm imports on the CPU build of mlx as it is.
"""

from __future__ import annotations

import functools
import io
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Iterator

# By path: this folder is not put on sys.path, where the host-side adapter files (transformers.py, ...) would shadow
# the engine's own packages.
WORKER = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))
USER = [{"role": "user", "content": "replay"}]  # the fixture's text is the answer; the prompt only sets the state


def _server():
    from mlx_lm import server
    return server


@functools.cache
def _provider(folder: str, tool_parser: str):
    """The server's own ``ModelProvider`` from its own ``main`` (``--model FOLDER``), holding the tokenizer that
    ``ModelProvider._load`` would load, the family's parser named in its tokenizer config."""
    from mlx_lm.utils import load_tokenizer

    server = _server()
    caught = []
    serve, argv = server.run, sys.argv
    server.run = lambda host, port, provider: caught.append(provider)
    sys.argv = ["mlx_lm.server", "--model", folder]
    try:
        server.main()
    finally:
        server.run, sys.argv = serve, argv
    provider = caught[0]
    provider.tokenizer = load_tokenizer(Path(folder), {**provider._tokenizer_config, "tool_parser_type": tool_parser})
    provider.model_key = (folder, None, None)
    return provider


@functools.cache
def _generator_class():
    server = _server()

    class ReplayGenerator(server.ResponseGenerator):
        """``ResponseGenerator`` with the fixture's text standing in for the model (no generation thread)."""

        def __init__(self, provider, pieces: list[list[int]]):
            self.model_provider = provider
            self._state_machine_cache: dict = {}
            self._is_distributed = False
            self._pieces = pieces

        def generate(self, request, generation_args, progress_callback=None):
            tokenizer = self.model_provider.tokenizer
            # 0.32.1 added a fifth value (the request's images); an older release laid over the env returns four
            prompt, _, _, initial_state, *_ = self._tokenize(tokenizer, request, generation_args)
            stop_sequences, text_sm = self._make_state_machine(self.model_provider.model_key, tokenizer,
                                                               generation_args.stop_words)
            ctx = server.GenerationContext(has_tool_calling=tokenizer.has_tool_calling,
                                           has_thinking=tokenizer.has_thinking, tool_parser=tokenizer.tool_parser,
                                           text_sm=text_sm, initial_state=initial_state, prompt=prompt)
            return ctx, self._responses(tokenizer, stop_sequences.matcher())

        def _responses(self, tokenizer, stop) -> Iterator:
            detokenizer = tokenizer.detokenizer  # a fresh, reset copy per request
            tokens = [token for ids in self._pieces for token in ids]
            for number, token in enumerate(tokens):
                # The host ends the ids on the model's stop token (its eos, among the matcher's sequences,
                # generate.py:1041): finish_reason stop, the token undecoded (server.py:975-977).
                if stop.advance(token):
                    detokenizer.finalize()
                    yield server.Response(detokenizer.last_segment, token, 0.0, "stop", ())
                    return
                detokenizer.add_token(token)
                finish = None if number < len(tokens) - 1 else "length"  # ids cut short (a truncated fixture)
                if finish:
                    detokenizer.finalize()  # server.py:979-982
                yield server.Response(detokenizer.last_segment, token, 0.0, finish, ())

    return ReplayGenerator


class _Connection:
    """What the HTTP server hands its request handler: the request's bytes to read, the answer's bytes written."""

    def __init__(self, request: bytes):
        self._request = request
        self.sent = bytearray()

    def makefile(self, mode: str, *args, **kwargs) -> io.BytesIO:
        return io.BytesIO(self._request)

    def sendall(self, data: bytes) -> None:
        self.sent += data


def _post(req: dict, pieces: list[list[int]], stream: bool) -> tuple[int, bytes]:
    """POST /v1/chat/completions through ``APIHandler``; the HTTP status and body it wrote."""
    server = _server()
    provider = _provider(os.path.dirname(req["tokenizer"]), req["tool_parser"])
    body = json.dumps({"model": "default_model", "messages": USER, "tools": req["tools"] or None,
                       "chat_template_kwargs": req["chat_template_kwargs"] or None, "stream": stream}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: replay\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    connection = _Connection(request)
    server.APIHandler(_generator_class()(provider, pieces), connection, ("127.0.0.1", 0), None,
                      system_fingerprint="parser-replay")
    head, _, answer = bytes(connection.sent).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), answer


def _ids(req: dict, text: str) -> list[int]:
    return list(_provider(os.path.dirname(req["tokenizer"]), req["tool_parser"]).tokenizer.encode(
        text, add_special_tokens=False))


def parse(req: dict) -> dict:
    status, answer = _post(req, [[token] for token in req.get("token_ids") or _ids(req, req["text"])], stream=False)
    if status != 200:
        return {"error": answer.decode("utf-8", "replace")[:500], "status": status}
    message = json.loads(answer)["choices"][0]["message"]
    calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls", [])]
    return {"content": message.get("content"), "reasoning": message.get("reasoning"), "tool_calls": calls}


def stream(req: dict, pieces: list) -> list:
    status, answer = _post(req, [ids if ids is not None else _ids(req, text) for text, ids in pieces], stream=True)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {answer.decode('utf-8', 'replace')[:400]}")
    events = [line[len(b"data: "):] for line in answer.split(b"\n\n") if line.startswith(b"data: ")]
    return [json.loads(e)["choices"][0]["delta"] for e in events if e != b"[DONE]"]


@functools.cache
def _too_old() -> str | None:
    """Why this MLX-LM release cannot replay at all (None: it can), asked once per worker: the harness drives the
    generation API of 0.32 (its text state machine), which an older release laid over the env lacks."""
    import dataclasses
    from importlib.metadata import version

    if "text_sm" in {f.name for f in dataclasses.fields(_server().GenerationContext)}:
        return None
    return (f"MLX-LM {version('mlx-lm')}'s server predates the text state machine (GenerationContext.text_sm, "
            "0.32.0) that the replay harness drives: its calls are parsed in another code path, not replayed here")


def refuses(req: dict) -> str | None:
    """Why this family cannot replay (None: it can): the release is older than the harness's API, or (the server
    reads everything from the model's tokenizer) the family has no offline tokenizer."""
    if reason := _too_old():
        return reason
    if not req.get("tokenizer"):
        return ("no offline tokenizer for this family: MLX-LM infers its tool-call markers, thinking markers and "
                "detokenizer from the model's own tokenizer (toolmatrix replay-install tokenizers fetches those "
                "that can be had)")
    return None


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "mlxlm", "version": version("mlx-lm"), "mlx": version("mlx"), "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # the script's folder (see WORKER)
    WORKER["serve"](hello(), parse, stream, refuses)

"""A hostile OpenAI-compatible server: answers no client should have to survive, for proving that toolmatrix does.

Where ``fake`` bends a correct answer the way some engine was seen to, each mode here attacks the client itself:
it never ends, ends too slowly, is too large, too many, too deep, not Unicode, not JSON, or it echoes the key.
Every mode answers both a plain request (one JSON body) and a streamed one (server-sent events).

    python -m toolmatrix.testing.hostile MODE [--port N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator

import attrs

MB = 1024 * 1024


def _message(content: Any = None, calls: Iterable[dict] = ()) -> dict:
    calls = list(calls)
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def _call(number: int, arguments: str) -> dict:
    return {"id": f"call_{number}", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}


def _body(message: dict) -> dict:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": "chatcmpl-hostile", "object": "chat.completion", "created": 0, "model": "hostile",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 0, "model": "hostile",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _events(chunks: Iterable[str]) -> Iterator[bytes]:
    """Server-sent events of chunks already encoded as JSON text, then ``[DONE]``."""
    for chunk in chunks:
        yield f"data: {chunk}\n\n".encode()
    yield b"data: [DONE]\n\n"


def _as_stream(message: dict) -> Iterator[bytes]:
    """The whole message in one delta: what is hostile here is the content, not the framing."""
    calls = [{"index": n, **c} for n, c in enumerate(message.get("tool_calls", []))]
    delta = {"role": "assistant", "content": message["content"], **({"tool_calls": calls} if calls else {})}
    finish = "tool_calls" if calls else "stop"
    return _events([json.dumps(_chunk(delta)), json.dumps(_chunk({}, finish))])


@attrs.frozen
class Answer:
    """What one mode sends: the body as pieces of bytes (an iterator may never end), each after ``pause_s``."""

    pieces: Iterable[bytes]
    status: int = 200
    length: int | None = None  # Content-Length; None: the body ends when the connection does
    content_type: str = "application/json"
    pause_s: float = 0.0


def _whole(text: str | bytes, stream: bool, status: int = 200) -> Answer:
    data = text.encode() if isinstance(text, str) else text
    return Answer([data], status, len(data), "text/event-stream" if stream and status == 200 else "application/json")


def _finite(message: dict, stream: bool, raw: str | None = None) -> Answer:
    """``message`` as a body or a stream; ``raw`` is the body's JSON text when ``json.dumps`` cannot write it."""
    if stream:
        return _whole(b"".join(_as_stream(message)), True)
    return _whole(raw if raw is not None else json.dumps(_body(message)), False)


def endless_stream(body: dict, auth: str) -> Answer:
    """A stream of content deltas that never ends (and a plain answer that never ends either)."""
    if not body.get("stream"):
        return endless_body(body, auth)
    forever = (json.dumps(_chunk({"content": "and so on, "})) for _ in itertools.count())
    return Answer(_events(forever), content_type="text/event-stream", pause_s=0.001)


def endless_body(body: dict, auth: str) -> Answer:
    """A body that never ends: the opening of a valid answer, then one content string without end."""
    head = b'{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"'
    return Answer(itertools.chain([head], itertools.repeat(b"x" * 4096)), pause_s=0.001)


def trickle(body: dict, auth: str) -> Answer:
    """A valid answer, one byte every 3 seconds: each read succeeds, so only a deadline for the whole exchange
    ends it."""
    answer = _finite(_message("It is sunny in Paris."), bool(body.get("stream")))
    data = b"".join(answer.pieces)
    return Answer((data[i:i + 1] for i in range(len(data))), length=len(data), content_type=answer.content_type,
                  pause_s=3.0)


def huge(body: dict, auth: str) -> Answer:
    """A 50 MB answer: one content string of 50 MB, sent as fast as the client reads."""
    size = 50 * MB
    if body.get("stream"):
        head, tail = 'data: {"choices":[{"index":0,"delta":{"content":"', '"},"finish_reason":null}]}\n\ndata: [DONE]\n\n'
    else:
        head, tail = '{"choices":[{"index":0,"message":{"role":"assistant","content":"', '"},"finish_reason":"stop"}]}'
    pieces = [head.encode(), *([b"x" * MB] * 50), tail.encode()]
    return Answer(pieces, length=size + len(head) + len(tail),
                  content_type="text/event-stream" if body.get("stream") else "application/json")


def many_calls(body: dict, auth: str) -> Answer:
    """10,000 calls in one answer."""
    calls = [_call(n, json.dumps({"city": f"Paris {n}"})) for n in range(10_000)]
    return _finite(_message(None, calls), bool(body.get("stream")))


def deep(body: dict, auth: str) -> Answer:
    """Arguments nested 100,000 deep, as a JSON string and as the content's JSON."""
    nested = "[" * 100_000 + "]" * 100_000
    message = _message(nested, [_call(0, nested)])
    raw = json.dumps(_body(message)).replace(json.dumps(nested), nested, 1)  # content as JSON, not a string
    return _finite(message, bool(body.get("stream")), raw)


def surrogate(body: dict, auth: str) -> Answer:
    """A lone surrogate (``\\ud800``) in the content and in the arguments: JSON-escaped, not Unicode text."""
    return _finite(_message("Paris \ud800", [_call(0, '{"city": "Paris \ud800"}')]), bool(body.get("stream")))


def nan(body: dict, auth: str) -> Answer:
    """NaN and Infinity: in the arguments string, and as values of the body itself (json.dumps writes them)."""
    message = _message(None, [_call(0, '{"city": "Paris", "days": NaN, "limit": Infinity}')])
    message["score"] = float("nan")
    return _finite(message, bool(body.get("stream")))


def broken_off(body: dict, auth: str) -> Answer:
    """Half of a valid answer whose Content-Length promises all of it, then the connection closed: an engine that
    broke off its own answer (llama-cpp-python's server cuts a stream when a second request arrives)."""
    answer = _finite(_message("It is sunny in Paris."), bool(body.get("stream")))
    data = b"".join(answer.pieces)
    return Answer([data[: len(data) // 2]], length=len(data), content_type=answer.content_type)


def echo_key(body: dict, auth: str) -> Answer:
    """The request's key echoed back: in a 401 body for a plain request, in the content of a streamed answer."""
    if body.get("stream"):
        return _finite(_message(f"You sent {auth}"), True)
    return _whole(json.dumps({"error": {"message": f"Invalid key: {auth}", "code": 401}}), False, 401)


MODES: dict[str, Callable[[dict, str], Answer]] = {f.__name__: f for f in (
    endless_stream, endless_body, trickle, huge, many_calls, deep, surrogate, nan, broken_off, echo_key)}


class HostileServer:
    """``with HostileServer("trickle") as server:`` then point a client at ``server.base_url``."""

    def __init__(self, mode: str, port: int = 0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        self.mode = MODES[mode]
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = json.dumps({"object": "list", "data": [{"id": "hostile"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with hostile._lock:
                    hostile.requests += 1
                answer = hostile.mode(body, self.headers.get("Authorization", ""))
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                if answer.length is None:  # the body ends when the connection does
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(answer.length))
                self.end_headers()
                sent = 0
                try:
                    for piece in answer.pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        sent += len(piece)
                        if answer.pause_s:
                            time.sleep(answer.pause_s)
                except OSError:  # the client gave up, as it should
                    self.close_connection = True
                if answer.length is not None and sent < answer.length:  # less than promised: hang up
                    self.close_connection = True

        return Handler


def _summary(mode: Callable[[dict, str], Answer]) -> str:
    """A mode's docstring up to its first colon or full stop, for ``--help``."""
    text = " ".join((mode.__doc__ or "").split()).replace("``", "")
    return re.split(r"[:.](?:\s|$)", text, maxsplit=1)[0]


PROG = "python -m toolmatrix.testing.hostile"


def main(argv: list[str] | None = None, prog: str = PROG) -> None:
    """``python -m toolmatrix.testing.hostile MODE [--port N]``; ``prog``: the command as it was started
    (``python -m toolmatrix.hostile`` too), for ``--help``."""
    # Raw text, so each mode keeps its own line: wrapped here as argparse would wrap it.
    modes = "\n".join(textwrap.fill(_summary(mode), 78, initial_indent=f"  {name:<15} ", subsequent_indent=" " * 18)
                      for name, mode in MODES.items())
    parser = argparse.ArgumentParser(prog=prog, description=textwrap.fill(__doc__.splitlines()[0], 78),
                                     epilog=f"modes:\n{modes}", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=list(MODES), metavar="MODE",
                        help="how every request is answered, plain or streamed (the modes are listed below)")
    parser.add_argument("--port", type=int, default=0, metavar="N",
                        help="the port to listen on at 127.0.0.1 (default 0: a free one; the address is printed on "
                             "stderr)")
    args = parser.parse_args(argv)
    with HostileServer(args.mode, args.port) as server:
        print(f"hostile server ({args.mode}) listening at {server.base_url}", file=sys.stderr, flush=True)
        server._thread.join()


if __name__ == "__main__":
    main()

"""HTTP only: send a request through the surface's official client (``openai`` for Chat Completions and the
Responses API, ``anthropic`` for the Messages API) and capture everything raw.

Nothing raises out of here for a bad engine: HTTP errors, timeouts, refused connections and broken streams all
become an ``Exchange`` with ``http_status``/``error`` set and the body kept, so a check can blame and the run goes on.
The request recorded is the JSON body exactly as it went over the wire.

Every answer is bounded, whatever the server does: ``Target.timeout_s`` is a deadline for the whole exchange
(not only for each read, which a server sending a byte a second never trips), and at most
``Target.max_answer_bytes`` of an answer are kept. Both bounds sit in the HTTP transport under the openai client,
so they hold for error bodies too, which the client reads itself.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Iterator

import attrs
import openai

try:  # the HTTP library under the openai client: httpx2 from openai 3, httpx before
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx  # type: ignore[no-redef]  # the same API under its old name

from toolmatrix.base import jsontext
from toolmatrix.wire.answer import Cut
from toolmatrix.wire.exchange import Exchange, Mode
from toolmatrix.wire.surfaces import MESSAGES, Surface, surface

if TYPE_CHECKING:  # imported when a Messages run makes its client: it is 2/3 of the import time of every process
    import anthropic

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a real answer is kilobytes; a stream of a long one, a few hundred
KEEPALIVE_EXPIRY_S = 2.0  # an idle kept-alive connection is dropped after this (see BoundedTransport)


@attrs.frozen
class Target:
    """Where requests go: an OpenAI-compatible base URL and the model name the server expects."""

    base_url: str
    model: str
    api_key_env: str | None = None  # name of the environment variable holding the key; the key is never stored
    timeout_s: float = 120.0  # for the whole exchange
    max_answer_bytes: int = MAX_ANSWER_BYTES
    keep_alive: bool = True  # the engine spec's ``keep_alive``; a server reached by URL alone: as the clients do

    def api_key(self) -> str:
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise RuntimeError(f"--api-key-env: environment variable {self.api_key_env} is not set")
            return value
        return "toolmatrix-no-key"

    @property
    def secret(self) -> str | None:
        """The key's value when it is the user's, to be kept out of everything recorded and printed."""
        return self.api_key() if self.api_key_env else None


HttpClient = httpx.Client
HTTPError = httpx.HTTPError


class _Bounded(httpx.SyncByteStream):
    """An answer's body, read until it ends, the deadline passes, or (counting on, keeping nothing) past the limit."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: float, limit: int):
        # Checked after every piece; a server silent mid-answer is ended by the per-read timeout, so the whole
        # exchange takes at most twice the timeout. (A timer that shut the socket down at the deadline once
        # ended other exchanges: a pooled socket outlives its exchange.)
        self.inner, self.deadline, self.limit = inner, deadline, limit
        self.received = 0
        self.expired = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            for piece in self.inner:
                kept = max(0, min(len(piece), self.limit - self.received))
                self.received += len(piece)
                if kept:
                    yield piece[:kept]
                if time.monotonic() >= self.deadline:
                    self.expired = True
                    return
        except httpx.HTTPError:
            # A read that timed out past the deadline (a server silent mid-answer) is the exchange's timeout;
            # any other break in the stream is the server's.
            if time.monotonic() < self.deadline:
                raise
            self.expired = True

    def close(self) -> None:
        self.inner.close()

    @property
    def cut(self) -> Cut | None:
        if self.received <= self.limit:
            return None
        return Cut(limit_bytes=self.limit, received_bytes=self.received, whole=not self.expired)


class BoundedTransport(httpx.HTTPTransport):
    """The openai client's transport, with a deadline for each whole exchange and a limit on what is kept."""

    def __init__(self, timeout_s: float, max_bytes: int, keep_alive: bool = True):
        # keep_alive False, a connection per exchange, is the engine spec's choice (llama.cpp's: it gives each
        # kept-alive connection one of its few HTTP threads for up to 5 s, so the idle connections of a run's
        # clients starved the next request into false infra errors, 17 of 40 requests kept alive, 0 of 40 without).
        # An idle connection is dropped after 2 s, before the server's own keep-alive timeout (uvicorn's 5 s) can
        # close it under a request being sent: with no retries that would be a false infra error.
        super().__init__(limits=httpx.Limits(max_keepalive_connections=None if keep_alive else 0,
                                             keepalive_expiry=KEEPALIVE_EXPIRY_S))
        self.timeout_s, self.max_bytes = timeout_s, max_bytes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self.timeout_s  # the headers themselves wait at most timeout_s (httpx)
        response = super().handle_request(request)
        # A sync transport's stream is a sync one; the checker sees the union of both kinds.
        response.stream = _Bounded(response.stream, deadline, self.max_bytes)  # type: ignore[arg-type]
        # The client wraps the stream in its own: the bounds stay reachable for the reader through the response.
        response.extensions[_BOUNDS] = response.stream
        return response


_BOUNDS = "toolmatrix.bounds"


def _bounded(response: httpx.Response) -> _Bounded | None:
    return response.extensions.get(_BOUNDS)


def _transport(target: Target) -> BoundedTransport:
    return BoundedTransport(target.timeout_s, target.max_answer_bytes, target.keep_alive)


def make_http(target: Target) -> httpx.Client:
    """A plain HTTP client at the server's root (no ``/v1``), with the run's key and bounds, for an engine's own
    endpoints (its render and raw completion, see ``evidence``); the same HTTP library as the openai client."""
    root = target.base_url.rstrip("/").removesuffix("/v1")
    return httpx.Client(base_url=root, headers={"Authorization": f"Bearer {target.api_key()}"},
                        timeout=target.timeout_s, transport=_transport(target))


@attrs.frozen
class Connection:
    """The official client of one surface for one target, and the bounds every exchange through it keeps."""

    client: openai.OpenAI | anthropic.Anthropic
    target: Target
    surface: Surface
    path: str  # the surface's endpoint, relative to the client's base URL

    def send(self, body: dict, mode: Mode) -> Exchange:
        """Send ``body``, a chat-completions request, in ``mode``, said as the surface says it."""
        return send(self, self.surface.request(body), mode)


def make_client(target: Target, api: str = "chat") -> Connection:
    # No retries: a retried 500 would hide exactly the engine bug we are here to see.
    http = httpx.Client(timeout=target.timeout_s, transport=_transport(target))
    options: dict[str, Any] = {"api_key": target.api_key(), "max_retries": 0, "timeout": target.timeout_s, "http_client": http}
    if api == MESSAGES:  # the anthropic client adds /v1 itself, and its own headers (x-api-key, anthropic-version)
        import anthropic

        root = target.base_url.rstrip("/").removesuffix("/v1")
        return Connection(anthropic.Anthropic(base_url=root, **options), target, surface(api), "/v1" + surface(api).path)
    return Connection(openai.OpenAI(base_url=target.base_url, **options), target, surface(api), surface(api).path)


def _json_or_none(data: str | bytes) -> Any:
    try:
        return jsontext.loads(data)
    except jsontext.NotJSON:
        return None


def _sent_body(request: httpx.Request | None, fallback: dict) -> dict:
    if request is None:
        return fallback
    try:
        sent = _json_or_none(request.content)
    except httpx.RequestNotRead:
        return fallback
    return sent if isinstance(sent, dict) else fallback


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # SSE's line ends only: JSON text may hold U+2028, which splitlines cuts


def _sse_payloads(text: str) -> list[Any]:
    chunks: list[Any] = []
    for line in _LINE_BREAK.split(text):
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        parsed = _json_or_none(data)
        chunks.append(parsed if parsed is not None else data)
    return chunks


def _read(response: httpx.Response) -> tuple[bytes, str | None]:
    """What came of the body, and the transport problem that ended it early (kept: what came before it)."""
    body = bytearray()
    try:
        for piece in response.iter_bytes():
            body += piece
    except httpx.HTTPError as exc:
        return bytes(body), f"{type(exc).__name__}: {exc}"
    finally:
        response.close()
    return bytes(body), None


def _exchange(mode: Mode, request: dict, response: httpx.Response, body: bytes, error: str | None, timeout_s: float,
              latency_s: float, api: str) -> Exchange:
    bounded = _bounded(response)
    cut = bounded.cut if bounded else None
    if bounded is not None and bounded.expired:
        error = f"timeout: no complete answer within {timeout_s:g} s (the whole exchange)"
    elif cut is not None:
        error = (f"answer of {cut.received_bytes} bytes is over the limit of {cut.limit_bytes} "
                 f"(--max-answer-bytes); the first {cut.limit_bytes} are kept")
    # A body that ended early, neither at our deadline nor at our limit: the engine broke off its own answer.
    broken_off = error is not None and cut is None and not (bounded is not None and bounded.expired)
    text = body.decode("utf-8", errors="replace")
    if mode == "stream" and response.is_success:
        chunks = tuple(_sse_payloads(text))
        # A "stream" with no event at all (an HTML page, a plain body) is kept as text: it says what answered.
        return Exchange(mode, request, http_status=response.status_code, chunks=chunks, error=error, cut=cut,
                        raw_text=None if chunks else text, latency_s=latency_s, broken_off=broken_off, api=api)
    parsed = _json_or_none(body)
    return Exchange(mode, request, http_status=response.status_code, response=parsed, error=error, cut=cut,
                    raw_text=None if parsed is not None else text, latency_s=latency_s, broken_off=broken_off, api=api)


def _errors(client: openai.OpenAI | anthropic.Anthropic) -> tuple[type[Any], type[Any], type[Any]]:
    """The client's status, timeout and connection errors: the two clients come from one generator (Stainless),
    with the same post() and the same error classes, each in its own package."""
    module = sys.modules[type(client).__module__.partition(".")[0]]
    return module.APIStatusError, module.APITimeoutError, module.APIConnectionError


def send(connection: Connection, body: dict, mode: Mode) -> Exchange:
    """Send ``body`` (a full request of the connection's surface, without ``stream``) in ``mode``; never raises for
    the engine.

    ``post`` is the official client's own way to send a body verbatim: its auth, base URL, headers, timeouts and
    error mapping, none of the typed layer's reshaping (which also costs a millisecond a request). The body is
    always taken as a stream of bytes, so the transport's bounds apply while it is read.
    """
    if mode == "stream":
        body = {**body, "stream": True}
    client, timeout_s, api = connection.client, connection.target.timeout_s, connection.surface.id
    status_error, timeout_error, connection_error = _errors(client)
    started = time.perf_counter()
    try:
        response = client.post(connection.path, cast_to=httpx.Response, body=body, stream=True)
        raw, error = _read(response)
    except status_error as exc:  # the client has read the (bounded) error body already
        response, raw, error = exc.response, exc.response.content, None
    except timeout_error as exc:
        return Exchange(mode, _sent_body(exc.request, body), error=f"timeout: no answer within {timeout_s:g} s",
                        latency_s=time.perf_counter() - started, api=api)
    except connection_error as exc:
        cause = exc.__cause__ or exc
        return Exchange(mode, _sent_body(exc.request, body), error=f"connection error: {type(cause).__name__}: {cause}",
                        latency_s=time.perf_counter() - started, api=api)
    return _exchange(mode, _sent_body(response.request, body), response, raw, error, timeout_s,
                     time.perf_counter() - started, api)

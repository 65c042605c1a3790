"""HTTP only: send a chat request through the official ``openai`` client and capture everything raw.

Nothing raises out of here for a bad engine: HTTP errors, timeouts, refused connections and broken streams all
become an ``Exchange`` with ``http_status``/``error`` set and the body kept, so a check can blame and the run goes on.
The request recorded is the JSON body exactly as it went over the wire.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import attrs
import openai

try:  # the HTTP library under the openai client: httpx2 from openai 3, httpx before
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx

from toolmatrix.exchange import Exchange, Mode

@attrs.frozen
class Target:
    """Where requests go: an OpenAI-compatible base URL and the model name the server expects."""

    base_url: str
    model: str
    api_key_env: str | None = None  # name of the environment variable holding the key; the key is never stored
    timeout_s: float = 120.0

    def api_key(self) -> str:
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise RuntimeError(f"--api-key-env: environment variable {self.api_key_env} is not set")
            return value
        return "toolmatrix-no-key"


HttpClient = httpx.Client
HTTPError = httpx.HTTPError


def make_http(target: Target) -> httpx.Client:
    """A plain HTTP client at the server's root (no ``/v1``), with the run's key and timeout, for an engine's own
    endpoints (its render and raw completion, see ``evidence``); the same HTTP library as the openai client."""
    root = target.base_url.rstrip("/").removesuffix("/v1")
    return httpx.Client(base_url=root, headers={"Authorization": f"Bearer {target.api_key()}"},
                        timeout=target.timeout_s)


def make_client(target: Target) -> openai.OpenAI:
    # No retries: a retried 500 would hide exactly the engine bug we are here to see.
    return openai.OpenAI(base_url=target.base_url, api_key=target.api_key(), max_retries=0, timeout=target.timeout_s)


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _sent_body(request: httpx.Request | None, fallback: dict) -> dict:
    if request is None:
        return fallback
    try:
        return json.loads(request.content)
    except (ValueError, httpx.RequestNotRead):
        return fallback


def _sse_payloads(lines) -> list[Any]:
    chunks: list[Any] = []
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        parsed = _json_or_none(data)
        chunks.append(parsed if parsed is not None else data)
    return chunks


def send(client: openai.OpenAI, body: dict, mode: Mode) -> Exchange:
    """Send ``body`` (a full chat-completions request, without ``stream``) in ``mode``; never raises for the engine.

    ``client.post`` is the openai client's own way to send a body verbatim: its auth, base URL, timeouts and
    error mapping, none of the typed layer's reshaping (which also costs a millisecond a request).
    """
    if mode == "stream":
        body = {**body, "stream": True}
    started = time.perf_counter()
    request: httpx.Request | None = None
    try:
        resp = client.post("/chat/completions", cast_to=httpx.Response, body=body, stream=mode == "stream")
        request = resp.request
        if mode == "stream":
            try:
                chunks = _sse_payloads(resp.iter_lines())
            finally:
                resp.close()
            return Exchange(mode, _sent_body(request, body), http_status=resp.status_code, chunks=tuple(chunks),
                            latency_s=time.perf_counter() - started)
        parsed = _json_or_none(resp.text)
        return Exchange(mode, _sent_body(request, body), http_status=resp.status_code, response=parsed,
                        raw_text=None if parsed is not None else resp.text, latency_s=time.perf_counter() - started)
    except openai.APIStatusError as exc:
        text = exc.response.text  # the client has read the error body already, streaming or not
        parsed = _json_or_none(text)
        return Exchange(mode, _sent_body(exc.request, body), http_status=exc.status_code, response=parsed,
                        raw_text=None if parsed is not None else text, latency_s=time.perf_counter() - started)
    except openai.APITimeoutError as exc:
        return Exchange(mode, _sent_body(exc.request, body), error=f"timeout after {client.timeout}",
                        latency_s=time.perf_counter() - started)
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        return Exchange(mode, _sent_body(exc.request, body), error=f"connection error: {type(cause).__name__}: {cause}",
                        latency_s=time.perf_counter() - started)
    except httpx.HTTPError as exc:  # a stream cut mid-way surfaces as a bare HTTP error
        return Exchange(mode, _sent_body(request, body), error=f"{type(exc).__name__}: {exc}",
                        latency_s=time.perf_counter() - started)

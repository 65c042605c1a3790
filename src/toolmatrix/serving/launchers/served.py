"""What a server reached by URL serves, asked before any case is sent.

A mistyped ``--model`` or a URL that is no OpenAI-compatible API is the user's one-line mistake, not a run of
failures blamed on the engine. The server's model list (``GET /models``) names what it serves; a model it does not
list is asked once (one token), because some servers list one name and answer to any (llama.cpp's llama-server
without its router), while others refuse a name they do not serve (vLLM, SGLang, Ollama: HTTP 404).
"""

from __future__ import annotations

import difflib

import attrs

from toolmatrix.base import jsontext
from toolmatrix.serving.launchers.base import NotServed
from toolmatrix.serving.launchers.readiness import http_request
from toolmatrix.wire.errors import UNKNOWN_MODEL, answer_said, hide, html_title


@attrs.frozen
class Served:
    """What ``GET /models`` told: the ids served, or None with what came back where it was no model list."""

    ids: tuple[str, ...] | None
    said: str

    @classmethod
    def read(cls, status: int, body: bytes) -> Served:
        try:
            parsed = jsontext.loads(body)
        except ValueError:
            parsed = None
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if status == 200 and isinstance(data, list) and all(isinstance(m, dict) for m in data):
            ids = tuple(str(m["id"]) for m in data if "id" in m)
            return cls(ids, f"serves {', '.join(ids) or 'no model'}")
        return cls(None, answer_said(status, body))


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _refused(where: str, request: str, said: str) -> NotServed:
    return NotServed(f"{where}: {request} was refused ({said}): give the server's key with --api-key-env NAME (the "
                     f"name of the environment variable that holds it)")


def check_served(base_url: str, model: str, api_key: str | None = None, timeout: float = 10.0,
                 answer_timeout: float = 30.0) -> str:
    """What the server at ``base_url`` serves, in one line for the run's header; raises ``NotServed`` naming
    what came back when it cannot be reached, refuses the key, is no OpenAI-compatible API, or does not serve
    ``model`` (naming the ids it serves). ``answer_timeout``: how long the one-token request may take. A key the
    server echoes back is in neither."""
    try:
        return hide(_check_served(base_url, model, api_key, timeout, answer_timeout), api_key)
    except NotServed as exc:
        raise NotServed(hide(str(exc), api_key)) from None


def _check_served(base_url: str, model: str, api_key: str | None, timeout: float, answer_timeout: float) -> str:
    where = f"--base-url {base_url}"
    try:
        status, body = http_request("GET", base_url + "/models", timeout=timeout, headers=_headers(api_key))
    except OSError as exc:
        raise NotServed(f"{where}: cannot connect ({exc})") from None
    if status in (401, 403):
        raise _refused(where, "GET /models", answer_said(status, body))
    if status >= 500:
        raise NotServed(f"{where}: GET /models answered {answer_said(status, body)}")
    served = Served.read(status, body)
    if served.ids is not None and model in served.ids:
        return served.said
    # Not listed, or no list: one short request tells whether this server answers for that model at all.
    probe = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1}
    try:
        status, answer = http_request("POST", base_url + "/chat/completions", probe, timeout=answer_timeout,
                                      headers=_headers(api_key))
    except OSError as exc:  # no answer in time tells nothing: the cases will say what this server does
        return f"GET /models: {served.said}; a one-token request for {model}: {exc}"
    said = answer_said(status, answer)
    text = answer.decode("utf-8", errors="replace")
    if status in (401, 403):
        raise _refused(where, "POST /chat/completions", said)
    if served.ids is not None and (status == 404 or (400 <= status < 500 and UNKNOWN_MODEL.search(text))):
        close = difflib.get_close_matches(model, served.ids, n=1, cutoff=0.4)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise NotServed(f"--model {model}: the server at {base_url} does not serve it ({said}); it serves: "
                        f"{', '.join(served.ids) or 'no model'}{hint}")
    if served.ids is None and (status in (404, 405, 501) or html_title(text) is not None):
        raise NotServed(f"{where} is no OpenAI-compatible API: GET /models answered {served.said}, "
                        f"POST /chat/completions {said} (the URL should end where /models and /chat/completions "
                        f"are, e.g. http://host:8000/v1)")
    if served.ids is not None and 200 <= status < 300:
        return f"{served.said}; answers to {model} too"
    return f"GET /models: {served.said}; a one-token request for {model}: {said}"

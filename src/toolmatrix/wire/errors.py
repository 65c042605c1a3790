"""What an answer that is no API answer says: an HTML page, an error body in any server's words, a model the
server says it does not serve. No I/O: the external launcher's check and the HTTP check read answers with it."""

from __future__ import annotations

import re
from typing import Any

from toolmatrix.base import jsontext

REDACTED = "[REDACTED]"  # in place of the user's key wherever a server echoed it back


def hide(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` (the user's key) replaced by ``REDACTED``."""
    return text.replace(secret, REDACTED) if secret else text


# An error message that says the model asked for is not there, in the words servers use (vLLM and SGLang: "The
# model `x` does not exist."; Ollama: "model 'x' not found"; LiteLLM-style proxies: "Invalid model name").
UNKNOWN_MODEL = re.compile(r"(?i)\bmodel\b[^\n]{0,200}?\b(does not exist|not found|is not served|unknown)\b"
                           r"|\b(unknown|invalid|no such) model\b")


def html_title(text: str) -> str | None:
    """A short name for an HTML page (its title, else its first heading), or None when ``text`` is no HTML page."""
    head = text.lstrip()[:15].lower()
    if not head.startswith(("<!doctype html", "<html", "<head", "<body", "<title")):
        return None
    found = re.search(r"(?is)<(title|h1)[^>]*>(.*?)</\1>", text)
    return " ".join(found.group(2).split())[:80] if found else "untitled"


def answer_said(status: int, body: bytes | str) -> str:
    """What one answer was, in a few words: ``HTTP 404 (an HTML page: 'Error response')``, or its error message."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    title = html_title(text)
    if title is not None:
        return f"HTTP {status} (an HTML page: {title!r})"
    try:
        parsed: Any = jsontext.loads(text)
    except ValueError:
        return f"HTTP {status} ({' '.join(text.split())[:100]!r})" if text.strip() else f"HTTP {status} (empty body)"
    return _with_message(status, error_message(parsed))


def _with_message(status: int, message: str | None) -> str:
    return f"HTTP {status}: {message[:160]}" if message else f"HTTP {status}"


def error_message(body: Any) -> str | None:
    """The message of an error body in the shapes servers write: OpenAI's ``{error: {message}}``, vLLM's and
    SGLang's ``{object: error, message}``, FastAPI's ``{detail}``, Ollama's ``{error: "..."}``."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    for value in (error.get("message") if isinstance(error, dict) else error, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value:
            return value
    return None


def not_an_answer(status: int | None, body: Any, raw_text: str | None, answer_key: str) -> str | None:
    """Why an answer is none of the API's at all, in one line, or None: no such route or model (404), a method
    the server does not serve (405, 501), a key refused (401, 403), a 4xx that says the model is unknown, an HTML
    page, or a 2xx JSON body with neither the surface's answer (``answer_key``) nor an ``id``. Each is the set-up's
    doing (the URL, the model name, the key, a server of another kind), never the engine's answer to the case.
    ``body``: the answer parsed as JSON, else None and ``raw_text`` its text."""
    if status is None:
        return None
    if raw_text is not None and html_title(raw_text) is not None:
        return f"{answer_said(status, raw_text)}: no API answered"
    if 200 <= status < 300:  # the common case, on every answer: nothing is serialised here
        if isinstance(body, dict) and answer_key not in body and "id" not in body:
            return f"HTTP {status}: a JSON body that is no answer of this API (keys: {', '.join(list(body)[:6])})"
        return None
    message = error_message(body)
    # The body as the client kept it: parsed (its message read here, nothing serialised), or text.
    said = answer_said(status, raw_text) if raw_text is not None else _with_message(status, message)
    if 400 <= status < 500 and UNKNOWN_MODEL.search(message or ""):
        return f"{said}: the server does not serve this model (check --model)"
    if status in (404, 405, 501):
        return f"{said}: the server has no such route or model (check --base-url and --model)"
    if status in (401, 403):
        return f"{said}: the server refused the key (--api-key-env)"
    return None

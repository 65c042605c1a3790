"""Readiness: wait until an engine answers, run its readiness requests, and ask its version. Both launchers
(process and docker) start an engine the same way from here; one small HTTP helper serves all of it."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

import attrs

from toolmatrix.base.exitcodes import death_message
from toolmatrix.serving.launchers.base import LaunchError
from toolmatrix.serving.placeholders import render, render_json
from toolmatrix.serving.registry import EngineSpec, ReadinessStep

ANSWER_LIMIT = 1024 * 1024  # what a readiness answer, a model list or a one-token answer needs, and more


def http_request(method: str, url: str, body: Any = None, timeout: float = 10.0,
                 headers: Mapping[str, str] | None = None) -> tuple[int, bytes]:
    """(status, body) of one request; an HTTP error status is an answer, a refused connection an OSError, and so is
    an answer not whole within ``timeout`` (a server that trickles or never ends its body). At most
    ``ANSWER_LIMIT`` bytes of a body are kept."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, _bounded_read(resp, deadline, url)
    except urllib.error.HTTPError as exc:
        return exc.code, _bounded_read(exc, deadline, url)


def _bounded_read(resp: Any, deadline: float, url: str) -> bytes:
    body = bytearray()
    read = getattr(resp, "read1", resp.read)  # what one read brings: a trickle cannot hold a fixed-size read open
    while len(body) < ANSWER_LIMIT:
        piece = read(65536)
        if not piece:
            break
        body += piece
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}: no whole answer in time")
    return bytes(body[:ANSWER_LIMIT])


@attrs.frozen
class Watched:
    """The engine being started, as readiness sees it: a name for messages, and its launcher's answers."""

    what: str  # e.g. "llamacpp (llama-server)"
    engine_id: str
    alive: Callable[[], bool]
    exit_code: Callable[[], int | None]  # negative: the signal that killed it
    log_tail: Callable[[], str]

    def died(self) -> LaunchError:
        """The error for an engine that stopped before it was ready: how it ended and, for a signal, why."""
        return LaunchError(f"{self.what} stopped before it was ready ({death_message(self.exit_code(), self.engine_id)})"
                           f"\n--- log tail ---\n{self.log_tail()}")


def wait_ready(url: str, timeout_s: float, engine: Watched) -> float:
    """Poll ``url`` until it answers 200; fail fast when the engine exits. Returns seconds waited."""
    started = time.monotonic()
    delay = 0.1
    while True:
        if not engine.alive():
            raise engine.died()
        try:
            status, _ = http_request("GET", url, timeout=2.0)
            if status == 200:
                return time.monotonic() - started
        except OSError:
            pass  # not listening yet
        if time.monotonic() - started > timeout_s:
            raise LaunchError(f"{engine.what} not ready at {url} after {timeout_s:.0f}s\n--- log tail ---\n"
                              f"{engine.log_tail()}")
        time.sleep(delay)
        delay = min(delay * 1.5, 2.0)


def become_ready(engine: EngineSpec, root_url: str, values: Mapping[str, str], watched: Watched) -> None:
    """The engine's readiness path answers 200, then each of its readiness requests succeeds."""
    wait_ready(root_url + engine.readiness_path, engine.readiness_timeout_s, watched)
    for step in engine.readiness_steps:
        run_step(root_url, step, values, watched)


def field_values(document: Any, dotted: str) -> list[Any]:
    """The leaves at a dotted path; lists on the way (and at the end) are searched element-wise."""
    current = [document]
    for part in dotted.split("."):
        current = [item for value in current for item in (value if isinstance(value, list) else [value])]
        current = [value[part] for value in current if isinstance(value, Mapping) and part in value]
    return [item for value in current for item in (value if isinstance(value, list) else [value])]


def _step_problem(root_url: str, step: ReadinessStep, values: Mapping[str, str]) -> str | None:
    body = render_json(step.json, values) if step.json is not None else None
    try:
        status, raw = http_request(step.method, root_url + step.path, body, 10.0 if step.poll else step.timeout_s)
    except OSError as exc:
        return f"no answer ({exc})"
    if status != 200:
        return f"HTTP {status}: {raw[:300].decode(errors='replace')}"
    if step.expect is None:
        return None
    wanted = render(step.expect["contains"], values)
    try:
        found = field_values(json.loads(raw), step.expect["field"])
    except ValueError:
        return f"answer is not JSON: {raw[:200].decode(errors='replace')}"
    return None if wanted in found else f"{step.expect['field']} is {found!r}, without {wanted!r}"


def run_step(root_url: str, step: ReadinessStep, values: Mapping[str, str], engine: Watched) -> None:
    """Make one readiness request (repeating it while ``poll`` and time allow); raise LaunchError on failure."""
    deadline = time.monotonic() + step.timeout_s
    while True:
        problem = _step_problem(root_url, step, values)
        if problem is None:
            return
        if not engine.alive():
            raise engine.died()
        if not step.poll or time.monotonic() > deadline:
            why = f" ({step.why})" if step.why else ""
            raise LaunchError(f"readiness {step.method} {step.path}: {problem}{why}\n--- log tail ---\n"
                              f"{engine.log_tail()}")
        time.sleep(1.0)


def probe_version(root_url: str, probe: Mapping[str, str] | None) -> str | None:
    """Ask the running server for its version (a dotted field of a JSON endpoint)."""
    if not probe:
        return None
    try:
        status, body = http_request("GET", root_url + probe["path"], timeout=5.0)
        value: Any = json.loads(body) if status == 200 else None
        for part in probe["field"].split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return str(value) if value is not None else None
    except (OSError, ValueError):
        return None

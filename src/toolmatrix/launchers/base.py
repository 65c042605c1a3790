"""What every launcher provides, and the readiness/version probes they share."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Protocol

import attrs


class LaunchError(RuntimeError):
    """The engine could not be started or never became ready; the message carries its log tail."""


@attrs.frozen
class Endpoint:
    base_url: str  # OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1
    served_model: str


class Launcher(Protocol):
    kind: str

    def start(self) -> Endpoint: ...

    def stop(self) -> None: ...

    def alive(self) -> bool: ...

    def log_tail(self, lines: int = 40) -> str: ...

    def exit_code(self) -> int | None:
        """A dead engine's exit status (negative: the signal that killed it); None while alive or unknowable."""
        ...

    def describe(self) -> dict[str, Any]:
        """The engine part of run.json: version, launcher, flags, binary/image."""
        ...


def context_size(slots: int) -> int:
    """Context to start an engine with: 8192 tokens a slot holds a 40-tool request and the few-shot prelude."""
    return 8192 * slots


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_ready(url: str, timeout_s: float, alive: Callable[[], bool], what: str, log_tail: Callable[[], str]) -> float:
    """Poll ``url`` until it answers 200; fail fast when the engine exits. Returns seconds waited."""
    started = time.monotonic()
    delay = 0.1
    while True:
        if not alive():
            raise LaunchError(f"{what} exited before it was ready\n--- log tail ---\n{log_tail()}")
        try:
            status, _ = http_get(url, timeout=2.0)
            if status == 200:
                return time.monotonic() - started
        except OSError:
            pass  # not listening yet
        if time.monotonic() - started > timeout_s:
            raise LaunchError(f"{what} not ready at {url} after {timeout_s:.0f}s\n--- log tail ---\n{log_tail()}")
        time.sleep(delay)
        delay = min(delay * 1.5, 2.0)


def probe_version(root_url: str, probe: dict | None) -> str | None:
    """Ask the running server for its version (a dotted field of a JSON endpoint)."""
    if not probe:
        return None
    try:
        status, body = http_get(root_url + probe["path"])
        value: Any = json.loads(body) if status == 200 else None
        for part in probe["field"].split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return str(value) if value is not None else None
    except (OSError, ValueError):
        return None

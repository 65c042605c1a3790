"""The host side of the worker protocol (see ``adapters/_worker.py``): one engine's parser process, driven by
JSON lines. The main process never imports an engine; a worker that dies takes only its engine's answers along."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .adapters._worker import exchange


class WorkerError(RuntimeError):
    """The worker process died or answered something that is not the protocol; the message carries its stderr."""


class WorkerClient:
    """A running worker: ``hello`` once at start, then one ``parse`` per fixture."""

    def __init__(self, python: Path, script: Path, env: dict[str, str] | None = None) -> None:
        # stderr to a file, not a pipe: a chatty engine would fill a pipe nobody reads and block the worker.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.proc = subprocess.Popen([str(python), str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, encoding="utf-8", env=env, bufsize=1)
        self.hello: dict[str, Any] = self.request({"op": "hello"})

    def request(self, message: dict) -> dict:
        line = exchange(self.proc, message)
        if not line:
            raise WorkerError(f"worker {self.proc.args[1]} died: {self._stderr_tail()}")
        return json.loads(line)

    def _stderr_tail(self) -> str:
        self.proc.kill()
        self.proc.wait()
        self._stderr.seek(0)
        return self._stderr.read()[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # type: ignore[union-attr]
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

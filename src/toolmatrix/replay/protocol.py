"""The host side of the worker protocol (see ``adapters/_worker.py``): one engine's parser process, driven by
JSON lines. The main process never imports an engine; a worker that dies takes only its engine's answers along."""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from toolmatrix.base.errors import ToolmatrixError


class WorkerError(ToolmatrixError, RuntimeError):
    """The worker process died or answered something that is not the protocol; the message carries its stderr."""


class WorkerClient:
    """A running worker: ``hello`` once at start, then one ``parse`` per fixture. ``send`` may run ahead of
    ``receive`` (answers come back in order): the worker parses the next fixture while the host judges this one."""

    def __init__(self, python: Path, script: Path, env: dict[str, str] | None = None) -> None:
        # stderr to a file, not a pipe: a chatty engine would fill a pipe nobody reads and block the worker.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8")
        self.script = script
        self.proc = subprocess.Popen([str(python), str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, encoding="utf-8", env=env, bufsize=1)
        # Requests are written by a thread of their own: a request and an answer both larger than a pipe's buffer
        # would otherwise block each side on its write while the other is not reading.
        self._outbox: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write, daemon=True)
        self._writer.start()
        self.hello: dict[str, Any] = self.request({"op": "hello"})

    def _write(self) -> None:
        assert self.proc.stdin is not None
        while (line := self._outbox.get()) is not None:
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return  # the worker is gone: the next receive says why

    def send(self, message: dict) -> None:
        self._outbox.put(json.dumps(message, ensure_ascii=False) + "\n")

    def receive(self) -> dict:
        """The answer to the oldest request sent and not yet received."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"worker {self.script} died: {self._stderr_tail()}")
        return json.loads(line)

    def request(self, message: dict) -> dict:
        self.send(message)
        return self.receive()

    def _stderr_tail(self) -> str:
        self.proc.kill()
        self.proc.wait()
        self._stderr.seek(0)
        return self._stderr.read()[-2000:]

    def close(self) -> None:
        self._outbox.put(None)
        self._writer.join(timeout=10)
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

"""Start an engine as a local process (llama-server on CPU is the embedded default).

The child is tied to us twice over: it gets SIGKILL from the kernel if the pytest process dies without
cleaning up (PR_SET_PDEATHSIG), and it runs in its own session so that a Ctrl-C in the terminal reaches pytest
first, which then stops the engine in order.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from toolmatrix.launchers.base import Endpoint, LaunchError, context_size, probe_version, wait_ready
from toolmatrix.registry import EngineSpec, ModelSpec, cache_dir
from toolmatrix.weights import WeightsError, gguf_path, sha256_of

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the session/atexit cleanup still applies


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_binary(engine: EngineSpec) -> Path | None:
    name = engine.process["binary"]
    override = os.environ.get(f"TOOLMATRIX_{engine.id.upper()}_BIN")
    if override:
        return Path(override)
    cached = cache_dir() / "bin" / name
    if cached.is_file():
        return cached
    found = shutil.which(name)
    return Path(found) if found else None


def install_binary(engine: EngineSpec) -> Path:
    """Run the engine's install script (e.g. build llama-server from source) into the cache."""
    script = engine.process.get("install")
    if not script:
        raise LaunchError(f"{engine.process['binary']} not found (set TOOLMATRIX_{engine.id.upper()}_BIN or put it on PATH)")
    path = resources.files("toolmatrix.data").joinpath(script)
    print(f"toolmatrix: {engine.process['binary']} not found; building it with {script} (a few minutes, once)",
          file=sys.stderr, flush=True)
    with resources.as_file(path) as script_path:
        result = subprocess.run(["bash", str(script_path), str(cache_dir() / "bin")], stdout=sys.stderr)
    found = find_binary(engine)
    if result.returncode != 0 or found is None:
        raise LaunchError(f"{script} failed (exit {result.returncode}); see the output above")
    return found


class ProcessLauncher:
    kind = "process"

    def __init__(self, engine: EngineSpec, model: ModelSpec, slots: int = 2, run_id: str = "", log_dir: Path | None = None):
        if not engine.process:
            raise LaunchError(f"engine {engine.id!r} has no process launcher (engines/{engine.id}.yaml: process)")
        self.engine, self.model, self.slots = engine, model, slots
        self.log_path = Path(tempfile.mkdtemp(prefix=f"toolmatrix-{run_id or engine.id}-", dir=log_dir)) / f"{engine.id}.log"
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.weights: Path | None = None
        self.root_url = ""

    def command(self, port: int) -> list[str]:
        try:
            self.weights = gguf_path(self.model) if self.engine.weights_kind == "gguf" else None
        except WeightsError as exc:
            raise LaunchError(str(exc)) from None
        values = {
            "host": "127.0.0.1", "port": str(port), "weights": str(self.weights or ""),
            "chat_template": str(self.model.chat_template or ""), "served_name": self.model.served_name,
            "slots": str(self.slots), "ctx_size": str(context_size(self.slots)), "threads": str(os.cpu_count() or 2),
        }
        args = [a.format(**values) for a in self.engine.process["args"]]
        if not self.model.chat_template:  # drop a template flag with nothing to pass
            args = [a for i, a in enumerate(args) if a and not (i + 1 < len(args) and args[i + 1] == "")]
        return args + list(self.engine.family_args.get(self.model.family, ()))

    def start(self) -> Endpoint:
        binary = find_binary(self.engine) or install_binary(self.engine)
        port = free_port()
        self.argv = [str(binary), *self.command(port)]
        self.root_url = f"http://127.0.0.1:{port}"
        env = {**os.environ, **self.engine.process.get("env", {})}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, preexec_fn=_die_with_parent, start_new_session=True)
        try:
            wait_ready(self.root_url + self.engine.readiness_path, self.engine.readiness_timeout_s, self.alive,
                       f"{self.engine.id} ({binary.name})", self.log_tail)
        except BaseException:
            self.stop()  # never leave a half-started engine behind
            raise
        return Endpoint(self.root_url + self.engine.api_prefix, self.model.served_name)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.engine.id,
            "version": probe_version(self.root_url, self.engine.version_probe) if self.alive() else None,
            "launcher": self.kind,
            "flags": self.argv[1:],
            "base_url": self.root_url + self.engine.api_prefix,
            "image": None,
            "image_digest": None,
            "binary": self.argv[0] if self.argv else None,
            "log": str(self.log_path),
        }

    def weights_info(self) -> dict[str, Any]:
        return {"weights": str(self.weights) if self.weights else None,
                "weights_sha256": sha256_of(self.weights) if self.weights else None}

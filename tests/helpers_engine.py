"""A fake engine binary for end-to-end tests, and the pytest command line that runs the suite from outside.

The stand-in is a script that runs ``python -m toolmatrix.testing.fake`` with the engine's own arguments; pointed at by
``TOOLMATRIX_<ENGINE>_BIN``, it is started, health-checked and stopped by the process launcher exactly as the
engine's binary would be.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from toolmatrix.serving.launchers.process import binary_override_var

ROOT = Path(__file__).parents[1]


def stand_in(folder: Path, engine_id: str, *fake_args: str) -> dict[str, str]:
    """Environment variables that make ``engine_id``'s binary the fake server, started with ``fake_args``."""
    script = folder / f"{engine_id}-stand-in"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m toolmatrix.testing.fake {shlex.join(fake_args)} "$@"\n')
    script.chmod(0o755)
    return {binary_override_var(engine_id): str(script)}


def pytest_cmd(*args: str) -> list[str]:
    """``python -m pytest`` with this checkout's configuration, from any working directory."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
            str(ROOT / "pyproject.toml"), *args]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``, children first (from /proc: the engines a run started in sessions of their own
    are still its children)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


@contextlib.contextmanager
def interruptible(command: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """A child run that a test interrupts with a signal: Ctrl-C (SIGINT) reaches it even where this process
    ignores SIGINT (a shell's background job passes the ignoring on, and Python then never raises
    KeyboardInterrupt), and however the test ends, a timeout included, the child and all it started are killed."""
    proc = subprocess.Popen(command, preexec_fn=_default_sigint, **popen)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            for pid in descendants(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait()


def read_until(proc: subprocess.Popen, text: str, timeout_s: float) -> None:
    """Read the child's output (text mode) until a line holds ``text``, the time is up, or the output ends."""
    deadline = time.monotonic() + timeout_s
    for line in proc.stdout:
        if text in line or time.monotonic() > deadline:
            return


def assert_start_refused_by_sigill(launcher: Any, module: str, logs: Path) -> None:
    """``launcher.start()`` is refused by llama.cpp's machine check, dead by SIGILL in ``module``, with what to do,
    and no server was started (nor its log folder made)."""
    from toolmatrix.serving.launchers import LaunchError

    try:
        launcher.start()
    except LaunchError as exc:
        message = str(exc)
    else:
        raise AssertionError("the start was not refused")
    assert message.startswith(f"llamacpp: llama-server cannot run on this machine: toolmatrix-cpu-check with {module}: "
                              "killed by SIGILL: this machine refuses an instruction set of the CPU module ggml chose "
                              "here"), message
    assert "TOOLMATRIX_LLAMA_CPU_VARIANTS='haswell alderlake' toolmatrix install llamacpp" in message
    assert launcher.proc is None and not logs.exists(), "no server was started"

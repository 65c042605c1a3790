"""Facts about where and with what a run happened, for run.json."""

from __future__ import annotations

import functools
import os
import platform
import re
import socket
import subprocess
import tempfile
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import attrs

from toolmatrix.serving.registry import cache_dir, data_root


def toolmatrix_version() -> str:
    try:
        return version("toolmatrix")
    except PackageNotFoundError:
        return "0+checkout"


def gpus() -> list[dict]:
    """The GPUs ``nvidia-smi`` reports (name, memory, driver); none where it is absent or says nothing."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    found = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0]:
            found.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    return found


def hardware() -> dict:
    """The host's name, CPU model, cores, memory, platform and GPUs (as nvidia-smi reports them)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (OSError, ValueError):
        memory = 0.0
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count() or 0, "memory_gb": round(memory, 1),
            "gpus": gpus(), "platform": platform.platform()}


@attrs.frozen
class Portable:
    """Writes the producing machine's absolute paths in results text as a reader can use them: relative to the
    results directory or the checkout, or as ``{cache}`` / ``{tmp}`` / ``~``. A machine's layout means nothing to a
    reader and should not be published; a case's own text (``/tmp/notes.txt`` in a prompt) is left alone, since
    only these roots are rewritten, longest first, and only as whole path components."""

    roots: tuple[tuple[str, re.Pattern, str], ...]  # (root, its pattern, what it becomes)

    @classmethod
    def here(cls, results_dir: Path | None = None) -> Portable:
        """This machine's roots: ``results_dir``, the checkout (or installed data) and the working directory
        written relative, toolmatrix's cache, our temporary folders, the home directory."""
        named = {str(Path.home().resolve()): "~", str(cache_dir().resolve()): "{cache}",
                 str(data_root().resolve()): ".", str(Path.cwd().resolve()): "."}
        if results_dir is not None:
            named[str(results_dir.resolve())] = "."
        # Our own temporary folders (engine logs without a results directory): a prefix, not a whole component.
        named[str(Path(tempfile.gettempdir()).resolve() / "toolmatrix-")] = "{tmp}/toolmatrix-"
        return cls.of(named.items())

    @classmethod
    def of(cls, roots: Iterable[tuple[str, str]]) -> Portable:
        kept = sorted(((root.rstrip("/"), token) for root, token in roots if root.rstrip("/") not in ("", "/")),
                      key=lambda pair: -len(pair[0]))
        # A whole component only: "/work/main" matches "/work/main/x" and "/work/main", never "/work/main2".
        return cls(tuple((root, re.compile(r"(?<![\w.@/-])" + re.escape(root)
                                           + ("" if root.endswith("-") else r"(/|(?![\w.-]))")), token)
                         for root, token in kept))

    def text(self, text: str) -> str:
        for root, pattern, token in self.roots:
            if root in text:  # a substring test first: every record line passes here, few hold a root
                text = pattern.sub(functools.partial(_relative, token=token), text)
        return text

    def data(self, value: Any) -> Any:
        """Every string of a JSON-shaped value, rewritten."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.data(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(item) for item in value]
        return value


def _relative(found: re.Match, token: str) -> str:
    """``.``: "ROOT/x" is "x" and "ROOT" itself "."; any other token keeps what follows."""
    slash = found.group(1) if found.re.groups else ""
    return ("" if slash else ".") if token == "." else token + (slash or "")


def program_name(argv0: str) -> str:
    """``pytest`` for ``/venv/bin/pytest`` or ``.../site-packages/pytest/__main__.py``."""
    path = Path(argv0)
    return path.parent.name if path.name == "__main__.py" else path.name

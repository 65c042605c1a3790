"""One adapter per engine, behind one small protocol: where its parser environment is, which parser a fixture
gets there (from the engine spec's own family -> parser mapping, the live tier's), and how to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

import attrs

from toolmatrix.registry import EngineSpec, cache_dir

INSTALLED = "toolmatrix-installed"  # written last by an install, with pip freeze: the env's exact versions


@attrs.frozen
class Support:
    """Which parsers replay a fixture on an engine; falsy, with the reason, where none does."""

    tool_parser: str | None
    reasoning_parser: str | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.tool_parser is not None


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value after ``flag`` in a spec's argument list (``[--tool-call-parser, hermes]`` -> ``hermes``)."""
    args = list(args)
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


@attrs.define
class Adapter:
    """Host side of one engine's replay. Subclasses set the class fields; most need nothing else."""

    spec: EngineSpec
    engine: str = ""
    worker_name: str = ""  # a file beside this one, run by the env's python
    env_name: str = ""  # under ~/.cache/toolmatrix/venvs/
    pip_steps: tuple[tuple[str, ...], ...] = ()  # to create the env (None: an env the live tier installs)
    tool_flag: str = "--tool-call-parser"
    reasoning_flag: str = "--reasoning-parser"

    @property
    def env_dir(self) -> Path:
        return cache_dir() / "venvs" / self.env_name

    @property
    def python(self) -> Path:
        return self.env_dir / "bin" / "python"

    @property
    def worker(self) -> Path:
        return Path(__file__).with_name(self.worker_name)

    def ready(self) -> str | None:
        """None when the env is installed, else why not (with the command that installs it)."""
        if not self.worker.is_file():
            return f"{self.engine}: no replay worker yet ({self.worker.name} missing)"
        if (self.env_dir / INSTALLED).is_file():
            return None
        return f"{self.engine}'s parser environment is not installed ({self.env_dir}): toolmatrix replay-install {self.engine}"

    def versions(self) -> str:
        path = self.env_dir / INSTALLED
        return path.read_text() if path.is_file() else ""

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        args = self.spec.family_args.get(family)
        parser = flag_value(args, self.tool_flag) if args is not None else None
        parser = parser or self.spec.replay_parsers.get(family)  # one the server picks itself (no flag)
        if parser is None:
            reason = self.spec.cannot_serve.get(family) or self.spec.cannot_serve.get("*") or "no tool parser"
            return Support(None, None, f"{self.spec.id}: {reason} ({family})")
        reasoning = None
        if reasoning_style:
            reasoning = flag_value(self.spec.reasoning_args.get(reasoning_style, ()), self.reasoning_flag)
        return Support(parser, reasoning)

    def env(self) -> Mapping[str, str]:
        return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def install(self) -> Path:
        """Create the env from ``pip_steps`` (once); what the live tier installs is reused as it is."""
        if not self.pip_steps:
            raise RuntimeError(f"{self.engine}: its environment is the live tier's: toolmatrix install {self.engine}")
        pip = [str(self.python), "-m", "pip", "--disable-pip-version-check"]
        commands = [[sys.executable, "-m", "venv", "--clear", str(self.env_dir)]]
        commands += [[*pip, "install", *step] for step in self.pip_steps]
        for command in commands:
            subprocess.run(command, check=True, stdout=sys.stderr)
        freeze = subprocess.run([*pip, "freeze"], capture_output=True, text=True, check=True).stdout
        (self.env_dir / INSTALLED).write_text(freeze)
        return self.env_dir

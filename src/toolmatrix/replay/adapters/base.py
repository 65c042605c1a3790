"""One adapter per engine, behind one small protocol, built from the engine spec's ``replay`` data: where its parser
environment is, which parser a fixture gets there (from the engine spec's own family -> parser mapping, the live
tier's), and how to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.serving.registry import EngineSpec, ReplaySpec, cache_dir

from ..detok import Detok

INSTALLED = "toolmatrix-installed"  # written last by an install, with pip freeze: the env's exact versions


class InstallError(ToolmatrixError, RuntimeError):
    """An engine release pip will not install here; the message ends with pip's own error."""


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
    """Host side of one engine's replay, made from its spec's ``replay`` data (environment, pins, ids-to-text rule,
    cost); a subclass adds only an engine's own behaviour."""

    spec: EngineSpec
    at: str | None = None
    """ENGINE@VERSION: that version of ``package`` first on the worker's path, the pinned env under it (so an old
    parser runs with the pinned env's dependencies); None: the pinned version."""
    change: Path | None = None
    """A changed copy of the parser package (``toolmatrix replay-verify``), first on the worker's path."""
    replay: ReplaySpec = attrs.field(init=False)  # the spec's replay data (what each value means: the schema)
    detok: Detok = attrs.field(init=False)
    """How the engine's server turns the model's token ids into the text its parser reads."""

    @replay.default
    def _replay(self) -> ReplaySpec:
        if self.spec.replay is None:
            raise ValueError(f"{self.spec.source}: no replay.detok, so no replay adapter for {self.spec.id}")
        return self.spec.replay

    @detok.default
    def _detok(self) -> Detok:
        return Detok(self.spec.id, **self.replay.detok)

    @property
    def engine(self) -> str:
        return self.spec.id

    @property
    def name(self) -> str:
        name = f"{self.engine}@{self.at}" if self.at else self.engine
        return f"{name}+change" if self.change else name

    @property
    def env_dir(self) -> Path:
        return cache_dir() / "venvs" / self.replay.env

    @property
    def overlay_version(self) -> str | None:
        """The release laid over the env: ENGINE@VERSION's, else the one the spec pins (``replay.release``)."""
        return self.at or self.replay.release or None

    @property
    def overlay_dir(self) -> Path | None:
        version = self.overlay_version
        return cache_dir() / "venvs" / f"{self.replay.env}-at" / version if version else None

    @property
    def python(self) -> Path:
        return self.env_dir / "bin" / "python"

    @property
    def worker(self) -> Path:
        return Path(__file__).with_name(f"{self.engine}_worker.py")

    def ready(self) -> str | None:
        """None when the env is installed, else why not (with the command that installs it)."""
        if not self.worker.is_file():
            return f"{self.engine}: no replay worker yet ({self.worker.name} missing)"
        if not (self.env_dir / INSTALLED).is_file():
            return (f"{self.engine}'s parser environment is not installed ({self.env_dir}): "
                    f"toolmatrix replay-install {self.engine}")
        if self.overlay_dir is not None and not (self.overlay_dir / INSTALLED).is_file():
            what = "the release its replay pins" if self.at is None else "that release"
            return (f"{self.name}: {what} is not installed ({self.overlay_dir}): "
                    f"toolmatrix replay-install {self.name}")
        return None

    @property
    def version(self) -> str | None:
        """The release of the engine's parser package this adapter replays; None where its env is not installed."""
        if self.overlay_version is not None:
            return self.overlay_version
        return _pinned_in(self.versions(), self.replay.package)

    def versions(self) -> str:
        path = self.env_dir / INSTALLED
        lines = path.read_text().splitlines() if path.is_file() else []
        if self.overlay_dir is None:
            return "".join(line + "\n" for line in lines)
        overlay = self.overlay_dir / INSTALLED  # the package the overlay holds (``fallback_package``'s, maybe)
        laid = overlay.read_text().split() if overlay.is_file() else [f"{self.replay.package}=={self.overlay_version}"]
        under = {line.partition("==")[0].lower() for line in [*laid, f"{self.replay.package}=="]}
        return "".join(line + "\n" for line in [*laid, *(x for x in lines if x.partition("==")[0].lower() not in under)])

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        args = self.spec.family_args.get(family)
        parser = flag_value(args, self.replay.tool_flag) if args is not None else None
        parser = parser or self.spec.replay_parsers.get(family)  # one the server picks itself (no flag)
        if parser is None:
            reason = self.spec.cannot_serve.get(family) or self.spec.cannot_serve.get("*") or "no tool parser"
            return Support(None, None, f"{self.spec.id}: {reason} ({family})")
        reasoning = None
        if reasoning_style:
            reasoning = flag_value(self.spec.reasoning_args.get(reasoning_style, ()), self.replay.reasoning_flag)
        return Support(parser, reasoning)

    def env(self) -> Mapping[str, str]:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        # PYTHONPATH comes before site-packages: the changed copy's modules win, then an old version's.
        first = [str(p) for p in (self.change, self.overlay_dir) if p is not None]
        if first:
            env["PYTHONPATH"] = os.pathsep.join([*first, *filter(None, [env.get("PYTHONPATH")])])
        return env

    def install(self) -> Path:
        """Create the env from the spec's ``replay.pip`` steps (once); what the live tier installs is reused as it is. ENGINE@VERSION:
        only ``package`` at that version, without dependencies, into its own folder over the installed env."""
        if self.overlay_dir is not None:
            return self._install_overlay()
        if not self.replay.pip:
            raise InstallError(f"{self.engine}: its environment is the live tier's: toolmatrix install {self.engine}")
        pip = [str(self.python), "-m", "pip", "--disable-pip-version-check"]
        commands = [[sys.executable, "-m", "venv", "--clear", str(self.env_dir)]]
        commands += [[*pip, "install", *step] for step in self.replay.pip]
        for command in commands:
            subprocess.run(command, check=True, stdout=sys.stderr)
        freeze = subprocess.run([*pip, "freeze"], capture_output=True, text=True, check=True).stdout
        (self.env_dir / INSTALLED).write_text(freeze)
        return self.env_dir

    def _install_overlay(self) -> Path:
        assert self.overlay_dir is not None
        if not self.replay.package:
            raise InstallError(f"{self.engine}: no engine package to install at a version")
        if not (self.env_dir / INSTALLED).is_file():
            command = "replay-install" if self.replay.pip else "install"  # else the live tier's env
            raise InstallError(f"{self.name} lays over {self.engine}'s own environment, which is not installed: "
                               f"toolmatrix {command} {self.engine}")
        if (self.overlay_dir / INSTALLED).is_file():
            return self.overlay_dir
        refused = []
        for package in self.replay.packages:
            requirement = f"{package}=={self.overlay_version}"
            done = subprocess.run([str(self.python), "-m", "pip", "--disable-pip-version-check", "install",
                                   "--quiet", "--no-deps", "--upgrade", "--target", str(self.overlay_dir),
                                   requirement], capture_output=True, text=True)
            if done.returncode == 0:
                (self.overlay_dir / INSTALLED).write_text(requirement + "\n")
                return self.overlay_dir
            # pip's own last words: the measured reason a sweep's column gives
            said = (done.stderr or done.stdout).strip()
            refused.append(f"{requirement} does not install here: {said[-600:]}")
            if "No matching distribution" not in said:  # a network or build failure: not a release it lacks
                break
        raise InstallError("\n".join(refused))


def _pinned_in(freeze: str, package: str) -> str | None:
    """``package``'s version in a ``pip freeze`` text, None where it is not there."""
    for line in freeze.splitlines():
        name, _, version = line.partition("==")
        if name.lower() == package.lower() and version:
            return version
    return None

"""What every launcher provides: start, stop, alive, log tail, exit code, describe, the weights it handed the
engine; and the context size."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from toolmatrix.base.errors import ToolmatrixError

if TYPE_CHECKING:
    from toolmatrix.serving.registry import DockerSpec, EngineSpec, ModelSpec, ProcessSpec, WeightsSource


class LaunchError(ToolmatrixError, RuntimeError):
    """The engine could not be started or never became ready; the message carries its log tail."""


def process_of(engine: EngineSpec) -> ProcessSpec:
    """The engine's ``process:`` section. Launcher code runs only where refusal() (or a filter on the section)
    found one; should an engine without one get this far, the error says so instead of an AttributeError."""
    if engine.process is None:
        raise LaunchError(f"engine {engine.id!r} has no process launcher ({engine.source.name} has no `process:`)")
    return engine.process


def docker_of(engine: EngineSpec, variant: str | None = None) -> DockerSpec:
    """The engine's ``docker:`` section with ``variant``'s image (see ``process_of`` for why it raises)."""
    if engine.docker is None:
        raise LaunchError(f"engine {engine.id!r} has no docker launcher ({engine.source.name} has no `docker:`)")
    return engine.docker.variant(variant)


def weights_of(engine: EngineSpec, model: ModelSpec) -> WeightsSource:
    """The model's weights of the kind the engine loads; refusal() has made sure there are some."""
    source = model.weights_source(engine.weights_kind)
    if source is None:
        raise LaunchError(f"model {model.id!r} has no {engine.weights_kind} weights, which {engine.title} loads")
    return source


class NotServed(LaunchError):
    """A server reached by URL is no OpenAI-compatible API, refuses the key, or does not serve the model: the
    message is the whole story (nothing was started)."""


@attrs.frozen
class Endpoint:
    base_url: str  # OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1
    served_model: str
    served: str = ""  # what a server reached by URL said it serves (``served.check_served``)


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

    def weights_info(self) -> dict[str, Any]:
        """The model part of run.json the launcher knows: ``weights``, ``weights_sha256``, ``revision``,
        ``chat_template`` and ``chat_template_sha256``; empty where it handed the engine nothing."""
        ...


def log_file(prefix: str, name: str, log_dir: Path | None) -> Path:
    """Where an engine's log goes: ``log_dir`` (the results directory's ``logs``, made when the log is written,
    so that a refused pair leaves nothing behind), else a new folder in the temporary directory."""
    if log_dir is not None:
        return log_dir / f"{prefix}{name}.log"
    return Path(tempfile.mkdtemp(prefix=prefix)) / f"{name}.log"


def context_size(slots: int) -> int:
    """Context to start an engine with: 8192 tokens a slot holds a 40-tool request and the few-shot prelude."""
    return 8192 * slots


def pid_alive(pid: int) -> bool:
    """Whether a process of this machine exists (a container's or a lease's owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True

"""Launchers start and stop a pair's server: ``docker`` (a container), ``process`` (a local binary) and
``external`` (a URL).

Every launcher has the same small surface (``Launcher``); the pytest plugin picks one by name from
``LAUNCHERS`` and never asks which it got.
"""

from __future__ import annotations

from toolmatrix.serving.launchers.base import Endpoint, Launcher, LaunchError, NotServed
from toolmatrix.serving.launchers.docker import DockerLauncher
from toolmatrix.serving.launchers.external import ExternalLauncher
from toolmatrix.serving.launchers.process import ProcessLauncher
from toolmatrix.serving.registry import EngineSpec

LAUNCHERS: dict[str, type] = {"docker": DockerLauncher, "process": ProcessLauncher, "external": ExternalLauncher}


def default_launcher(base_url: str | None = None, engine: EngineSpec | None = None) -> str:
    """The launcher when none is named: ``external`` for a URL; ``docker`` for an engine that only runs in its
    container (SGLang, TGI, TensorRT-LLM, ...: ``pytest --engine=sglang --model=qwen3`` starts it); else
    ``process``. pytest, its several-pair runs, fan-out plans and ``toolmatrix plan`` agree on what a command
    would start."""
    if base_url:
        return "external"
    return "docker" if engine is not None and engine.process is None and engine.docker is not None else "process"


__all__ = ["default_launcher", "Endpoint", "LaunchError", "Launcher", "NotServed", "LAUNCHERS", "DockerLauncher",
           "ExternalLauncher", "ProcessLauncher"]

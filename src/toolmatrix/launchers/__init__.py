"""Launchers start and stop a pair's server: ``docker`` (a container), ``process`` (a local binary) and
``external`` (a URL).

Every launcher has the same small surface (``Launcher``); the pytest plugin picks one by name from
``LAUNCHERS`` and never asks which it got.
"""

from __future__ import annotations

from toolmatrix.launchers.base import Endpoint, LaunchError, Launcher
from toolmatrix.launchers.docker import DockerLauncher
from toolmatrix.launchers.external import ExternalLauncher
from toolmatrix.launchers.process import ProcessLauncher

LAUNCHERS: dict[str, type] = {"docker": DockerLauncher, "process": ProcessLauncher, "external": ExternalLauncher}


def default_launcher(base_url: str | None = None) -> str:
    """The launcher when none is named: pytest and ``toolmatrix plan`` agree on what a command would start."""
    return "external" if base_url else "process"

__all__ = ["default_launcher", "Endpoint", "LaunchError", "Launcher", "LAUNCHERS", "DockerLauncher", "ExternalLauncher", "ProcessLauncher"]

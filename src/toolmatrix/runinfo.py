"""Facts about where and with what a run happened, for run.json."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def toolmatrix_version() -> str:
    try:
        return version("toolmatrix")
    except PackageNotFoundError:
        return "0+checkout"


def hardware() -> dict:
    """CPU model, cores, memory and platform (GPUs: none are used by the launchers that run here)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (OSError, ValueError):
        memory = 0.0
    return {"cpu": cpu, "cores": os.cpu_count() or 0, "memory_gb": round(memory, 1), "gpus": [],
            "platform": platform.platform()}

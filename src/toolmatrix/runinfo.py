"""Facts about where and with what a run happened, for run.json."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


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

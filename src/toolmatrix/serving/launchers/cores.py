"""The CPU cores an engine started on this machine may spin on: the ones no other engine of ours holds.

A CPU engine runs one compute thread per core it is given and each thread spins. Two llama-servers with
``--threads 2`` on a 2-core machine served 8 requests in 150 s; with ``--threads 1`` each, in 11 s. So every
engine the process launcher starts leases its cores here (a file in the cache, shared by every toolmatrix process
on the machine: the suite's own engine and those its tests start) and gets as many threads as it holds cores.
When every core is held, the newcomer shares the one held by the fewest engines rather than getting none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections import Counter
from typing import Iterable, Iterator

import attrs

from toolmatrix.serving.launchers.base import pid_alive
from toolmatrix.serving.registry import cache_dir

LEASES = "core-leases.json"


@attrs.frozen
class Lease:
    """Cores held by one engine until ``release``; the holder's death releases them too."""

    key: str
    cpus: tuple[int, ...]

    @property
    def threads(self) -> int:
        return len(self.cpus)

    @property
    def cpu_list(self) -> str:
        return cpu_list(self.cpus)

    def release(self) -> None:
        with _leases() as held:
            held.pop(self.key, None)


def cpu_list(cpus: Iterable[int]) -> str:
    """Cores as a Linux CPU list (``0-1``, ``3``, ``0,2``), the form OMP/NUMA bindings read."""
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity, which a container or taskset may narrow)."""
    return sorted(os.sched_getaffinity(0))


def lease() -> Lease:
    """The cores no live engine of ours holds (at least one), held from now on by the calling process."""
    cpus = usable_cpus()
    with _leases() as held:
        taken = Counter(cpu for entry in held.values() for cpu in entry["cpus"])
        free = [cpu for cpu in cpus if not taken[cpu]] or [min(cpus, key=lambda cpu: (taken[cpu], cpu))]
        key = uuid.uuid4().hex
        held[key] = {"pid": os.getpid(), "cpus": free}
    return Lease(key, tuple(free))


@contextlib.contextmanager
def _leases() -> Iterator[dict[str, dict]]:
    """The leases of live holders, read and written back under an exclusive lock."""
    path = cache_dir() / LEASES
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        try:
            held = json.loads(handle.read() or "{}")
        except ValueError:  # a torn or foreign file: leases are advisory, start afresh
            held = {}
        held = {key: entry for key, entry in held.items()
                if isinstance(entry.get("pid"), int) and pid_alive(entry["pid"])}
        yield held
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(held))


"""A real local Ray cluster for the fan-out tests: a head that runs nothing and worker nodes with fake GPUs, each
started by ``ray start`` as on a real cluster, and one node killed outright to play a machine lost mid-run.

Every process of a cluster has the cluster's own temp folder on its command line, so a cluster is stopped (or a
node killed) by exactly its own processes, never another Ray on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

RAY = [sys.executable, "-m", "ray.scripts.scripts"]


def pids(pattern: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def descendants(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    children = [int(p) for p in out.split()]
    return children + [d for c in children for d in descendants(c)]


@attrs.define
class LocalCluster:
    temp_dir: Path
    port: int
    node_ports: list[int]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, workers: int, env: dict[str, str], gpus_per_node: int = 1) -> LocalCluster:
        # A short folder: Ray's unix sockets live below it, and socket paths are limited to 107 bytes.
        temp_dir = Path(tempfile.mkdtemp(prefix="tmray", dir="/tmp"))
        from toolmatrix.serving.launchers.process import free_port

        cluster = cls(temp_dir, free_port(), [free_port() for _ in range(workers)])
        common = ["--node-ip-address", "127.0.0.1", "--object-store-memory", "80000000", "--disable-usage-stats"]
        # The head holds no CPU: every shard runs on a worker node, as on a cluster whose head is only a scheduler.
        try:
            cluster._ray("start", "--head", "--port", str(cluster.port), "--num-cpus", "0", "--num-gpus", "0",
                         "--include-dashboard=false", "--temp-dir", str(temp_dir), *common, env=env)
            for index in range(workers):
                cluster._start_node(index, ["--num-cpus", "1", "--num-gpus", str(gpus_per_node), *common], env)
        except BaseException:
            cluster.stop()  # a node that failed to start leaves no head or folder behind
            raise
        return cluster

    def _start_node(self, index: int, args: list[str], env: dict[str, str]) -> None:
        """Worker node ``index``; once more on a fresh port when ``ray start`` fails (once in CI, on a loaded
        2-core machine, for a reason its output did not keep): both failures' output if it fails again."""
        from toolmatrix.serving.launchers.process import free_port

        failures = []
        for _ in range(2):
            try:
                self._ray("start", "--address", self.address, "--node-manager-port", str(self.node_ports[index]),
                          *args, env=env)
                return
            except RuntimeError as exc:
                failures.append(str(exc))
                self.node_ports[index] = free_port()
        raise RuntimeError("\nand again on another port:\n".join(failures))

    def _ray(self, *args: str, env: dict[str, str]) -> None:
        done = subprocess.run([*RAY, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ray {' '.join(args)}: exit {done.returncode}\n"
                               f"{done.stdout[-1500:]}{done.stderr[-3000:]}")

    def node_processes(self, port: int) -> list[int]:
        """The raylet of the worker node on ``port`` and everything it started (Ray workers, their shards)."""
        raylets = [p for p in pids(f"node_manager_port={port}") if p in pids(str(self.temp_dir))]
        return [pid for raylet in raylets for pid in [raylet, *descendants(raylet)]]

    def kill_node(self, port: int) -> int:
        """The machine dies: its raylet and every process below it, at once and without warning. Returns how many
        processes it had."""
        victims = self.node_processes(port)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(victims)

    def node_running(self, pattern: str, timeout: float = 60) -> int:
        """The port of the worker node that has a process matching ``pattern`` below it, once one has."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for port in self.node_ports:
                below = self.node_processes(port)
                if any(pid in below for pid in pids(pattern)):
                    return port
            time.sleep(0.2)
        raise TimeoutError(f"no worker node ran {pattern!r} within {timeout}s")

    def stop(self) -> None:
        """Every process of this cluster (agents rename themselves, so their parents' trees are searched too),
        then its folder."""
        own = pids(str(self.temp_dir))
        for pid in {*own, *(d for pid in own for d in descendants(pid))}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)

"""Fan-out wall time: N pairs as Ray tasks on a local Ray cluster against the same pairs one after another.

Both runs happen here, in this order, with the same pairs and options: ``pytest --engine=A,B --model=X,Y`` (each
pair in turn, as without an executor) and the same command with ``--ray ADDRESS`` on a cluster of one head and
``--nodes`` worker nodes started by ``ray start``. The engines are the fake server standing in for each engine's
binary, answering after ``--delay`` seconds: the time a GPU engine spends generating, which is what fanning out
to other machines saves. On one 2-core machine real CPU engines would only share the same two cores, so the
figure says what the executor costs and overlaps, not how fast a model runs. Prints both wall times and their
ratio (cluster start-up is printed apart: a real cluster is already up).

    python benchmarks/bench_fanout.py [--nodes 4] [--delay 0.5] [-k single]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/ helpers: the fake engine and the local cluster

from tests.helpers_engine import pytest_cmd, stand_in  # noqa: E402
from tests.helpers_ray import LocalCluster  # noqa: E402

ENGINES = "llamacpp,llama-cpp-python"
MODELS = "gemma3-270m,qwen2.5-coder-0.5b"  # local weights: both engines' process launchers serve them


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: the fake's answers fail cases, as expected
        sys.exit(f"{' '.join(command)}\nexit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4, help="worker nodes of the local cluster (default 4)")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the fake engine takes per answer")
    parser.add_argument("-k", default="single", help="case selection for every pair (default: single, 16 items)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    env = {**stand_in(work, "llamacpp", "--delay", str(args.delay)),
           **stand_in(work, "llama-cpp-python", "--delay", str(args.delay))}
    options = ["-n", "2", "-k", args.k, f"--engine={ENGINES}", f"--model={MODELS}"]
    pairs = len(ENGINES.split(",")) * len(MODELS.split(","))
    print(f"{pairs} pairs, -k {args.k!r}, fake engine answering after {args.delay}s; {os.cpu_count()} cores")
    one_by_one = timed(pytest_cmd(*options, "--results-dir", str(work / "seq")), work, {**os.environ, **env})
    print(f"one after another:          {one_by_one:7.1f} s")
    start = time.perf_counter()
    cluster = LocalCluster.start(workers=args.nodes, env=env)
    print(f"local Ray cluster start:    {time.perf_counter() - start:7.1f} s  (head + {args.nodes} worker nodes)")
    try:
        fanned = timed(pytest_cmd(*options, "--ray", cluster.address, "--results-dir", str(work / "ray")), work,
                       {**os.environ, **env})
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"fanned out on Ray:          {fanned:7.1f} s")
    print(f"ratio one-by-one / Ray:     {one_by_one / fanned:7.2f}x  ({pairs} pairs, {args.nodes} nodes)")


if __name__ == "__main__":
    main()

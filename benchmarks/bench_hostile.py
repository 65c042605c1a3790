"""What does a hostile server cost a run of the whole library? Per mode of ``toolmatrix.testing.hostile``: the wall time
against its bound (items x --request-timeout; split over the workers, the least it can take), the peak memory of
the whole pytest tree (controller and workers, summed, sampled every 0.2 s), the records written, and whether
anything printed a traceback. Target: within the bound, under 1 GB, one record per case x mode.

    python benchmarks/bench_hostile.py [--modes huge trickle] [--timeout 1] [-n 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from toolmatrix.library.cases import load_cases
from toolmatrix.serving.registry import data_root
from toolmatrix.testing.hostile import MODES, HostileServer

ROOT = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pages = int((entry / "statm").read_text().split()[1])
        except OSError:  # gone meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[pid] = pages * PAGE
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return sum(rss.get(pid, 0) for pid in tree)


def run_mode(mode: str, timeout_s: float, workers: int, folder: Path) -> dict:
    with HostileServer(mode) as server:
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(ROOT), "-c",
               str(ROOT / "pyproject.toml"), "-n", str(workers), "--base-url", server.base_url, "--model", "m",
               "--api-key-env", "TM_HOSTILE_KEY", "--request-timeout", str(timeout_s), "--results-dir",
               str(folder / mode), "--no-matrix"]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "TM_HOSTILE_KEY": "sk-bench-key"})
        peak = [0]

        def sample() -> None:
            while proc.poll() is None:
                peak[0] = max(peak[0], tree_rss(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, _ = proc.communicate()
        wall = time.perf_counter() - started
        sampler.join()
    lines = (folder / mode / "results.jsonl").read_text().splitlines()
    keys = {(r["case_id"], r["mode"]) for r in map(json.loads, lines)}
    return {"wall_s": wall, "peak_mb": peak[0] / 2**20, "records": len(lines), "distinct": len(keys),
            "exit": proc.returncode, "traceback": "Traceback" in out or "INTERNALERROR" in out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--timeout", type=float, default=1.0, help="--request-timeout of the runs (s)")
    parser.add_argument("-n", type=int, default=2, dest="workers", help="xdist workers")
    args = parser.parse_args()
    items = 2 * len(load_cases([data_root() / "cases"]))
    bound = items * args.timeout
    print(f"{items} items, -n {args.workers}, --request-timeout {args.timeout:g} s: bound items x timeout = {bound:.0f} s "
          f"({bound / args.workers:.0f} s split over the workers, plus start-up)")
    print(f"{'mode':<15} {'wall s':>7} {'peak MB':>8} {'records':>8} {'exit':>5}  traceback")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            got = run_mode(mode, args.timeout, args.workers, Path(tmp))
            print(f"{mode:<15} {got['wall_s']:7.1f} {got['peak_mb']:8.0f} {got['records']:>4}/{got['distinct']:<3} "
                  f"{got['exit']:>5}  {'YES' if got['traceback'] else 'no'}", flush=True)


if __name__ == "__main__":
    main()

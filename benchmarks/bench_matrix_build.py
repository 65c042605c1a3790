"""How fast is ``toolmatrix matrix build`` on 10^6 records, how much memory does it take, how big is the page?

Writes synthetic results into a temp dir: 20 models x 10 engines, two runs per pair (the older one gives the
history), 2,500 records per run = 10^6 records of about 1.4 KB each. Then builds the matrix in a fresh process
(so its peak RSS is the build's own) and prints the time, the peak memory and the output sizes.
Targets: build <= 20 s, index.html <= 1.5 MB.

    PYTHONPATH=src python benchmarks/bench_matrix_build.py [--models 20] [--engines 10] [--records 2500]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the shared result fixtures of the tests

from tests.helpers_results import answer, record, run_info  # noqa: E402

CATEGORIES = ("single", "parallel", "nested", "choose", "irrelevance", "multi_turn", "types", "robustness")
BLAMES = ("engine", "model", "template", "infra")
PLACEHOLDER = "__RUN_ID__"


def _line_templates(cases: int) -> dict[tuple[int, str, str], str]:
    """A serialized record per (case, mode, verdict), run id left as a placeholder: generation at disk speed."""
    out = {}
    for n in range(cases):
        case_id = f"{CATEGORIES[n % len(CATEGORIES)]}.case_{n:04d}"
        args = {"city": "Paris", "unit": "celsius", "days": n % 7}
        body = answer(content="Let me check." if n % 3 else None, calls=[{"name": "get_weather", "arguments": args}])
        for mode in ("nonstream", "stream"):
            for verdict in ("pass", "fail", "unsupported", "error"):
                rec = record(case_id, verdict, mode=mode, run_id=PLACEHOLDER, body=body,
                             blame=None if verdict == "pass" else BLAMES[n % len(BLAMES)],
                             expect_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}])
                out[n, mode, verdict] = json.dumps(rec, separators=(",", ":")) + "\n"
    return out


def generate(root: Path, models: int, engines: int, records: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    cases = records // 2
    templates = _line_templates(cases)
    total = 0
    for m in range(models):
        for e in range(engines):
            quality = rng.uniform(0.5, 0.99)
            for run in (0, 1):
                run_id = f"model-{m:02d}@engine-{e:02d}-run{run}"
                directory = root / run_id
                directory.mkdir(parents=True)
                with (directory / "results.jsonl").open("w") as handle:
                    for n in range(cases):
                        for mode in ("nonstream", "stream"):
                            roll = rng.random()
                            verdict = ("pass" if roll < quality else "fail" if roll < quality + 0.6 * (1 - quality)
                                       else "unsupported" if roll < quality + 0.8 * (1 - quality) else "error")
                            handle.write(templates[n, mode, verdict].replace(PLACEHOLDER, run_id))
                            total += 1
                info = run_info(f"model-{m:02d}", f"engine-{e:02d}", run_id, f"2026-01-0{run + 1}T00:00:00+00:00",
                                flags=["--port", "8080", "--jinja", "--tool-call-parser", "hermes"],
                                version=f"v1.{e}.{run}")
                (directory / "run.json").write_text(json.dumps(info))
    return total


def build(root: Path, jobs: int) -> tuple[float, int, int, float]:
    """Build in a fresh process; its (and its workers') peak RSS is then the build's own."""
    code = ("import sys, time; from pathlib import Path; from toolmatrix.matrix import build_matrix; "
            "t = time.perf_counter(); r = build_matrix([Path(sys.argv[1])], Path(sys.argv[2]), jobs=int(sys.argv[3])); "
            "print(f'{time.perf_counter() - t:.2f} {len(r.cells)} {len(r.skipped)}')")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-c", code, str(root / "results"), str(root / "matrix"), str(jobs)],
                          capture_output=True, text=True, check=True)
    seconds, cells, skipped = done.stdout.split()[-3:]
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024  # Linux: KiB
    return float(seconds), int(cells), int(skipped), peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--engines", type=int, default=10)
    parser.add_argument("--records", type=int, default=2500, help="records per run (two runs per pair)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="build once per value (default: 1 2)")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="keep the results and the matrix in DIR")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="toolmatrix-bench-"))
    try:
        started = time.perf_counter()
        total = generate(root / "results", args.models, args.engines, args.records)
        size = sum(p.stat().st_size for p in (root / "results").rglob("results.jsonl"))
        print(f"generated {total:,} records ({size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f}s")
        times = []
        for jobs in args.jobs:
            seconds, cells, skipped, peak_mb = build(root, jobs)
            times.append(seconds)
            print(f"build (jobs={jobs}): {seconds:.2f}s for {cells} cells ({skipped} skipped), "
                  f"peak RSS {peak_mb:.0f} MB per process (target <= 20 s)")
        out = root / "matrix"
        for name in ("index.html", "matrix.md", "matrix.json"):
            target = "  (target <= 1.5 MB)" if name == "index.html" else ""
            print(f"  {name}: {(out / name).stat().st_size / 1e6:.2f} MB{target}")
        cell_files = list((out / "cells").glob("*.jsonl"))
        print(f"  cells/: {len(cell_files)} files, {sum(p.stat().st_size for p in cell_files) / 1e6:.0f} MB")
        ok = min(times) <= 20 and (out / "index.html").stat().st_size <= 1_500_000
        print("targets met" if ok else "TARGET MISSED")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Parser replay speed: the generated fixture set through every ready replay engine in every chunking.

    python benchmarks/bench_replay.py [-j N] [--fixtures FILE] [ENGINE ...]

Runs ``toolmatrix replay`` itself (``-j 3``: the engines side by side) on the full generated set (or FILE: e.g. the
set an older case library generated, to compare with a figure measured on it) and prints each engine's own line
(verdict counts, seconds) with its records per second, then the wall time of the whole command and the tier's
records per second (all engines' records over that wall time). Not a timed test.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    options = {flag: argv[argv.index(flag) + 1] for flag in ("-j", "--fixtures") if flag in argv}
    jobs = options.get("-j", "1")
    engines = [a for i, a in enumerate(argv) if a not in options and (i == 0 or argv[i - 1] not in options)]
    toolmatrix = str(Path(sys.executable).with_name("toolmatrix"))
    with tempfile.TemporaryDirectory() as folder:
        fixtures = Path(options.get("--fixtures") or Path(folder) / "fixtures.jsonl")
        if "--fixtures" not in options:
            subprocess.run([toolmatrix, "replay-generate", "-o", str(fixtures)], check=True)
        command = [toolmatrix, "replay", "--fixtures", str(fixtures), "--results-dir", folder, "-j", jobs,
                   *(a for e in engines for a in ("--engine", e))]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    print(done.stdout + done.stderr, end="")
    total = 0
    # Each engine's line: "ENGINE: {verdict counts} in S s -> DIR" (replay/cli.py).
    for engine, counts, took in re.findall(r"^(\S+): (\{.*?\}) in ([0-9.]+) s", done.stdout, re.M):
        records = sum(v for k, v in ast.literal_eval(counts).items() if k != "skipped_families")
        total += records
        print(f"{engine}: {records} records in {took} s, {records / max(float(took), 1e-9):.0f} records/s")
    print(f"wall: {seconds:.1f} s for every engine (-j {jobs}), exit status {done.returncode}; "
          f"the tier: {total} records, {total / seconds:.0f} records/s")


if __name__ == "__main__":
    main(sys.argv[1:])

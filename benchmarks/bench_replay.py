"""Parser replay speed: the generated fixture set through every ready replay engine in every chunking.

    python benchmarks/bench_replay.py [-j N] [--fixtures FILE] [ENGINE ...]

Runs ``toolmatrix replay`` itself (``-j 3``: the engines side by side) on the full generated set (or FILE: e.g. the
set an older case library generated, to compare with a figure measured on it) and prints the wall time of the whole
command and each engine's own line (records, verdict counts, seconds). Not a timed test.
"""

from __future__ import annotations

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
    print(f"wall: {seconds:.1f} s for every engine (-j {jobs}), exit status {done.returncode}")


if __name__ == "__main__":
    main(sys.argv[1:])

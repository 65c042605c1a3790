"""Parser replay speed: the generated fixture set through every ready replay engine in every chunking.

    python benchmarks/bench_replay.py [-j N] [ENGINE ...]

Runs ``toolmatrix replay`` itself (``-j 3``: the engines side by side) on the full generated set and prints the
wall time of the whole command and each engine's own line (records, verdict counts, seconds). Not a timed test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    jobs = argv[argv.index("-j") + 1] if "-j" in argv else "1"
    engines = [a for i, a in enumerate(argv) if a != "-j" and (i == 0 or argv[i - 1] != "-j")]
    toolmatrix = str(Path(sys.executable).with_name("toolmatrix"))
    with tempfile.TemporaryDirectory() as folder:
        fixtures = Path(folder) / "fixtures.jsonl"
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

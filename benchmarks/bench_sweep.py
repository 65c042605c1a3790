"""Version sweep cost: seconds per release per engine for ``toolmatrix replay-sweep`` with every release's
environment cached.

    python benchmarks/bench_sweep.py [--fixtures FILE] [--every N] ENGINE=V1,V2,... [ENGINE=...]

Takes every Nth fixture of FILE (default: the full generated set, N = 1), runs each engine's sweep once so every
overlay is installed (not timed: a first install is the network's cost, printed as the sweep's own ``install``
figure), then runs it again and prints the wall time of that command over its releases, and each release's own
line (verdict counts, replay seconds). Not a timed test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    options = {flag: argv[argv.index(flag) + 1] for flag in ("--fixtures", "--every") if flag in argv}
    sweeps = [a for a in argv if "=" in a and a not in options.values()]
    toolmatrix = str(Path(sys.executable).with_name("toolmatrix"))
    with tempfile.TemporaryDirectory() as folder:
        source = Path(options.get("--fixtures") or Path(folder) / "all.jsonl")
        if "--fixtures" not in options:
            subprocess.run([toolmatrix, "replay-generate", "-o", str(source)], check=True, stdout=subprocess.DEVNULL)
        lines = source.read_text(encoding="utf-8").splitlines()[::int(options.get("--every", "1"))]
        fixtures = Path(folder) / "subset.jsonl"
        fixtures.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        for spec in sweeps:
            engine, _, versions = spec.partition("=")
            command = [toolmatrix, "replay-sweep", "--engine", engine, "--versions", versions, "--fixtures",
                       str(fixtures)]
            warm = subprocess.run([*command, "--results-dir", f"{folder}/warm-{engine}"], capture_output=True,
                                  text=True)
            print(warm.stdout + warm.stderr, end="")  # the first pass: each release's install seconds
            started = time.perf_counter()
            done = subprocess.run([*command, "--results-dir", f"{folder}/{engine}"], capture_output=True, text=True)
            seconds = time.perf_counter() - started
            print(done.stdout + done.stderr, end="")
            releases = len(versions.split(","))
            print(f"{engine}: {releases} releases x {len(lines)} fixtures, cached: {seconds:.1f} s wall, "
                  f"{seconds / releases:.1f} s per release, exit status {done.returncode}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Parser replay speed: the generated fixture set through every ready replay engine in every chunking.

    python benchmarks/bench_replay.py [ENGINE ...]

Prints per engine: fixtures, records, seconds, records per second, and the verdict counts. Not a timed test.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from toolmatrix.registry import data_root
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import adapters, replay_engine


def main(engines: list[str]) -> None:
    started = time.perf_counter()
    fixtures = generate([data_root() / "cases"])
    print(f"generated {len(fixtures)} fixtures in {time.perf_counter() - started:.1f} s")
    for adapter in adapters(engines or None):
        why = adapter.ready()
        if why:
            print(f"{adapter.engine}: not run: {why}")
            continue
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            counts = replay_engine(adapter, fixtures, Path(folder))
            seconds = time.perf_counter() - started
        records = sum(v for k, v in counts.items() if k != "skipped_families")
        print(f"{adapter.engine}: {len(fixtures)} fixtures, {records} records in {seconds:.1f} s "
              f"({records / seconds:.0f}/s); {counts}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""A worker that crashes in the middle of a case: xdist replaces it, the other cases run on, every case x mode
still has exactly one record, and the engine is stopped at the end as always.

Under loadgroup (the suite's default) xdist runs the crashed worker's group again, the crashed case included,
so its record is a real answer; under worksteal the crashed case is dropped, and the controller writes its
record as an ``infra`` error that names the crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.records import check_results, read_records

DELAY_S = 2.0  # each answer of the stand-in engine: long enough to kill a worker mid-case


def workers_of(pid: int) -> list[int]:
    """xdist workers are execnet children of the controller."""
    out = subprocess.run(["pgrep", "-P", str(pid), "-f", "exec.eval"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


@pytest.mark.parametrize(("dist", "lost_records"), [("loadgroup", 0), ("worksteal", 1)])
def test_a_crashed_worker_costs_no_record(tmp_path, dist, lost_records):
    env = {**os.environ, **stand_in(tmp_path, "llamacpp", "--delay", str(DELAY_S))}
    proc = subprocess.Popen(pytest_cmd("-n", "2", "--dist", dist, "--engine=llamacpp", "--model=gemma3-270m",
                                       "-k", "single and not parallel", "--results-dir", str(tmp_path / "r"),
                                       "--no-matrix"),
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    partial, deadline = tmp_path / "r" / "results.jsonl.partial", time.monotonic() + 120
    while not (partial.is_file() and partial.read_text()):  # the first record: both workers are running cases
        assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
        time.sleep(0.1)
    time.sleep(DELAY_S / 2)  # both wait for an answer now
    os.kill(workers_of(proc.pid)[0], signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]  # the crash item is reported failed; nothing else went wrong
    # xdist says so as it happens; the item it crashed in is pytest's failure (listed with -rf, not by default).
    assert "node down" in out and "replacing crashed worker" in out
    assert check_results(tmp_path / "r") == []
    records = list(read_records(tmp_path / "r"))
    assert len({(r.case_id, r.mode) for r in records}) == len(records) == 14, "one record per case x mode"
    lost = [r for r in records if r.reason.startswith("worker: ")]
    assert len(lost) == lost_records, out[-3000:]
    for record in lost:
        assert (record.verdict, record.blame) == ("error", "infra") and "crashed while running" in record.reason
        assert record.request["messages"] and record.request["model"] == "gemma3-270m"
    stand_ins = subprocess.run(["pgrep", "-f", str(tmp_path / "llamacpp-stand-in")], capture_output=True, text=True)
    assert stand_ins.stdout == "", "the engine was stopped"

"""An engine that dies mid-run: the process launcher starts a stand-in engine (the fake server) that exits on
its 31st chat request. The records after its death say so, the results stay valid, the exit code is 6."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.base.exitcodes import ENGINE_DIED
from toolmatrix.library.cases import load_cases
from toolmatrix.records import check_results, read_records
from toolmatrix.serving.registry import data_root
from toolmatrix.testing.fake import DIED

LIBRARY = load_cases([data_root() / "cases"])
DIE_AFTER = 30


@pytest.fixture(scope="module")
def died(tmp_path_factory):
    folder = tmp_path_factory.mktemp("died")
    env = {**os.environ, **stand_in(folder, "llamacpp", "--die-after", str(DIE_AFTER))}
    proc = subprocess.run(pytest_cmd("-n", "2", "--engine=llamacpp", "--model=gemma3-270m", "--results-dir",
                                     str(folder / "r")), cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    return proc, folder / "r"


def test_exit_code_says_the_engine_died(died):
    proc, _ = died
    assert proc.returncode == ENGINE_DIED, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_every_case_and_mode_has_one_record_and_the_results_are_valid(died):
    _, results = died
    keys = [(r.case_id, r.mode) for r in read_records(results)]
    assert len(keys) == len(set(keys)) == 2 * len(LIBRARY)
    assert check_results(results) == []
    check = subprocess.run([shutil.which("toolmatrix"), "check-results", str(results)], capture_output=True, text=True)
    assert check.returncode == 0 and "OK" in check.stdout


def test_records_after_the_death_are_engine_errors_with_the_log_tail(died):
    _, results = died
    records = list(read_records(results))
    marked = [n for n, r in enumerate(records) if r.engine_death is not None]
    assert len(marked) > len(records) - 2 * DIE_AFTER  # at most 30 answers, a few of them with two records
    first = marked[0]
    assert records[first].engine_death.records_before == first
    for r in (records[n] for n in marked):
        assert (r.verdict, r.blame) == ("error", "infra")
        assert r.reason.startswith(f"engine died (exit {DIED}); http_status: connection error")
        assert r.engine_death.exit_code == DIED
        assert f"fake engine: dying after {DIE_AFTER} chat requests" in r.engine_death.log_tail
        assert r.latency_s < 2, "a dead engine refuses at once: nothing waits or retries"
    # Records before the death are as they came; after it, only late real answers are left unmarked.
    assert all(r.http_status == 200 for r in records[first:] if r.engine_death is None)
    assert sum(r.verdict != "error" for r in records[:first]) >= DIE_AFTER // 2


def test_run_json_and_summary_tell_how_it_ended(died):
    proc, results = died
    run = json.loads((results / "run.json").read_text())
    assert run["exit_status"] == "engine_died"
    assert run["engine_death"]["exit_code"] == DIED and "dying after" in run["engine_death"]["log_tail"]
    assert sum(run["counts"].values()) == 2 * len(LIBRARY)
    assert f"engine died (exit {DIED}) after {run['engine_death']['records_before']} records" in proc.stdout
    assert f"fake engine: dying after {DIE_AFTER} chat requests" in proc.stdout


def test_matrix_page_still_built(died):
    proc, results = died
    assert "gemma3-270m@llamacpp" in (results / "matrix" / "matrix.md").read_text()
    assert f"matrix page: {results / 'matrix' / 'index.html'}" in proc.stdout


def test_an_engine_killed_by_a_signal_mid_run_is_named_with_what_it_means(tmp_path):
    """A crash is a signal's death: the run's closing line names it and says what to do (here SIGILL's rebuild)."""
    env = {**os.environ, **stand_in(tmp_path, "llamacpp", "--die-after", "3", "--die-by", "SIGILL")}
    proc = subprocess.run(pytest_cmd("-n", "2", "-k", "single", "--engine=llamacpp", "--model=gemma3-270m",
                                     "--results-dir", str(tmp_path / "r")), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == ENGINE_DIED, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["engine_death"]["exit_code"] == -signal.SIGILL
    assert ("engine died (killed by SIGILL: illegal instruction: the engine runs CPU instructions this machine "
            "refuses") in proc.stdout and "toolmatrix install llamacpp" in proc.stdout
    died = [r for r in read_records(tmp_path / "r") if r.engine_death is not None]
    assert died and all(r.reason.startswith("engine died (killed by SIGILL); ") for r in died)

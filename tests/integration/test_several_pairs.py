"""Several pairs in one invocation, end to end: each pair a child pytest whose engine is a stand-in started by
the process launcher (the fake server), or one fake server reached by URL under several model names."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.helpers_engine import interruptible, pytest_cmd, read_until, stand_in
from toolmatrix.base.exitcodes import ENGINE_DIED
from toolmatrix.records import check_results, read_records
from toolmatrix.testing.fake import FakeServer, first_tool

SUBSET = ["-k", "single"]  # 16 items a pair: enough to see each pair run


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def two_engines(tmp_path_factory):
    """llamacpp (whose engine dies after 4 answers) and llama-cpp-python, each with gemma3-270m and qwen3."""
    folder = tmp_path_factory.mktemp("pairs")
    env = {**os.environ, **stand_in(folder, "llamacpp", "--die-after", "4"), **stand_in(folder, "llama-cpp-python")}
    proc = subprocess.run(pytest_cmd("-n", "2", *SUBSET, "--engine=llamacpp,llama-cpp-python",
                                     "--model", "gemma3-270m,qwen3", "--results-dir", str(folder / "r")),
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    return proc, folder / "r"


def test_each_served_pair_runs_once_with_its_own_valid_results(two_engines):
    proc, root = two_engines
    for pair in ("gemma3-270m@llamacpp", "gemma3-270m@llama-cpp-python"):
        assert proc.stdout.count(f"toolmatrix: {pair} ready at") == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert check_results(root / pair) == []
        records = list(read_records(root / pair))
        assert len(records) == len({(r.case_id, r.mode) for r in records}) == 16
        assert json.loads((root / pair / "run.json").read_text())["pair"] == pair
    # One after another: the second engine started after the first run had finished.
    assert proc.stdout.index("gemma3-270m@llamacpp ready at") < proc.stdout.index("pair 3/4: gemma3-270m@llama-cpp-python")


def test_pairs_the_engine_cannot_serve_are_listed_not_run(two_engines):
    proc, root = two_engines
    for pair in ("qwen3@llamacpp", "qwen3@llama-cpp-python"):
        assert f"{pair}: not run: the process launcher loads local weights only" in proc.stdout
        assert not (root / pair).exists()


def test_worst_exit_code_and_a_line_per_pair(two_engines):
    proc, root = two_engines
    assert proc.returncode == ENGINE_DIED  # engine died (one pair) beats failed cases (the other)
    summary = proc.stdout[proc.stdout.index("toolmatrix: 2 of 4 pairs run"):]
    assert (f"gemma3-270m@llamacpp: exit 6 (engine died); pass 0, fail 4, unsupported 0, error 12; "
            f"{root / 'gemma3-270m@llamacpp'}") in summary
    assert "gemma3-270m@llama-cpp-python: exit 1 (some cases failed); pass 0, fail 16, unsupported 0, error 0" in summary


def test_one_matrix_page_of_every_pair(two_engines):
    proc, root = two_engines
    table = (root / "matrix" / "matrix.md").read_text()
    assert "gemma3-270m" in table and "llamacpp" in table and "llama-cpp-python" in table
    assert len(json.loads((root / "matrix" / "matrix.json").read_text())["cells"]) == 2
    assert f"matrix page of every pair: {root / 'matrix' / 'index.html'}" in proc.stdout


def test_one_url_under_several_model_names(tmp_path):
    with FakeServer(first_tool) as fake:
        proc = subprocess.run(pytest_cmd(*SUBSET, "--base-url", fake.base_url, "--model=fake-a,fake/b",
                                         "--results-dir", str(tmp_path)), cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        served = {body["model"] for body in fake.requests}
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert served == {"fake-a", "fake/b"}
    for name in ("fake-a@external", "fake_b@external"):
        assert check_results(tmp_path / name) == []


def test_sigterm_stops_the_running_pair_and_starts_no_other(tmp_path):
    env = {**os.environ, **stand_in(tmp_path, "llamacpp", "--delay", "0.5"), **stand_in(tmp_path, "llama-cpp-python")}
    with interruptible(pytest_cmd(*SUBSET, "--engine=llamacpp,llama-cpp-python", "--model=gemma3-270m",
                                  "--results-dir", str(tmp_path / "r")),
                       cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        read_until(proc, "ready at", 120)
        [child] = children(proc.pid)
        [engine] = children(child)
        time.sleep(1)  # requests in flight
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert gone(child) and gone(engine)
    assert "gemma3-270m@llama-cpp-python: not run: stopped by SIGTERM" in out
    assert "llama-cpp-python ready at" not in out and not (tmp_path / "r" / "gemma3-270m@llama-cpp-python").exists()
    run = json.loads((tmp_path / "r" / "gemma3-270m@llamacpp" / "run.json").read_text())
    assert run["exit_status"] == "interrupted" and check_results(tmp_path / "r" / "gemma3-270m@llamacpp") == []


def test_a_signal_before_the_first_case_leaves_an_interrupted_run_not_a_complete_one(tmp_path):
    # The engine is up and announced, but a later plugin's sessionstart is still running (slow on a loaded CI
    # machine): pytest then skips sessionfinish, and the run must still not call itself complete.
    (tmp_path / "slow_start.py").write_text("import time, pytest\n\n@pytest.hookimpl(trylast=True)\n"
                                            "def pytest_sessionstart(session):\n    time.sleep(5)\n")
    env = {**os.environ, **stand_in(tmp_path, "llamacpp")}
    with interruptible(pytest_cmd("-p", "slow_start", *SUBSET, "--engine=llamacpp", "--model=gemma3-270m",
                                  "--results-dir", str(tmp_path / "r")),
                       cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        read_until(proc, "ready at", 120)
        time.sleep(1)  # inside the slow sessionstart
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=120)[0]
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["exit_status"] == "interrupted" and check_results(tmp_path / "r") == []


@pytest.mark.parametrize(("args", "message"), [
    (["--engine=llamacpp,nope", "--model=gemma3-270m"], "--engine 'nope': unknown engine"),
    (["--engine=llamacpp", "--model=gemma3-270m,nope"], "--model 'nope': unknown model"),
    (["--base-url=http://127.0.0.1:9/v1", "--engine=llamacpp,vllm", "--model=a,b"], "--base-url reaches one server"),
    (["--engine=llamacpp,vllm", "--model=qwen3"], "no pair can run"),
])
def test_usage_errors_before_anything_starts(tmp_path, args, message):
    proc = subprocess.run(pytest_cmd(*args), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR and message in proc.stderr
    assert "pair 1/" not in proc.stdout and "ready at" not in proc.stdout

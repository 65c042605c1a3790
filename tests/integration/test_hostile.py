"""A hostile server never costs the user their run: every case x mode gets its one record, bounded in time and
size, the exit status says what was judged (1: cases failed; 8: no case got an answer to judge, every exchange an
infra error), and nothing toolmatrix writes or prints holds the key.

Each mode of ``toolmatrix.testing.hostile`` answers three cases through the real plugin (two xdist workers). Figures
for the whole library, with peak memory, come from ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd
from toolmatrix.base.exitcodes import NO_ANSWER
from toolmatrix.formats import get_family
from toolmatrix.library.cases import load_cases
from toolmatrix.live import runner as runner_module
from toolmatrix.live.client import Target, make_client
from toolmatrix.records import check_results, read_records
from toolmatrix.testing.fake import FakeServer, Reply, first_tool
from toolmatrix.testing.hostile import MODES, HostileServer

# Each test runs a suite of its own, and the 50 MB and endless modes load both cores: beside a live engine test
# they starved llama-server into dropping connections (a false infra error there), so this module is in the
# live group of tests/conftest.py.

KEY = "sk-hostile-secret-42"
TIMEOUT_S = 1.0
LIMIT = 2_000_000  # --max-answer-bytes: the 50 MB answer is cut to this; 10,000 calls (1.2 MB) fit
SELECTION = "get_weather_paris or add_two_numbers or followup_weather"
TIMED_OUT = ("error", "infra", r"http_status: timeout: no complete answer within 1 s \(the whole exchange\)")
# mode -> (verdict, blame, reason) of its non-streamed single.get_weather_paris record
EXPECTED = {
    "endless_stream": TIMED_OUT,
    "endless_body": TIMED_OUT,
    "trickle": TIMED_OUT,
    "huge": ("error", "engine", rf"http_status: answer of 52428\d\d\d bytes is over the limit of {LIMIT} "),
    "many_calls": ("fail", "model", r"expected_calls: expected 1 call\(s\), got "),
    "deep": ("fail", "engine", r"wire_shape: not JSON \(nested deeper than 128 levels\)"),
    "surrogate": ("fail", "engine", r"wire_shape: not JSON \(lone surrogate '\\ud800': not Unicode text\)"),
    "nan": ("fail", "engine", r"wire_shape: not JSON \(NaN is not a JSON value\)"),
    "broken_off": ("error", "engine", r"http_status: the engine broke off its HTTP 200 answer: RemoteProtocolError"),
    "echo_key": ("error", "infra",
                 r"http_status: HTTP 401: Invalid key: Bearer \[REDACTED\]: the server refused the key"),
}
NOTHING_JUDGED = {"endless_stream", "endless_body", "trickle"}  # every exchange an infra error: exit 8


def test_every_mode_has_an_expectation():
    assert set(EXPECTED) == set(MODES)


@pytest.fixture(scope="module", params=sorted(MODES))
def hostile_run(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp(request.param)
    with HostileServer(request.param) as server:
        started = time.monotonic()
        # The model the hostile server lists: its answers, not the check before the run, are what is tested.
        proc = subprocess.run(pytest_cmd("-n", "2", "--base-url", server.base_url, "--model", "hostile",
                                         "-k", SELECTION,
                                         "--api-key-env", "TM_HOSTILE_KEY", "--request-timeout", str(TIMEOUT_S),
                                         "--max-answer-bytes", str(LIMIT), "--results-dir", str(tmp_path / "r")),
                              cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TM_HOSTILE_KEY": KEY})
        return request.param, proc, time.monotonic() - started, tmp_path / "r"


def test_a_hostile_answer_is_recorded_never_lost(hostile_run):
    mode, proc, wall_s, results = hostile_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == (NO_ANSWER if mode in NOTHING_JUDGED else 1), out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    records = list(read_records(results))
    assert len({(r.case_id, r.mode) for r in records}) == len(records) == 6, "one record per case x mode"
    assert check_results(results) == []
    run = json.loads((results / "run.json").read_text())
    assert run["exit_status"] == "complete" and sum(run["counts"].values()) == 6
    # Each item waits for at most its own exchange (the stream reuses the non-streamed answer), plus start-up.
    assert wall_s < 6 * TIMEOUT_S + 60
    record = next(r for r in records if (r.case_id, r.mode) == ("single.get_weather_paris", "nonstream"))
    verdict, blame, reason = EXPECTED[mode]
    assert (record.verdict.value, record.blame.value) == (verdict, blame), record.reason
    assert re.match(reason, record.reason), record.reason


def test_the_key_is_in_nothing_written_or_printed(hostile_run):
    _, proc, _, results = hostile_run
    assert KEY not in proc.stdout + proc.stderr
    written = [p for p in results.rglob("*") if p.is_file()]
    assert len(written) >= 4  # results, run.json, the page and its table
    assert not [p for p in written if KEY in p.read_text(errors="replace")]


def test_what_was_sent_is_kept_as_sent(hostile_run):
    """A body that is not strict JSON is kept verbatim as text; an answer over the limit is kept to the limit."""
    mode, _, _, results = hostile_run
    record = next(r for r in read_records(results) if (r.case_id, r.mode) == ("single.get_weather_paris", "nonstream"))
    if mode in ("nan", "surrogate", "deep"):
        assert record.response is None
        assert {"nan": '"score": NaN', "surrogate": r"Paris \ud800", "deep": "[[[["}[mode] in record.raw_text
    if mode == "huge":
        assert (record.cut.limit_bytes, record.cut.whole) == (LIMIT, True)
        assert record.cut.received_bytes > 50 * 2**20 and len(record.raw_text.encode()) == LIMIT


def test_a_harness_failure_on_one_answer_is_that_answers_error_record(monkeypatch):
    """toolmatrix failing on one answer (here: a check that raises) costs that answer's record its verdict,
    never the run: the record is an ``error`` naming the exception, with the exchange kept, and the next answer
    is judged as usual."""
    case = next(c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])
                if c.id == "faults.single")
    checks = runner_module.run_checks

    def fragile(inputs, prefix=""):
        if inputs.exchange.mode == "stream":
            raise RecursionError("maximum recursion depth exceeded")
        return checks(inputs, prefix)

    monkeypatch.setattr(runner_module, "run_checks", fragile)
    with FakeServer(lambda body: Reply(calls=(("get_weather", {"city": "Paris"}),))) as server:
        runner = runner_module.Runner(make_client(Target(server.base_url, "fake")), "fake", get_family("hermes"),
                                      paired=frozenset({(case.id, None)}))
        stream, nonstream = runner.run(case, "stream"), runner.run(case, "nonstream")
    assert (stream.verdict.value, stream.blame.value) == ("error", "infra")
    assert stream.reason == "harness: RecursionError: maximum recursion depth exceeded"
    assert [(c.name, c.kind) for c in stream.checks] == [("harness", "HARNESS")]
    assert stream.chunks and stream.http_status == 200, "the exchange is kept"
    assert nonstream.verdict.value == "pass"
    assert len(server.requests) == 2, "the stream's reference served the non-streamed record"


FAILING_CONTROLLER = '''  # the run below has no workers: this hook runs in the controller
def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid.endswith("-stream]"):
        raise RuntimeError("toolmatrix bug outside any answer")
'''


def test_an_internal_error_is_never_a_complete_run(tmp_path):
    """An INTERNALERROR stops the run: run.json says so, and its counts are the records actually written."""
    (tmp_path / "failing_controller.py").write_text(FAILING_CONTROLLER)
    with FakeServer(first_tool) as server:
        proc = subprocess.run(pytest_cmd("-p", "failing_controller", "--base-url", server.base_url, "--model", "m",
                                         "-k", "single", "--results-dir", str(tmp_path / "r")),
                              cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    written = (tmp_path / "r" / "results.jsonl").read_text().splitlines()
    assert run["exit_status"] == "internal_error"
    assert sum(run["counts"].values()) == len(written) >= 1
    assert check_results(tmp_path / "r") == []

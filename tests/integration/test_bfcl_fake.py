"""``--cases bfcl:simple`` end to end: the plugin converts bfcl-eval's data at run time and runs its items against
the fake server, which answers each question with BFCL's own first accepted answer (read from the package here,
apart from the converter), so every item passes only if the conversion and the checks honour BFCL's answers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.test_plugin_fake import run_pytest
from tests.unit.test_bfcl import require_bfcl
from toolmatrix.library import bfcl
from toolmatrix.records import read_records
from toolmatrix.testing.fake import FakeServer, Reply

SHARD = "1/8"  # about 50 of simple's 400 cases, both modes


def _literal(value):
    """One accepted value as a model would send it (BFCL nests accepted lists in dict answers)."""
    if isinstance(value, dict):
        return {k: _first(v if isinstance(v, list) else [v]) for k, v in value.items()
                if not (isinstance(v, list) and all(x == "" for x in v))}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value


def _first(accepted: list):
    return _literal(next(v for v in accepted if v != ""))


def bfcl_answers() -> dict[str, tuple[tuple[str, dict], ...]]:
    """The user's question -> BFCL's first accepted calls, from the raw files."""
    data = bfcl.data_dir()
    questions = [json.loads(line) for line in (data / "BFCL_v4_simple_python.json").read_text().splitlines()]
    answers = {a["id"]: a for a in map(json.loads, (data / "possible_answer" / "BFCL_v4_simple_python.json")
                                       .read_text().splitlines())}
    out = {}
    for question in questions:
        calls = []
        for call in answers[question["id"]]["ground_truth"]:
            (name, arguments), = call.items()
            kept = {k: _first(v) for k, v in arguments.items() if any(x != "" for x in v)}
            calls.append((name.replace(".", "_"), kept))
        out[question["question"][0][-1]["content"]] = tuple(calls)
    return out


@pytest.fixture(scope="module")
def bfcl_run(tmp_path_factory):
    require_bfcl()
    answers = bfcl_answers()

    def responder(body: dict) -> Reply:
        return Reply(calls=answers[body["messages"][-1]["content"]])

    results = tmp_path_factory.mktemp("results")
    env = {**os.environ, "TOOLMATRIX_CACHE": str(tmp_path_factory.mktemp("cache"))}
    with FakeServer(responder) as server:
        proc = run_pytest(tmp_path_factory.getbasetemp(), "-n", "2", "--base-url", server.base_url, "--model", "fake",
                          "--cases", "bfcl:simple", "--only-cases", "--case-shard", SHARD,
                          "--results-dir", str(results), env=env)
    return proc, results, Path(env["TOOLMATRIX_CACHE"])


def test_bfcl_simple_runs_and_accepted_answers_pass(bfcl_run):
    proc, results, cache = bfcl_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    records = list(read_records(results))
    assert len(records) >= 60 and {r.mode for r in records} == {"nonstream", "stream"}
    assert all(r.case_id.startswith("bfcl_simple.simple_python_") and r.verdict == "pass" for r in records)
    # Converted into the cache, not the repo; the run names the file it read.
    converted = cache / "bfcl" / bfcl.BFCL_EVAL / "bfcl_simple.yaml"
    run = json.loads((results / "run.json").read_text())
    assert converted.exists() and any(p.endswith("bfcl_simple.yaml") for p in run["cases"])


def test_unknown_category_is_a_one_line_usage_error(tmp_path):
    proc = run_pytest(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "fake", "--cases", "bfcl:nope",
                      "--only-cases")
    assert proc.returncode == 4
    assert proc.stderr.strip() == f"ERROR: --cases: unknown BFCL category 'nope'; known: {', '.join(bfcl.CATEGORIES)}"

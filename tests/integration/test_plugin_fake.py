"""The plugin end to end against the fake server: records, schemas, xdist, secrets, summary.

The fake server makes these fast and deterministic; the real engine is exercised in test_live_llamacpp.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.library.cases import load_cases
from toolmatrix.records import check_results, read_records
from toolmatrix.serving.registry import data_root
from toolmatrix.testing.fake import FakeServer, first_tool

ROOT = Path(__file__).parents[2]
LIBRARY = load_cases([data_root() / "cases"])


def run_pytest(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def fake():
    with FakeServer(first_tool) as server:
        yield server


@pytest.fixture(scope="module")
def xdist_run(fake, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    env = {**__import__("os").environ, "TM_SECRET_KEY": "sk-very-secret-123"}
    proc = run_pytest(tmp_path_factory.getbasetemp(), "-n", "2", "--base-url", fake.base_url, "--model", "fake",
                      "--api-key-env", "TM_SECRET_KEY", "--results-dir", str(results), env=env)
    return proc, results


def test_every_case_and_mode_recorded_once(xdist_run):
    proc, results = xdist_run
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the fake answers wrong on purpose
    records = list(read_records(results))
    keys = [(r.case_id, r.mode) for r in records]
    assert len(keys) == len(set(keys)) == 2 * len(LIBRARY)
    assert not (results / "results.jsonl.partial").exists()


def test_stream_compared_with_its_own_nonstream_answer(fake, xdist_run):
    """Both modes of a case share a worker, so no case is sent non-streamed twice."""
    streamed = [b for b in fake.requests if b.get("stream")]
    assert len(streamed) == len(fake.requests) - len(streamed)


def test_results_validate_against_their_schemas(xdist_run):
    _, results = xdist_run
    assert check_results(results) == []
    run = json.loads((results / "run.json").read_text())
    assert run["engine"]["launcher"] == "external" and run["exit_status"] == "complete"
    assert sum(run["counts"].values()) == 2 * len(LIBRARY)


def test_api_key_is_sent_but_never_written(fake, xdist_run):
    _, results = xdist_run
    assert "Bearer sk-very-secret-123" in fake.authorizations
    written = [p for p in results.rglob("*") if p.is_file()]
    assert len(written) >= 4  # results, run.json, the page and its table
    for path in written:
        assert "sk-very-secret-123" not in path.read_text()


def test_request_recorded_exactly_as_sent(fake, xdist_run):
    _, results = xdist_run
    sent = {json.dumps(b, sort_keys=True) for b in fake.requests}
    for record in read_records(results):
        assert json.dumps(record.request, sort_keys=True) in sent


def test_summary_table_lists_every_category(xdist_run):
    proc, _ = xdist_run
    for category in {c.category for c in LIBRARY} | {"TOTAL"}:
        assert f"| {category} " in proc.stdout


def test_page_built_for_the_run_and_pointed_at(xdist_run):
    proc, results = xdist_run
    page = results / "matrix" / "index.html"
    assert page.is_file() and "fake@external" in (results / "matrix" / "matrix.md").read_text()
    assert f"matrix page: {page}" in proc.stdout and f"results: {results / 'results.jsonl'}" in proc.stdout


def test_plain_pytest_does_not_collect_the_suite(tmp_path):
    proc = run_pytest(ROOT, "--collect-only", "-q", "tests/unit/test_cases.py")
    assert "test_toolcalling" not in proc.stdout and proc.returncode == 0


def test_unknown_model_is_a_usage_error(tmp_path):
    proc = run_pytest(tmp_path, "--engine", "llamacpp", "--model", "no-such-model")
    assert proc.returncode == 4 and "--model 'no-such-model': unknown model" in proc.stderr


def test_unreachable_base_url_is_a_clear_error(tmp_path):
    proc = run_pytest(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "x")
    assert proc.returncode == 4 and "cannot connect" in proc.stderr


def test_variant_needs_the_docker_launcher(tmp_path):
    proc = run_pytest(tmp_path, "--engine", "llamacpp", "--model", "gemma3-270m", "--variant", "local")
    assert proc.returncode == 4 and "--variant picks a docker image; it needs --launcher=docker" in proc.stderr


def test_unknown_family_for_a_url_is_a_usage_error(tmp_path):
    env = {**__import__("os").environ, "TOOLMATRIX_FAMILY": "no_such_format"}
    proc = run_pytest(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "x", env=env)
    assert proc.returncode == 4 and "TOOLMATRIX_FAMILY" in proc.stderr and "no_such_format" in proc.stderr


def test_unset_api_key_variable_is_a_usage_error_before_anything_starts(fake, tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "TM_NO_SUCH_KEY"}
    before = len(fake.requests)
    proc = run_pytest(tmp_path, "--base-url", fake.base_url, "--model", "fake", "--api-key-env", "TM_NO_SUCH_KEY",
                      "--results-dir", str(tmp_path / "r"), env=env)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "--api-key-env TM_NO_SUCH_KEY: that environment variable is not set" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "ready at" not in proc.stdout
    assert len(fake.requests) == before and not (tmp_path / "r").exists()


def test_a_failure_names_the_case_description(xdist_run):
    """The description says what the case is about; a person reading a failure should not have to look it up
    (pytest's own list of failures, with -rf, names it too: see below)."""
    _, results = xdist_run
    described = next(c for c in LIBRARY if c.description and c.category == "irrelevance")
    assert {r.description for r in read_records(results) if r.case_id == described.id} == {described.description}
    cells = json.loads((results / "matrix" / "matrix.json").read_text())["cells"]
    shown = {(f["case_id"], f.get("description")) for f in cells[0]["failures"]}
    assert (described.id, described.description) in shown


def test_a_pair_the_process_launcher_cannot_serve_says_why_before_anything_starts(tmp_path):
    """It used to try to start and say "hf weights Qwen/Qwen3-8B do not exist"."""
    proc = run_pytest(tmp_path, "--engine", "vllm", "--model", "qwen3", "--results-dir", str(tmp_path / "r"))
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("qwen3@vllm cannot be served: the process launcher loads local weights only; models.yaml weights.hf "
            "of 'qwen3' names the hub repository Qwen/Qwen3-8B") in proc.stderr
    assert "do not exist" not in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert "installing" not in (proc.stdout + proc.stderr).lower() and not (tmp_path / "r").exists()


def test_a_matrix_run_ends_with_its_table(xdist_run):
    """The table and the results path are the last thing before pytest's one-line count: no per-item list."""
    proc, results = xdist_run
    tail = proc.stdout[proc.stdout.index("toolmatrix: fake@external"):].splitlines()
    assert not [line for line in tail if line.startswith(("FAILED ", "ERROR "))] and "= FAILURES =" not in proc.stdout
    assert tail[-2].startswith("matrix page: ") and re.fullmatch(r"=+ \d+ failed, .* =+", tail[-1])


def test_dash_r_and_tb_bring_pytests_failure_output_back(fake, tmp_path):
    proc = run_pytest(tmp_path, "-rf", "--tb=short", "-k", "irrelevance", "--base-url", fake.base_url,
                      "--model", "fake")
    assert proc.returncode == 1 and "short test summary info" in proc.stdout and "= FAILURES =" in proc.stdout
    described = next(c for c in LIBRARY if c.description and c.category == "irrelevance")
    assert re.search(rf"^FAILED .*test_case\[{re.escape(described.id)}-", proc.stdout, re.M)
    assert f"[{described.description}]" in proc.stdout  # in its failure's section


def test_a_fresh_run_holds_no_path_of_the_machine(xdist_run, tmp_path_factory):
    _, results = xdist_run
    roots = {str(ROOT), str(results), str(tmp_path_factory.getbasetemp()), str(Path.home()) + "/", sys.prefix}
    written = [p for p in results.rglob("*") if p.is_file()]
    assert len(written) >= 4
    assert {str(p.relative_to(results)): root for p in written for root in roots if root in p.read_text()} == {}
    run = json.loads((results / "run.json").read_text())
    assert run["command"][0] == "pytest" and f"--results-dir={results}" not in run["command"]


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_show_prints_a_curl_that_resends_the_exchange(fake, xdist_run, mode):
    """``toolmatrix show`` on a record: its curl, run as printed against the server, gets the same answer."""
    _, results = xdist_run
    record = next(r for r in read_records(results) if r.mode == mode and r.request.get("tools"))
    shown = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "show", str(results),
                            f"REGRESSION {record.case_id} [{mode}]: was pass"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert f"{record.case_id} [{mode}] on fake@external" in shown.stdout and "the answer said:" in shown.stdout
    assert "sk-very-secret-123" not in shown.stdout and '"Authorization: Bearer $TM_SECRET_KEY"' in shown.stdout
    curl = shown.stdout[shown.stdout.index("curl "):shown.stdout.index("\nJSON\n") + 6]
    # A --base-url run: the curl goes to the server the run reached unless BASE_URL says otherwise.
    env = {"PATH": os.environ["PATH"], "TM_SECRET_KEY": "sk-other"}
    sent = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, env=env, timeout=60)
    assert sent.returncode == 0, sent.stderr
    assert fake.requests[-1] == record.request and fake.authorizations[-1] == "Bearer sk-other"
    if mode == "nonstream":
        again = json.loads(sent.stdout)["choices"][0]["message"]
        first = record.response["choices"][0]["message"]
        assert [c["function"] for c in again["tool_calls"]] == [c["function"] for c in first["tool_calls"]]
    else:
        events = [line for line in sent.stdout.splitlines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]" and len(events) - 1 == len(record.chunks)


def test_show_says_which_pair_when_a_folder_holds_several(xdist_run, tmp_path):
    _, results = xdist_run
    for name in ("a", "b"):
        shutil.copytree(results, tmp_path / name, ignore=shutil.ignore_patterns("matrix"))
    rewrite = tmp_path / "b" / "run.json"
    rewrite.write_text(rewrite.read_text().replace('"pair": "fake@external"', '"pair": "other@external"'))
    case = next(read_records(results)).case_id
    shown = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "show", str(tmp_path), case],
                           capture_output=True, text=True)
    assert shown.returncode == 2 and "choose one with --pair: fake@external, other@external" in shown.stderr
    missing = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "show", str(results), "no.such_case"],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "no record of case 'no.such_case'" in missing.stderr

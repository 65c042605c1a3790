"""--fuzz end to end against the fake server: generated cases in both modes with their seed on every record, the
failing ones written out as a case file, and that file running them again without hypothesis.

The fake 'model' here does what each prompt asks (the tool and the exact arguments it names) but calls one
chosen tool by a wrong name: that case, and only it, must fail, be kept, and fail again from the kept file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest

from toolmatrix.library.cases import load_cases
from toolmatrix.library.fuzz import draw_scenario
from toolmatrix.library.fuzzkeep import FAILURES
from toolmatrix.records import check_results, read_records
from toolmatrix.testing.fake import FakeServer, Reply

ROOT = Path(__file__).parents[2]
SEED, COUNT, BROKEN = 7, 5, 2
BROKEN_TOOL = (lambda d: d.tools[d.target][0])(draw_scenario(SEED, BROKEN))


def obedient(body: dict) -> Reply:
    """Calls the tool the prompt names with the arguments it spells out; BROKEN_TOOL by a wrong name."""
    prompt = body["messages"][-1]["content"]
    name = re.search(r"Call the tool (\S+) exactly once", prompt).group(1)
    arguments = json.loads(prompt.rsplit("\n", 1)[1])
    return Reply(calls=((name + "_x" if name == BROKEN_TOOL else name, arguments),))


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
           str(ROOT / "pyproject.toml"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def fake():
    with FakeServer(obedient) as server:
        yield server


@pytest.fixture(scope="module")
def fuzzed(fake, tmp_path_factory):
    results = tmp_path_factory.mktemp("fuzzed")
    proc = run_pytest(tmp_path_factory.getbasetemp(), "-n", "2", "--base-url", fake.base_url, "--model", "fake",
                      "--only-cases", "--fuzz", str(COUNT), "--fuzz-seed", str(SEED), "--results-dir", str(results),
                      "--no-matrix")
    return proc, results


def test_every_generated_case_runs_in_both_modes_with_its_seed(fuzzed):
    proc, results = fuzzed
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # the broken case fails
    assert f"seed {SEED}" in proc.stdout and f"--fuzz {COUNT} --fuzz-seed {SEED}" in proc.stdout
    records = list(read_records(results))
    assert sorted((r.case_id, r.mode) for r in records) == sorted(
        (f"fuzz.{SEED}.{n}", mode) for n in range(COUNT) for mode in ("nonstream", "stream"))
    assert {r.fuzz_seed for r in records} == {SEED} and {r.category for r in records} == {"fuzz"}
    failed = {r.case_id for r in records if r.verdict != "pass"}
    assert failed == {f"fuzz.{SEED}.{BROKEN}"}, [(r.case_id, r.reason) for r in records if r.verdict != "pass"]
    assert check_results(results) == []
    run = json.loads((results / "run.json").read_text())
    assert run["fuzz"] == {"seed": SEED, "count": COUNT, "hypothesis": hypothesis.__version__}


def test_the_failing_case_is_written_out_and_reproduces(fake, fuzzed, tmp_path):
    proc, results = fuzzed
    written = results / FAILURES
    assert f"written to {written}" in proc.stdout
    kept = load_cases([written])
    assert [c.id for c in kept] == [f"fuzz.{SEED}.{BROKEN}"] and "--fuzz-seed 7" in kept[0].description
    again = tmp_path / "fuzz_found.yaml"
    cli = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "fuzz-keep", str(results), "-o", str(again)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "1 failing fuzz case(s)" in cli.stdout, cli.stderr
    assert again.read_text() == written.read_text()
    rerun = tmp_path / "rerun"
    proc = run_pytest(tmp_path, "--base-url", fake.base_url, "--model", "fake", "--only-cases", "--cases",
                      str(again), "--results-dir", str(rerun), "--no-matrix")
    assert proc.returncode == 1, proc.stdout[-3000:]
    records = list(read_records(rerun))
    assert {(r.case_id, r.verdict.value) for r in records} == {(f"fuzz.{SEED}.{BROKEN}", "fail")}
    assert all(r.fuzz_seed is None and BROKEN_TOOL + "_x" in r.reason for r in records)


def test_a_fresh_seed_is_shared_by_the_workers_and_kept(fake, tmp_path):
    proc = run_pytest(tmp_path, "-n", "2", "--base-url", fake.base_url, "--model", "fake", "--only-cases",
                      "--fuzz", "2", "--results-dir", str(tmp_path / "r"), "--no-matrix")
    seed = int(re.search(r"toolmatrix fuzz: 2 generated cases, seed (\d+)", proc.stdout).group(1))
    records = list(read_records(tmp_path / "r"))
    assert {r.case_id for r in records} == {f"fuzz.{seed}.0", f"fuzz.{seed}.1"} and len(records) == 4
    assert json.loads((tmp_path / "r" / "run.json").read_text())["fuzz"]["seed"] == seed


def test_a_seed_without_a_budget_is_refused(tmp_path, fake):
    proc = run_pytest(tmp_path, "--base-url", fake.base_url, "--model", "fake", "--fuzz-seed", "3")
    assert proc.returncode != 0 and "--fuzz-seed needs --fuzz N" in proc.stderr

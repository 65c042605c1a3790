"""Misuse of the command line is a usage error (exit 4) in one line naming the option, before anything is sent or
written: a run that could not have meant anything never says "complete"."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd
from toolmatrix.testing.fake import FakeServer, first_tool


@pytest.fixture(scope="module")
def fake():
    with FakeServer(first_tool) as server:
        yield server


def _file(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("not a directory")
    return str(tmp_path / "a-file")


# (options beside --base-url/--model, the line's pattern); "{results}" is a fresh directory, "{file}" a file
MISUSES = {
    "timeout 0": (["--request-timeout", "0"], "argument --request-timeout: '0': must be a finite number"),
    "timeout negative": (["--request-timeout=-5"], "argument --request-timeout: '-5': must be a finite number"),
    "timeout nan": (["--request-timeout", "nan"], "argument --request-timeout: 'nan': must be a finite number"),
    "timeout text": (["--request-timeout", "soon"], "argument --request-timeout: 'soon' is not a number"),
    "answer limit 0": (["--max-answer-bytes", "0"], "argument --max-answer-bytes: '0': must be above 0"),
    "slots 0": (["--slots", "0"], "argument --slots: '0': must be above 0"),
    "not a url": (["--base-url", "not-a-url"], r"--base-url 'not-a-url': not an http\(s\) URL"),
    "port out of range": (["--base-url", "http://127.0.0.1:99999/v1"], "--base-url 'http://127.0.0.1:99999/v1': Port out of range"),
    "results dir is a file": (["--results-dir", "{file}"], "--results-dir .*a-file: exists and is not a directory"),
    "results dir unwritable": (["--results-dir", "/proc/toolmatrix"], "--results-dir /proc/toolmatrix: cannot write there"),
    "no case file": (["--only-cases"], "no cases to run: --only-cases needs --cases PATH"),
    "case files without cases": (["--only-cases", "--cases", "{empty}"], "no cases to run: .*empty hold no case"),
    "case shard past its count": (["--case-shard", "3/2"], "argument --case-shard: '3/2': I must be between 1 and N"),
    "case shard not a slice": (["--case-shard", "half"], "argument --case-shard: 'half': expected I/N"),
    "ray with one server": (["--ray", "auto"], "--ray fans out pairs whose engines the suite starts"),
    "lost records under xdist": (["--record-lost", "node died", "-n", "2"], "--record-lost writes its records "
                                 "from the one process: run it with -n 0"),
}


@pytest.mark.parametrize("misuse", sorted(MISUSES))
def test_misuse_is_one_usage_line_and_nothing_happens(fake, tmp_path, misuse):
    options, pattern = MISUSES[misuse]
    (tmp_path / "empty").mkdir()
    values = {"file": _file(tmp_path), "empty": str(tmp_path / "empty")}
    options = [o.format(**values) for o in options]
    before = len(fake.requests)
    proc = subprocess.run(pytest_cmd("--base-url", fake.base_url, "--model", "fake",
                                     "--results-dir", str(tmp_path / "results"), *options),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    # pytest puts its usage line above an option's error; the error itself is one line
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower() and "usage:" not in line]
    assert len(errors) == 1 and re.search(pattern, errors[0]), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(fake.requests) == before, "nothing sent"
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir()), "nothing written"


def test_a_ray_address_where_no_cluster_answers_is_refused_in_seconds(tmp_path):
    """Ray itself would retry a wrong address for minutes; toolmatrix says so at once and starts nothing."""
    proc = subprocess.run(pytest_cmd("--engine=llamacpp,llama-cpp-python", "--model=gemma3-270m", "--ray",
                                     "127.0.0.1:1", "--results-dir", str(tmp_path / "results")),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "ERROR: --ray 127.0.0.1:1: no Ray cluster answers there (Connection refused)" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists(), "nothing written"


@pytest.mark.parametrize("option", [["--ray", "auto"], ["--case-shard", "1/2"], ["--record-lost", "x"]])
def test_a_suite_option_without_a_target_is_refused_not_ignored(tmp_path, option):
    """Without --engine/--base-url pytest would run toolmatrix's own tests and drop the option silently."""
    proc = subprocess.run(pytest_cmd(*option, "--co", "-q"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 4 and f"ERROR: {option[0]} needs a target: --engine/--model" in proc.stderr, proc.stderr

"""toolmatrix beside pytest-base-url, which pytest-playwright and pytest-selenium install: both define
``--base-url``, and pytest refused the second (``ValueError: option dest 'base_url' already used``, exit 3) before
any test ran. toolmatrix now reads pytest-base-url's option where that plugin is active, and defines its own where
it is not (blocked with ``-p no:base_url``). The test environment has it installed (the ``test`` extra)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.testing.fake import FakeServer, first_tool


@pytest.fixture(scope="module")
def fake():
    with FakeServer(first_tool) as server:
        yield server


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(pytest_cmd(*args, "-k", "single", "--results-dir", str(tmp_path / "r")), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)


def finished(proc: subprocess.CompletedProcess, results: Path) -> dict:
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # 1: the fake fails cases, as it should
    run_json = json.loads((results / "run.json").read_text())
    assert run_json["exit_status"] == "complete" and run_json["counts"]["fail"] > 0
    return run_json


def test_base_url_beside_pytest_base_url(fake, tmp_path):
    proc = run(tmp_path, "--base-url", fake.base_url, "--model", "fake")
    assert f"baseurl: {fake.base_url}" in proc.stdout, "pytest-base-url's own header: its option carried the URL"
    assert finished(proc, tmp_path / "r")["engine"]["base_url"] == fake.base_url


def test_base_url_with_pytest_base_url_blocked_is_toolmatrix_own(fake, tmp_path):
    proc = run(tmp_path, "-p", "no:base_url", "--base-url", fake.base_url, "--model", "fake")
    assert "baseurl:" not in proc.stdout
    assert finished(proc, tmp_path / "r")["engine"]["base_url"] == fake.base_url


def test_an_engine_toolmatrix_starts_beside_pytest_base_url(tmp_path):
    proc = run(tmp_path, "-n", "2", "--engine=llamacpp", "--model=gemma3-270m",
               env={**os.environ, **stand_in(tmp_path, "llamacpp")})
    assert finished(proc, tmp_path / "r")["engine"]["launcher"] == "process"

"""A model given as an explicit source (``--model=gguf:/path/x.gguf``) runs like a registry model: the process
launcher hands the engine that file and requests carry the name derived from it."""

from __future__ import annotations

import json
import os
import subprocess

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.records import check_results, read_records


def test_single_pair_with_a_gguf_path(tmp_path):
    gguf = tmp_path / "My-Model.Q4.gguf"
    gguf.write_bytes(b"GGUF not really")
    env = {**os.environ, **stand_in(tmp_path, "llamacpp"), "TOOLMATRIX_FAMILY": "hermes"}
    proc = subprocess.run(pytest_cmd("--engine=llamacpp", f"--model=gguf:{gguf}", "-k", "single.get_weather_paris",
                                     "--results-dir", str(tmp_path / "r"), "--no-matrix"),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["pair"] == "my-model.q4@llamacpp" and run["model"]["family"] == "hermes"
    assert run["model"]["weights"] == gguf.name  # by name and SHA-256: where it lay is this machine's
    flags = run["engine"]["flags"]
    assert flags[flags.index("-m") + 1] == gguf.name and flags[flags.index("--alias") + 1] == "my-model.q4"
    records = list(read_records(tmp_path / "r"))
    assert len(records) == 2 and {r.request["model"] for r in records} == {"my-model.q4"}
    assert check_results(tmp_path / "r") == []


def test_a_bad_source_is_a_usage_error_before_anything_starts(tmp_path):
    env = {**os.environ, **stand_in(tmp_path, "llamacpp")}
    proc = subprocess.run(pytest_cmd("--engine=llamacpp", "--model=gguf:nobody/knows"), cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert "a hub GGUF is gguf:ORG/REPO/FILE.gguf" in proc.stderr and "ready at" not in proc.stdout

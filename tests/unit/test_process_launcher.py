"""The process launcher refuses a pair it cannot serve when it is made, as the docker launcher does."""

from __future__ import annotations

import pytest

from toolmatrix.launchers import LaunchError, ProcessLauncher
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

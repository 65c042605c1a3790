"""The llama.cpp replay adapter's host side: which chat template each family replays with (engines/llamacpp.yaml
``replay``, or a registered model's own template), the reason a family is skipped, and what it asks to be built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.formats import all_families
from toolmatrix.serving.registry import load_engines
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.adapters.llamacpp import TEMPLATES, harness_sha256, model_templates

SPEC = load_engines()["llamacpp"]


def test_a_family_replays_with_the_spec_template_which_also_parses_its_reasoning() -> None:
    adapter = adapter_for(SPEC)
    thinking = adapter.supports("hermes", "qwen3")
    assert (thinking.tool_parser, thinking.reasoning_parser) == ("Qwen-Qwen3-0.6B.jinja", "Qwen-Qwen3-0.6B.jinja")
    plain = adapter.supports("qwen3_coder", None)
    assert (plain.tool_parser, plain.reasoning_parser) == ("Qwen3-Coder.jinja", None)


def test_a_registered_models_own_template_is_what_its_family_replays_with() -> None:
    # qwen2.5-coder-0.5b names qwen2.5-tools.jinja in models.yaml: the live tier passes that to llama-server.
    assert model_templates()["json_lines"].name == "qwen2.5-tools.jinja"
    assert adapter_for(SPEC).supports("json_lines", None).tool_parser == "qwen2.5-tools.jinja"


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

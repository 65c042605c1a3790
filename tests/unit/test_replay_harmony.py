"""gpt-oss fixtures as the model writes them: channel first with ``<|constrain|>json`` (formats.md 2.6), the chat
template's recipient-first layout of a past call kept apart as the labelled ``history_layout`` variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.generate import THOUGHT, generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines

GENERATED = ('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}'
             '<|call|>')


def _harmony() -> dict:
    return {f.id: f for f in generate([data_root() / "cases"], ["harmony"])}


def test_the_plain_fixture_is_the_generated_form_after_the_analysis_message() -> None:
    """After the generation prompt ``<|start|>assistant`` the model writes its analysis, then the call in a new
    message, channel before recipient, compact JSON; without analysis the completion starts at ``<|channel|>``."""
    fixtures = _harmony()
    assert fixtures["harmony.variant.call_first"].text == GENERATED
    assert fixtures["harmony.variant.nested"].text.startswith(
        f"<|channel|>analysis<|message|>{THOUGHT}<|end|><|start|>assistant<|channel|>commentary to=functions.search "
        '<|constrain|>json<|message|>{"query":"hotels","filters":{')
    plain = fixtures["harmony.single.get_weather_paris.plain"]
    assert plain.text.endswith('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
                               '<|message|>{"city":"paris"}<|call|>') and plain.source == "generated:plain"


def test_the_history_layout_is_a_labelled_variant_and_nothing_else_is_written_so() -> None:
    fixtures = _harmony()
    history = {fid: f for fid, f in fixtures.items() if "history_layout" in f.tags}
    assert {(fid, f.source) for fid, f in history.items()} == {
        ("harmony.variant.history_layout", "generated:history_layout"),
        ("harmony.variant.history_layout_call_first", "generated:history_layout_call_first")}
    assert history["harmony.variant.history_layout_call_first"].text == \
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
    assert history["harmony.variant.history_layout"].text.endswith(
        '<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}'
        "<|call|>")
    calls = [f for fid, f in fixtures.items() if fid not in history and f.expected.tool_calls]
    assert calls and all(" to=functions." not in f.text.split("<|channel|>")[0] for f in calls)
    assert all("<|constrain|>json" in f.text for f in calls)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_generated_form_replays_as_the_model_writes_it(engine: str, tmp_path: Path) -> None:
    """SGLang's regex reader and vLLM's openai-harmony reader (on token ids) read the plain fixtures' calls, whole
    and in every chunking."""
    adapter = adapter_for(load_engines()[engine])
    if adapter.ready() is not None or tokenizer_path("harmony") is None:
        pytest.skip(str(adapter.ready() or "toolmatrix replay-install tokenizers"))
    fixtures = _harmony()
    replay_engine(adapter, [fixtures["harmony.single.get_weather_paris.plain"], fixtures["harmony.variant.nested"]],
                  tmp_path, ["whole", "token", "special", "random"])
    records = list(read_records(tmp_path))
    assert len(records) == 10 and {(r.verdict.value, r.reason) for r in records} == {("pass", "")}

"""toolmatrix.replay: the fixture format, the generated set, the feeder, and a real SGLang parser replay."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from toolmatrix.formats import all_families, get_family
from toolmatrix.library.cases import load_cases
from toolmatrix.records import ReplayInfo, read_records
from toolmatrix.replay.adapters import adapter_for, replay_engines
from toolmatrix.replay.feeder import CHUNKINGS, chunk, tokenizer_path
from toolmatrix.replay.fixtures import Fixture, FixtureError, load_fixtures
from toolmatrix.replay.generate import case_calls, generate, in_sample
from toolmatrix.replay.judge import judge_replay
from toolmatrix.replay.session import (
    ReasoningChoice,
    adapters,
    chat_template_kwargs,
    parse_request,
    reasoning_choice,
    reasoning_style,
    replay_engine,
)
from toolmatrix.serving.registry import data_root, load_engines
from toolmatrix.wire.answer import Cut
from toolmatrix.wire.exchange import Exchange

GOOD = {"id": "ext.1", "family": "hermes", "model": "qwen3", "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": '<tool_call>\n{"name": "f", "arguments": {"x": "Zürich"}}\n</tool_call>',
        "expected": {"tool_calls": [{"name": "f", "arguments": {"x": "Zürich"}}], "content": None, "reasoning": None},
        "from_peer": {"kept": True}}


def test_a_malformed_line_names_file_line_and_field_and_nothing_is_replayed(tmp_path: Path) -> None:
    bad = {**GOOD, "id": "ext.2", "expected": {"tool_calls": [{"name": "f"}], "content": None, "reasoning": None}}
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(FixtureError) as caught:
        load_fixtures(path)
    assert caught.value.problems[0] == f"{path}:2: $.expected.tool_calls[0]: 'arguments' is a required property"
    assert caught.value.problems[1].startswith(f"{path}:3: $: not JSON")


def test_extra_fields_are_kept_and_written_back(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(GOOD, ensure_ascii=False) + "\n", encoding="utf-8")
    (fixture,) = load_fixtures(path)
    assert fixture.to_dict()["from_peer"] == {"kept": True}


def test_generated_set_covers_the_issue_floor() -> None:
    fixtures = generate([data_root() / "cases"])
    assert len(fixtures) >= 1500
    assert len({f.family for f in fixtures}) >= 12
    assert {"qwen3", "harmony", "deepseek_v3", "glm45"} <= {f.reasoning_style for f in fixtures}
    assert len({f.id for f in fixtures}) == len(fixtures)


def test_the_snapshot_sample_is_chosen_by_case_and_keeps_every_variant() -> None:
    """A sample by a hash of the case id: a case's fixtures are all in or all out, so the sample does not move when
    the library grows (an every-Nth sample by position reshuffled whenever a case was added)."""
    whole = generate([data_root() / "cases"], ["hermes"])
    sample = generate([data_root() / "cases"], ["hermes"], every=8)
    assert {f.id for f in sample} < {f.id for f in whole}
    variants = {f.id for f in whole if ".variant." in f.id}
    assert variants <= {f.id for f in sample}
    cases = {f.id.split(".", 1)[1].rsplit(".", 1)[0] for f in whole if ".variant." not in f.id}
    kept = {c for c in cases if in_sample(c, 8)}
    assert 0 < len(kept) < len(cases)
    assert {f.id for f in sample} == variants | {f.id for f in whole if f.id.split(".", 1)[1].rsplit(".", 1)[0] in kept}


def test_a_schema_matcher_with_a_const_or_null_type_has_that_value_as_its_witness() -> None:
    """The types cases (integers, booleans, null kept as JSON types) get fixtures; a schema with no single value
    (an object of patterns) still gets none, never a guess; an argument that must be absent is left out."""
    cases = {c.id: c for c in load_cases([data_root() / "cases"])}
    assert case_calls(cases["types.mixed_scalars_one_call"]) == [("schedule_job", {
        "job_name": "nightly-backup", "retries": 3, "notify": True, "priority": "high", "timeout_seconds": 90.5})]
    assert case_calls(cases["types.null_value"]) == [("update_profile", {"user_id": "u-314", "nickname": None})]
    assert case_calls(cases["nested.any_of_object_parameter"]) is None
    assert case_calls(cases["no_params.only_optional_params_unused"]) == [("get_local_time", {})]  # absent: left out


def test_a_replay_record_keeps_the_parser_exchange_as_a_live_record_does() -> None:
    fixture = Fixture.from_dict(GOOD)
    crashed = Exchange("nonstream", {"model": "m"}, 500, None, error="worker died", latency_s=0.125,
                       raw_text="Traceback", cut=Cut(10, 20, False))
    info = ReplayInfo("sglang", "0.5.9", "qwen25", "none", family="hermes")
    record = judge_replay(fixture, get_family("hermes"), crashed, None, info, "run-1", "nonstream")
    assert (record.latency_s, record.error, record.raw_text, record.cut) == (0.125, "worker died", "Traceback",
                                                                            Cut(10, 20, False))
    assert record.exchange() == crashed


@pytest.mark.parametrize("family", ["hermes", "glm45", "harmony", "deepseek_v31", "kimi_k2"])
def test_every_chunking_joins_back_to_the_text(family: str) -> None:
    for fixture in [f for f in generate([data_root() / "cases"], [family]) if "unicode" in f.tags][:2]:
        for chunking in CHUNKINGS:
            pieces = chunk(fixture.text, get_family(family), chunking, fixture.id)
            assert "".join(p for p, _ in pieces) == fixture.text


@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers not run")
def test_token_chunking_uses_qwen3_real_ids() -> None:
    # reference/replay.md: the ids checked on these machines.
    text = '<think>\nhi\n</think>\n\n<tool_call>\n{"name": "get_weather"}'
    ids = [i for _, piece in chunk(text, get_family("hermes"), "token") for i in piece]
    assert ids == [151667, 198, 6023, 198, 151668, 271, 151657, 198, 4913, 606, 788, 330, 455, 69364, 9207]


SGLANG = adapter_for(load_engines()["sglang"])


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_sglang_replays_a_fixture_file_into_records(tmp_path: Path) -> None:
    """A real parser (SGLang qwen25 + qwen3 reasoning) on a real generated fixture: every chunking passes."""
    (fixture,) = [f for f in generate([data_root() / "cases"], ["hermes"]) if f.id == "hermes.single.get_weather_paris.think"]
    counts = replay_engine(SGLANG, [fixture], tmp_path, ["token", "special", "random"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "pass"), ("stream:token", "pass"), ("stream:special", "pass"), ("stream:random", "pass")]
    assert records[0].replay.parser == "qwen25" and records[0].replay.reasoning_parser == "qwen3"
    assert records[0].replay.engine_version == "0.5.23" and counts["pass"] == 4


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_a_marker_the_expected_answer_holds_is_quoted_not_a_leak(tmp_path: Path) -> None:
    """A call whose intended argument is ``<|python_tag|>`` (the prompt asked for that text): SGLang parses it right,
    and the replay's request quotes it as the live request would, so no_marker_leak does not fail a correct parse."""
    (fixture,) = [f for f in generate([data_root() / "cases"], ["pythonic"])
                  if f.id == "pythonic.unicode.marker_python_tag.plain"]
    replay_engine(SGLANG, [fixture], tmp_path, ["token"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [("nonstream", "pass"), ("stream:token", "pass")]
    assert records[0].request["messages"] == [{"role": "user", "content": "Use this text verbatim: <|python_tag|>"}]
    leak = next(c for c in records[0].checks if c.name == "no_marker_leak")
    assert leak.outcome.value == "pass"


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_two_worker_processes_write_the_records_one_writes_in_fixture_order(tmp_path: Path) -> None:
    """Fixtures go round the worker processes, each sent ahead of its answer: the records are the ones a single
    worker asked in turn gives, in the same order."""
    fixtures = generate([data_root() / "cases"], ["hermes"])[:7]
    runs = {n: tmp_path / str(n) for n in (1, 2)}
    for n, folder in runs.items():
        spec = attrs.evolve(SGLANG.spec, replay=attrs.evolve(SGLANG.replay, processes=n))
        replay_engine(attrs.evolve(SGLANG, spec=spec), fixtures, folder, ["token", "random"])
    one, two = ([(r.case_id, r.mode, r.verdict.value, r.reason) for r in read_records(folder)]
                for folder in runs.values())
    assert len(one) == 7 * 3 and two == one


VLLM = adapter_for(load_engines()["vllm"])


@pytest.mark.skipif(VLLM.ready() is not None, reason=str(VLLM.ready()))
def test_a_fixture_sent_ahead_of_its_familys_refusal_is_dropped_with_the_family(tmp_path: Path) -> None:
    """vLLM refuses a family with no offline tokenizer when its first fixture arrives; the next one of that family
    was already sent (one ahead) and its answer is dropped, not written; the other family replays."""
    mistral = generate([data_root() / "cases"], ["mistral_v11"])[:2]
    hermes = generate([data_root() / "cases"], ["hermes"])[:1]
    counts = replay_engine(VLLM, [*mistral, *hermes], tmp_path, ["whole"])
    records = list(read_records(tmp_path))
    assert {r.case_id for r in records} == {hermes[0].id} and len(records) == 2
    assert counts["skipped_families"] == 1
    assert "mistral_v11" in json.loads((tmp_path / "run.json").read_text())["engine"]["skipped_families"]


def outside(model: str, family: str = "hermes", reasoning: str | None = "The user wants the weather.") -> Fixture:
    """A fixture as an outside set writes one: the model named as the world names it, no reasoning_style."""
    return Fixture.from_dict({**GOOD, "id": f"ext.{model}", "model": model, "family": family,
                              "text": f"<think>\n{reasoning}\n</think>\n\n{GOOD['text']}" if reasoning else GOOD["text"],
                              "expected": {**GOOD["expected"], "reasoning": reasoning}})


@pytest.mark.parametrize(("model", "family", "reasoning", "style"), [
    ("qwen3", "hermes", None, "qwen3"),                       # a registry id
    ("Qwen/Qwen3-8B", "hermes", None, "qwen3"),               # a registry model's weights repository
    ("openai/gpt-oss-20b", "harmony", None, "harmony"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json", None, None),  # registered, reasons not
    ("Qwen/Qwen3-32B", "hermes", "The user wants the weather.", "qwen3"),  # unregistered, reasoning expected
    ("Qwen/Qwen3-32B", "hermes", None, None),                 # unregistered, nothing to split off
    ("someone/own-model", "json_lines", "thinking", None),    # no reasoning model of its family is registered
])
def test_an_outside_fixture_gets_the_reasoning_parser_its_models_server_runs(model, family, reasoning, style):
    """An outside set names its model Qwen/Qwen3-8B, not qwen3: it got no reasoning parser, so its <think> stayed
    in content and SGLang and vLLM failed 176 fixtures their authors saw pass."""
    assert reasoning_style(outside(model, family, reasoning)) == style


QWEN35_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize(("fields", "style", "why"), [
    # A Qwen3.5 (unregistered here) writes Qwen3-Coder's calls after a prompt-opened <think>: every sign says so.
    ({"family": "qwen3_coder", "model": "Qwen/Qwen3.6-27B", "generation_prompt": "<|im_start|>assistant\n<think>\n",
      "text": "Let me look.\n</think>\n\n" + QWEN35_CALL, "reasoning": "Let me look."},
     "qwen3", "its expected answer holds reasoning: qwen3_coder's thinking models are served with style qwen3"),
    # Thinking off (the prompt opens and closes <think>): its server still runs the reasoning parser.
    ({"family": "qwen3_coder", "model": "Qwen/Qwen3.6-27B",
      "generation_prompt": "<|im_start|>assistant\n<think>\n\n</think>\n\n", "text": QWEN35_CALL},
     "qwen3", "its generation prompt holds <think>: qwen3_coder's thinking models are served with style qwen3"),
    # An expected answer with no reasoning, yet the text closes a thinking block: the text is evidence too.
    ({"family": "kimi_k2", "model": "someone/kimi-finetune", "text": "</think>hello"},
     "kimi_k2", "its text holds </think>: kimi_k2's thinking models are served with style kimi_k2"),
    ({"family": "mistral_v11", "model": "someone/magistral-finetune", "text": "[THINK]x[/THINK]hello"},
     "mistral", "its text holds [THINK]: mistral_v11's thinking models are served with style mistral"),
    # The registry's thinking models by their hub names, with their serve recipes' styles.
    ({"family": "glm47", "model": "zai-org/GLM-4.7", "text": "hello"},
     "glm45", "the registered model glm4.7 reasons in style glm45"),
    ({"family": "deepseek_v32", "model": "deepseek-ai/DeepSeek-V3.2", "text": "hello"},
     "deepseek_v3", "the registered model deepseek-v3.2 reasons in style deepseek_v3"),
    # Qwen3-Coder does not think, and nothing in its fixture says otherwise: no reasoning parser.
    ({"family": "qwen3_coder", "model": "Qwen/Qwen3-Coder-30B-A3B-Instruct", "text": QWEN35_CALL},
     None, "the registered model qwen3-coder does not think"),
    ({"family": "json_lines", "model": "someone/own-model", "text": "hello", "reasoning": "hmm"},
     None, "its expected answer holds reasoning, but no json_lines model thinks (families.yaml)"),
    ({"family": "hermes", "model": "someone/own-model", "text": "hello", "reasoning_style": "qwen3"},
     "qwen3", "the fixture names its reasoning style"),
])
def test_the_reasoning_parser_is_chosen_from_the_fixtures_evidence_then_model_then_family(fields, style, why):
    """Outside fixtures of Qwen3.5/3.6, GLM-4.7, Kimi K2.6, DeepSeek V3.2 and Magistral got no reasoning parser
    (their families' registered models do not think): ``</think>`` landed in content on SGLang and vLLM alike, two
    thirds of the pairs that disagreed with their authors' verdicts. The choice says why, for the record."""
    fields = dict(fields)
    reasoning = fields.pop("reasoning", None)
    data = {**GOOD, "id": "ext", **fields, "expected": {**GOOD["expected"], "reasoning": reasoning}}
    assert reasoning_choice(Fixture.from_dict(data)) == ReasoningChoice(style, why)


def test_every_familys_thinking_style_is_served_by_some_engine() -> None:
    """A family's thinking style names the engines' reasoning_args key its models are served with: a typo would
    silently give every engine no reasoning parser."""
    styles = {style for spec in load_engines().values() for style in spec.reasoning_args}
    assert {f.id: f.thinking.style for f in all_families() if f.thinking and f.thinking.style not in styles} == {}


@pytest.mark.parametrize(("family", "reasoning", "kwargs"), [
    ("hermes", "The user wants the weather.", {"enable_thinking": True}),   # Qwen3's template
    ("hermes", None, {"enable_thinking": False}),
    ("deepseek_v31", "The user wants the weather.", {"thinking": True}),   # V3.1's template reads ``thinking``
    ("deepseek_v31", None, {"thinking": False}),
    ("deepseek_v3", None, {"thinking": False}),  # R1's template has no switch, its engines' parsers read this one
    ("harmony", "The user wants the weather.", {}),                      # gpt-oss has no such switch
])
def test_thinking_is_asked_under_the_familys_own_key(family, reasoning, kwargs) -> None:
    """Every adapter was sent enable_thinking, which DeepSeek V3.1's template never reads: a client of that model
    sends ``thinking``. The key is family data (families.yaml), the value what the fixture shows."""
    assert chat_template_kwargs(outside("someone/own-model", family, reasoning)) == kwargs


@pytest.mark.parametrize("engine", sorted(replay_engines()))
def test_every_adapter_is_asked_thinking_per_fixture_under_the_familys_key(engine: str) -> None:
    """Every worker request carries the switch as the fixture shows, the same way for every engine: before, SGLang's
    never did, and the others sent enable_thinking for every family, which DeepSeek V3.1's template never reads."""
    (adapter,) = adapters([engine])
    for family, key in (("hermes", "enable_thinking"), ("glm47", "enable_thinking"), ("deepseek_v31", "thinking")):
        for reasoning in ("The user wants the weather.", None):
            request = parse_request(adapter, outside("someone/own-model", family, reasoning), ["whole"])
            assert request["chat_template_kwargs"] == {key: reasoning is not None}, (family, reasoning)
    assert parse_request(adapter, outside("openai/gpt-oss-20b", "harmony"), ["whole"])["chat_template_kwargs"] == {}


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_sglang_splits_an_outside_fixtures_reasoning_as_its_server_would(tmp_path: Path) -> None:
    replay_engine(SGLANG, [outside("Qwen/Qwen3-8B")], tmp_path, ["token"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [("nonstream", "pass"), ("stream:token", "pass")]
    assert records[0].replay.reasoning_parser == "qwen3"

"""Harvest and agreement on real live records: a few read from the committed CPU snapshot into a small results
directory of their own (nothing copied into the repository), harvested, and compared with replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import attrs
import pytest

from toolmatrix.live.evidence import SAME_GENERATION
from toolmatrix.records import RECORDS, RUN, read_run_info, scan_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.agreement import AgreementError, agreement, compare_engine
from toolmatrix.replay.agreement import main as agreement_main
from toolmatrix.replay.answers import differences
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import dump_fixtures, load_fixtures
from toolmatrix.replay.harvest import (
    LIVE_DISAGREES,
    NO_RAW_TEXT,
    NO_STOP_MARKER,
    REFERENCE_ERRORS,
    REGENERATED,
    REPLAY,
    STOP_TOKEN,
    STREAMED,
    THINKING,
    TOKEN_IDS,
    TOOL_CHOICE,
    HarvestError,
    harvest,
)
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines

SNAPSHOT = data_root() / "results" / "cpu-qwen2.5-coder"
VLLM_RUN, LLAMACPP_RUN = "qwen2.5-coder-0.5b@vllm", "qwen2.5-coder-0.5b@llamacpp"


def excerpt(run: str, picks: set[tuple[str, str]], into: Path, edit: Callable[[dict], dict] = lambda d: d,
            run_edit: Callable[[dict], dict] = lambda d: d) -> Path:
    """A results directory of the snapshot run's records ``(case, mode)``, each through ``edit``."""
    info = read_run_info(SNAPSHOT / run)
    records = [edit(line.data) for line in scan_records(info) if (line.data["case_id"], line.data["mode"]) in picks]
    assert len(records) == len(picks), "a picked record is not in the snapshot"
    into.mkdir(parents=True)
    counts = {v: sum(r["verdict"] == v for r in records) for v in ("pass", "fail", "unsupported", "error")}
    data = json.loads((SNAPSHOT / run / RUN).read_text())
    (into / RUN).write_text(json.dumps(run_edit({**data, "counts": counts})))
    (into / RECORDS).write_text("".join(json.dumps(r) + "\n" for r in records))
    return into


def test_a_vllm_record_becomes_a_fixture_without_its_stop_token_and_with_its_live_answer(tmp_path: Path) -> None:
    folder = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream")}, tmp_path / VLLM_RUN)
    raw = next(scan_records(read_run_info(folder))).data
    found = harvest([folder])
    (fixture,) = found.fixtures
    assert raw["evidence"]["raw_text"].endswith("<|im_end|>")
    assert raw["response"]["choices"][0]["token_ids"][-1] == 151645  # Qwen's <|im_end|>
    assert fixture.text == raw["evidence"]["raw_text"].removesuffix("<|im_end|>")
    assert found.stop_tokens == {"vllm <|im_end|>": 1}
    assert fixture.id == "qwen2.5-coder-0.5b@vllm/vllm/choose.read_not_write"
    assert fixture.family == "json_lines" and fixture.model == "qwen2.5-coder-0.5b"
    assert list(fixture.tools) == raw["request"]["tools"]
    # The model chose the wrong tool (a model failure): live and reference read the same call, so no tag.
    call = {"name": "list_directory", "arguments": {"path": "/var/log/app.log", "include_hidden": False}}
    assert list(fixture.expected.tool_calls) == [call] and fixture.tags == ("harvested",)
    assert fixture.extra["live"] == {"engine": "vllm", "version": "0.32.0", "verdict": "fail", "tool_calls": [call],
                                     "content": None, "reasoning": None}
    # The ids vLLM generated are kept, the stop token's dropped with its text: a replay streams them.
    assert fixture.token_ids == tuple(raw["response"]["choices"][0]["token_ids"][:-1])
    assert fixture.tokenizer == "qwen2.5-coder-0.5b (its weights)"
    # llama-server's __verbose holds no ids: its fixture is text only.
    llamacpp = excerpt(LLAMACPP_RUN, {("single.get_weather_paris", "nonstream")}, tmp_path / LLAMACPP_RUN)
    (text_only,) = harvest([llamacpp]).fixtures
    assert text_only.token_ids is None and "token_ids" not in text_only.to_dict()


def test_tags_say_where_the_live_engine_and_the_reference_parser_part(tmp_path: Path) -> None:
    vllm = excerpt(VLLM_RUN, {("parallel.add_and_multiply", "nonstream"), ("unicode.lone_open_brace", "nonstream")},
                   tmp_path / VLLM_RUN)
    llamacpp = excerpt(LLAMACPP_RUN, {("nested.three_levels_deep", "nonstream")}, tmp_path / LLAMACPP_RUN)
    tags = {f.id.rsplit("/", 1)[1]: set(f.tags) - {"harvested"} for f in harvest([vllm, llamacpp]).fixtures}
    # vLLM's hf parser reads no call in two JSON objects on two lines; the reference parser reads both.
    assert tags["parallel.add_and_multiply"] == {LIVE_DISAGREES}
    # An unclosed object: neither reads a call (the same content), the reference parser reports it.
    assert tags["unicode.lone_open_brace"] == {REFERENCE_ERRORS}
    # Unbalanced braces: llama.cpp reads a call anyway, the reference parser none.
    assert tags["nested.three_levels_deep"] == {LIVE_DISAGREES, REFERENCE_ERRORS}


def test_what_is_not_harvested_is_counted_by_reason(tmp_path: Path) -> None:
    excerpt(LLAMACPP_RUN, {("single.get_weather_paris", "nonstream"), ("single.get_weather_paris", "stream"),
                           ("tool_choice.required_greeting", "nonstream"), ("irrelevance.thanks", "nonstream")},
            tmp_path / LLAMACPP_RUN)
    # Evidence from before records said its source: its method tells a second generation.
    def second_generation(record: dict) -> dict:
        evidence = {key: value for key, value in record["evidence"].items() if key != "source"}
        return {**record, "evidence": {**evidence, "method": "vllm_tokenize + openai_completions"}}

    regenerated = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream")}, tmp_path / "old", edit=second_generation)
    found = harvest([tmp_path])
    assert [f.id for f in found.fixtures] == ["qwen2.5-coder-0.5b@llamacpp/llamacpp/single.get_weather_paris"]
    # irrelevance.thanks: llama-server answered HTTP 500, which carries no __verbose.
    assert found.excluded == {STREAMED: 1, NO_RAW_TEXT: 1, REGENERATED: 1, TOOL_CHOICE: 1}
    assert harvest([regenerated]).fixtures == () and found.stop_tokens == {}
    # A parser-replay run holds no live answer: its records are counted from its run.json, not read.
    replay = data_root() / "results" / "replay"
    runs = [read_run_info(d).run for d in sorted(replay.glob("*/")) if (d / RUN).is_file()]
    assert runs and harvest([replay]).excluded == {REPLAY: sum(sum(r.counts.values()) for r in runs)}


def test_a_thinking_model_and_a_stop_token_that_is_no_end_marker_are_not_harvested(tmp_path: Path) -> None:
    picks = {("choose.read_not_write", "nonstream")}
    as_qwen3 = excerpt(VLLM_RUN, picks, tmp_path / "thinking",
                       run_edit=lambda run: {**run, "model": {**run["model"], "id": "qwen3"}})
    assert harvest([as_qwen3]).excluded == {THINKING: 1}

    def cut(record: dict) -> dict:
        return {**record, "evidence": {**record["evidence"], "raw_text": record["evidence"]["raw_text"][:-1]}}

    assert harvest([excerpt(VLLM_RUN, picks, tmp_path / "cut", edit=cut)]).excluded == {NO_STOP_MARKER: 1}


def test_every_same_generation_protocol_says_where_its_stop_token_and_token_ids_are() -> None:
    assert set(STOP_TOKEN) == set(SAME_GENERATION) == set(TOKEN_IDS)


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(HarvestError, match=f"{tmp_path}: no results directory in it"):
        harvest([tmp_path])
    one = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream")}, tmp_path / "a" / VLLM_RUN)
    twin = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream")}, tmp_path / "b" / VLLM_RUN)
    with pytest.raises(HarvestError, match="fixture id 'qwen2.5-coder-0.5b@vllm/vllm/choose.read_not_write' is "
                                           "already harvested"):
        harvest([one, twin])


def test_differences_are_strict_about_calls_and_lenient_about_surrounding_whitespace() -> None:
    live = {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}], "content": None, "reasoning": None}
    assert differences(live, {**live, "content": "  \n"}) == []
    assert differences(live, {**live, "tool_calls": [{"name": "add", "arguments": {"b": 2, "a": 1}}]}) == []
    assert differences(live, {**live, "tool_calls": [{"name": "add", "arguments": {"a": 1.0, "b": 2}}]}) == [
        'call 0: arguments {"a": 1, "b": 2} live, {"a": 1.0, "b": 2} replay']
    assert differences(live, {**live, "tool_calls": [{"name": "add", "arguments": {"a": True, "b": 2}}]}) != []
    assert differences(live, {**live, "tool_calls": []}) == ['1 call(s) live ["add"], 0 replay []']


VLLM = adapter_for(load_engines()["vllm"])
NO_VLLM = VLLM.ready() or (None if tokenizer_path("json_lines", "qwen2.5-coder-0.5b") else
                           "toolmatrix replay-install tokenizers --model qwen2.5-coder-0.5b")


@pytest.mark.skipif(NO_VLLM is not None, reason=str(NO_VLLM))
def test_agreement_of_vllm_replay_with_its_live_answers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """vLLM's own hf parser with the model's own tokenizer answers as the live vLLM did, a live answer made
    different is named with what differs, and a replay of other fixtures is refused, naming file and fixture."""
    folder = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream"), ("parallel.add_and_multiply", "nonstream")},
                     tmp_path / VLLM_RUN)
    fixtures = list(harvest([folder]).fixtures)
    replay_engine(VLLM, fixtures, tmp_path / "replay" / "vllm", [])
    (same,) = agreement(fixtures, tmp_path / "replay")
    assert (same.engine, same.replay_version, same.agreed, same.total) == ("vllm", "0.33.0", 2, 2)

    first = fixtures[0]
    live = first.extra["live"]
    call = {**live["tool_calls"][0], "arguments": {"path": "/var/log"}}
    fixtures[0] = attrs.evolve(first, extra={"live": {**live, "tool_calls": [call]}})
    differ = compare_engine("vllm", fixtures, tmp_path / "replay")
    assert differ.agreed == 1 and [d.fixture for d in differ.disagreements] == [first.id]
    assert differ.disagreements[0].what == (
        'call 0: arguments {"path": "/var/log"} live, {"include_hidden": false, "path": "/var/log/app.log"} replay',)

    path = tmp_path / "f.jsonl"
    dump_fixtures(fixtures, path)
    assert agreement_main(str(path), str(tmp_path / "replay"), None) == 0
    assert "vllm 0.33.0 (live 0.32.0) (versions differ): 1/2 agree (50.0 %)" in capsys.readouterr().out
    assert agreement_main(str(path), str(tmp_path), ["vllm"]) == 2
    assert f"{tmp_path / 'vllm' / 'run.json'}: no replay of vllm" in capsys.readouterr().err

    with pytest.raises(AgreementError, match=r"vllm/results.jsonl:\d: fixture "
                                             r"'qwen2.5-coder-0.5b@vllm/vllm/parallel.add_and_multiply' is not in"):
        agreement(fixtures[:1], tmp_path / "replay")


def test_a_fixture_file_without_harvested_fixtures_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = excerpt(VLLM_RUN, {("choose.read_not_write", "nonstream")}, tmp_path / VLLM_RUN)
    (fixture,) = harvest([folder]).fixtures
    path = tmp_path / "plain.jsonl"
    dump_fixtures([attrs.evolve(fixture, extra={})], path)
    assert len(load_fixtures(path)) == 1
    assert agreement_main(str(path), str(tmp_path), None) == 2
    assert f"{path}: no harvested fixture" in capsys.readouterr().err

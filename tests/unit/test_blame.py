"""Blame and the replay judge read what a check is from its registration, never from a list of names: a check
renamed keeps its treatment, and a name no registered check has raises instead of being judged as another."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from toolmatrix.base.features import CHECK_GAPS
from toolmatrix.formats import get_family
from toolmatrix.judge import checks
from toolmatrix.judge.blame import SAID, reblame
from toolmatrix.judge.checks import CHECKS, CheckInput, run_checks
from toolmatrix.library.cases import load_cases
from toolmatrix.records import Blame, CheckOutcome, CheckResult, Evidence, EvidenceStatus, ReplayInfo
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.judge import judge_replay
from toolmatrix.wire.exchange import Exchange

CASE = {c.id: c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])}["faults.single"]
HERMES = get_family("hermes")
SAID_IT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
LOST = {"choices": [{"message": {"role": "assistant", "content": "It is sunny."}, "finish_reason": "stop"}]}
FIXTURE = {"id": "hermes.single.plain", "family": "hermes", "model": "qwen3", "text": SAID_IT,
           "tools": [dict(t) for t in CASE.tools],
           "expected": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}], "content": None,
                        "reasoning": None}}


def rename(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    """The check ``old`` registered as ``new``, as renaming its function does (its registration travels with it)."""
    was = next(c for c in CHECKS if c.name == old)
    now = attrs.evolve(was, name=new)
    monkeypatch.setattr(checks, "CHECKS", [now if c is was else c for c in CHECKS])
    registry = getattr(checks, "REGISTERED", None)  # the registry by name: absent before there was one
    if registry is not None:
        monkeypatch.setattr(checks, "REGISTERED", {**{k: v for k, v in registry.items() if k != old}, new: now})


def engine_lost_the_call() -> tuple[list[CheckResult], CheckInput, Evidence]:
    """The model wrote the call (its own words hold it); the engine's answer has none."""
    inputs = CheckInput(CASE, Exchange("nonstream", {}, 200, LOST), HERMES, CASE.expect)
    return run_checks(inputs), inputs, Evidence(EvidenceStatus.OBTAINED, raw_text=SAID_IT)


def lost_in_replay() -> list[CheckResult]:
    """The parser lost the call the fixture's text holds: its checks, as the replay judge records them."""
    info = ReplayInfo("sglang", "0.5.9", "qwen25", "none", family="hermes")
    exchange = Exchange("nonstream", {}, 200, LOST)
    return list(judge_replay(Fixture.from_dict(FIXTURE), HERMES, exchange, None, info, "run-1", "nonstream").checks)


def test_the_models_own_words_put_a_lost_call_on_the_engine():
    results, inputs, evidence = engine_lost_the_call()
    wire = next(r for r in results if r.failed)
    assert (wire.name, wire.blame) == ("expected_calls", Blame.MODEL)
    out, decided = reblame(results, inputs, evidence)
    assert decided and next(r for r in out if r.failed).blame is Blame.ENGINE


def test_blame_follows_a_renamed_check(monkeypatch):
    """Before the registration carried it, blame knew its checks by a set of names: a renamed check fell out of
    it, and the engine's lost call stayed the model's. The registration travels with the rename."""
    rename(monkeypatch, "expected_calls", "calls_as_expected")
    results, inputs, evidence = engine_lost_the_call()
    out, decided = reblame(results, inputs, evidence)
    failing = next(r for r in out if r.failed)
    assert (failing.name, failing.blame, decided) == ("calls_as_expected", Blame.ENGINE, True)


def test_the_replay_judge_follows_a_renamed_check(monkeypatch):
    """In replay the text is given: a missing call is the parser's whatever the check is called."""
    assert next(r for r in lost_in_replay() if r.failed).blame is Blame.ENGINE
    rename(monkeypatch, "expected_calls", "calls_as_expected")
    failing = next(r for r in lost_in_replay() if r.failed)
    assert (failing.name, failing.blame) == ("calls_as_expected", Blame.ENGINE)
    assert failing.detail.endswith("(replay: the text is given)")


def test_a_result_named_after_no_registered_check_raises(monkeypatch):
    """A check known under one name where results carry another (the registry renamed, not what runs, or a stale
    name) fails loudly in blame and in the replay judge: never judged as some other check, or as none."""
    results, inputs, evidence = engine_lost_the_call()
    stale = [attrs.evolve(r, name="expected_call") if r.name == "expected_calls" else r for r in results]
    with pytest.raises(checks.UnknownCheck, match="'expected_call'"):
        reblame(stale, inputs, evidence)
    monkeypatch.setattr(checks, "REGISTERED", {k: v for k, v in checks.REGISTERED.items() if k != "expected_calls"})
    with pytest.raises(checks.UnknownCheck, match="'expected_calls'"):
        lost_in_replay()


def test_a_check_gap_named_after_no_registered_check_raises(monkeypatch):
    """Engine specs may declare a check's failure a gap, by the check's name (``features.CHECK_GAPS``): the judge
    refuses at import a name no check is registered under."""
    checks.require_registered(CHECK_GAPS, "CHECK_GAPS")
    rename(monkeypatch, "finish_reason", "stop_word")
    with pytest.raises(checks.UnknownCheck, match="CHECK_GAPS: no check is registered as 'finish_reason'"):
        checks.require_registered(CHECK_GAPS, "CHECK_GAPS")


def test_the_registrations_say_what_blame_and_replay_read():
    """What each check judges decides whether the model's words are asked; the replay tier's checks are known by
    name but never run on a live answer; a second turn's result is its check's."""
    live = {c.name for c in CHECKS}
    assert {c.name for c in CHECKS if c.judges in SAID} == {
        "arguments_json", "no_unparsed_call", "no_marker_leak", "ascii_escaping", "arguments_schema", "expected_calls"}
    assert {c.name for c in CHECKS if c.unreadable_call_fails} <= {c.name for c in CHECKS if c.judges in SAID}
    assert {n for n, c in checks.REGISTERED.items() if c.replay_only} == {"replay_text", "replay_stream_equal"}
    assert live == {n for n, c in checks.REGISTERED.items() if not c.replay_only}
    assert checks.registered("followup.expected_calls").name == "expected_calls"


def test_a_check_that_blames_a_party_it_does_not_declare_raises():
    """A harness bug, not a verdict: the declared parties are what blame and the page may rely on."""
    wrong = attrs.evolve(checks.REGISTERED["call_ids"], function=lambda ev: checks.failed(Blame.MODEL, "no ids"))
    inputs = CheckInput(CASE, Exchange("nonstream", {}, 200, LOST), HERMES, CASE.expect)
    with pytest.raises(ValueError, match="'call_ids' blamed model"):
        wrong(inputs)
    assert checks.REGISTERED["call_ids"](inputs).outcome is CheckOutcome.SKIP

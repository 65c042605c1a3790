"""A replayed parse judged by the live tier's own checks: the fixture becomes a ``Case`` (its tools, its expected
calls as literal matchers), the parser's answer an ``Exchange``; ``checks.run_checks`` and ``checks.judge`` decide.

Two things only the replay tier knows are added as checks of their own, registered as the live ones are (replay
only): ``replay_text`` (content and reasoning equal the fixture's, whitespace at the ends aside) and, on streams,
``replay_stream_equal`` (the reassembled stream equals the whole-text parse; the live ``stream_consistency`` check
compares calls only). In replay the model's text is given, so a failure the live checks lay on the model in a check
registered as ``given_text_clears_model`` (a wrong or missing call) is the parser's: its blame becomes ``engine``
(``blamed_by`` stays ``wire``).
"""

from __future__ import annotations

import json

import attrs

from toolmatrix.formats import Family
from toolmatrix.judge.checks import (
    CheckInput,
    Finding,
    Judges,
    call_signature,
    failed,
    judge,
    passed,
    registered,
    replay_check,
    run_checks,
    skipped,
)
from toolmatrix.library.cases import CallExpectation, Case, Expectation
from toolmatrix.records import Blame, BlameSource, CheckResult, Record, ReplayInfo, Verdict, transcript
from toolmatrix.wire.answer import Message
from toolmatrix.wire.exchange import Exchange

from .fixtures import Fixture


def fixture_case(fixture: Fixture, where: str = "") -> Case:
    calls = tuple(CallExpectation(c["name"], dict(c["arguments"])) for c in fixture.expected.tool_calls)
    expect = Expectation(calls=calls, ordered=True, no_call=not calls)
    # A case's tools are dicts; a fixture's are read-only mappings: copied, their schemas shared.
    return Case(id=fixture.id, category=f"replay.{fixture.family}", description=fixture.source,
                tools=tuple(dict(t) for t in fixture.tools), messages=(), tool_choice=None, options={}, expect=expect,
                followup=None, requires=(), source=where)


@attrs.frozen
class ReplayInput:
    """What the replay tier's own checks read: the live checks' input, and the fixture it was made from."""

    inputs: CheckInput
    fixture: Fixture


def _norm(text: str | None) -> str:
    return (text or "").strip()


@replay_check("REPLAY_TEXT_MISMATCH", Judges.TEXT, {Blame.ENGINE})
def check_replay_text(ev: ReplayInput) -> Finding:
    """REPLAY_TEXT_MISMATCH: content or reasoning other than the fixture's, whitespace at the ends aside."""
    message = ev.inputs.message
    if message is None:
        return skipped("no answer")
    expected = ev.fixture.expected
    wrong = [f"{field} {json.dumps(_norm(got), ensure_ascii=False)[:80]} != expected "
             f"{json.dumps(_norm(want), ensure_ascii=False)[:80]}"
             for field, got, want in (("content", message.content, expected.content),
                                      ("reasoning", message.reasoning, expected.reasoning))
             if _norm(got) != _norm(want)]
    return failed(Blame.ENGINE, "; ".join(wrong)) if wrong else passed()


def _shape(message: Message) -> tuple[str, str, object]:
    return _norm(message.content), _norm(message.reasoning), call_signature(message)


@replay_check("REPLAY_STREAM_DIFFERS", Judges.WIRE, {Blame.ENGINE})
def check_replay_stream_equal(ev: ReplayInput) -> Finding:
    """REPLAY_STREAM_DIFFERS: the reassembled stream other than the whole-text parse: content and reasoning too,
    where the live ``stream_consistency`` compares calls only."""
    reference = ev.inputs.reference
    stream, whole = ev.inputs.message, reference.message() if reference is not None else None
    if stream is None or whole is None:
        return skipped("no answer to compare")
    if _shape(stream) == _shape(whole):
        return passed()
    return failed(Blame.ENGINE, f"stream {json.dumps(_shape(stream), ensure_ascii=False, default=str)[:120]} != "
                                f"whole {json.dumps(_shape(whole), ensure_ascii=False, default=str)[:120]}")


def _parser_blame(result: CheckResult) -> CheckResult:
    """A model blame of a check the given text clears (a wrong or missing call) is the parser's."""
    clears = registered(result.name).given_text_clears_model  # a result named after no registered check raises
    if result.failed and result.blame is Blame.MODEL and clears:
        return attrs.evolve(result, blame=Blame.ENGINE, detail=result.detail + " (replay: the text is given)")
    return result


def judge_replay(fixture: Fixture, family: Family, exchange: Exchange, reference: Exchange | None,
                 info: ReplayInfo, run_id: str, mode: str) -> Record:
    """The record of one fixture x engine x chunking."""
    case = fixture_case(fixture)
    inputs = CheckInput(case, exchange, family, case.expect, reference)
    own = ReplayInput(inputs, fixture)
    checks = [_parser_blame(c) for c in run_checks(inputs)]
    checks.append(check_replay_text(own))
    if reference is not None:
        checks.append(check_replay_stream_equal(own))
    decision = judge(checks, {}, case.features)
    return Record(run_id, fixture.id, case.category, mode, decision.verdict, decision.blame, decision.reason,
                  tuple(checks), gaps=decision.gaps, description=fixture.source or None,
                  expect=fixture.to_dict()["expected"],
                  blamed_by=BlameSource.WIRE if decision.verdict is not Verdict.PASS else None, replay=info,
                  **transcript(exchange))

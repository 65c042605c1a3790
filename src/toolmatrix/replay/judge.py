"""A replayed parse judged by the live tier's own checks: the fixture becomes a ``Case`` (its tools, its expected
calls as literal matchers), the parser's answer an ``Exchange``; ``checks.run_checks`` and ``checks.judge`` decide.

Two things only the replay tier knows are added as checks of their own, in the live tier's vocabulary:
``replay_text`` (content and reasoning equal the fixture's, whitespace at the ends aside) and, on streams,
``replay_stream_equal`` (the reassembled stream equals the whole-text parse; the live ``stream_consistency`` check
compares calls only). In replay the model's text is given, so a failure the live checks lay on the model
(wrong or missing call) is the parser's: its blame becomes ``engine`` (``blamed_by`` stays ``wire``).
"""

from __future__ import annotations

import json

from toolmatrix.formats import Family
from toolmatrix.judge.checks import CheckInput, judge, run_checks
from toolmatrix.library.cases import CallExpectation, Case, Expectation
from toolmatrix.records import Blame, BlameSource, CheckOutcome, CheckResult, Record, ReplayInfo, Verdict, transcript
from toolmatrix.wire.answer import Message
from toolmatrix.wire.exchange import Exchange

from .fixtures import Fixture

REPLAY_TEXT = "REPLAY_TEXT_MISMATCH"
STREAM_DIFFERS = "REPLAY_STREAM_DIFFERS"


def fixture_case(fixture: Fixture, where: str = "") -> Case:
    calls = tuple(CallExpectation(c["name"], dict(c["arguments"])) for c in fixture.expected.tool_calls)
    expect = Expectation(calls=calls, ordered=True, no_call=not calls)
    return Case(id=fixture.id, category=f"replay.{fixture.family}", description=fixture.source, tools=fixture.tools,
                messages=(), tool_choice=None, options={}, expect=expect, followup=None, requires=(), source=where)


def _norm(text: str | None) -> str:
    return (text or "").strip()


def _text_check(fixture: Fixture, message: Message | None) -> CheckResult:
    if message is None:
        return CheckResult("replay_text", CheckOutcome.SKIP, None, "no answer")
    wrong = [f"{field} {json.dumps(_norm(got), ensure_ascii=False)[:80]} != expected "
             f"{json.dumps(_norm(want), ensure_ascii=False)[:80]}"
             for field, got, want in (("content", message.content, fixture.expected.content),
                                      ("reasoning", message.reasoning, fixture.expected.reasoning))
             if _norm(got) != _norm(want)]
    if wrong:
        return CheckResult("replay_text", CheckOutcome.FAIL, Blame.ENGINE, "; ".join(wrong), REPLAY_TEXT)
    return CheckResult("replay_text", CheckOutcome.PASS, None, "")


def _shape(message: Message) -> tuple:
    calls = tuple((c.name, c.parsed_arguments() if c.parsed_arguments() is not None else c.arguments)
                  for c in message.tool_calls)
    return _norm(message.content), _norm(message.reasoning), calls


def _stream_check(stream: Message | None, whole: Message | None) -> CheckResult:
    if stream is None or whole is None:
        return CheckResult("replay_stream_equal", CheckOutcome.SKIP, None, "no answer to compare")
    if _shape(stream) == _shape(whole):
        return CheckResult("replay_stream_equal", CheckOutcome.PASS, None, "")
    detail = f"stream {json.dumps(_shape(stream), ensure_ascii=False, default=str)[:120]} != whole " \
             f"{json.dumps(_shape(whole), ensure_ascii=False, default=str)[:120]}"
    return CheckResult("replay_stream_equal", CheckOutcome.FAIL, Blame.ENGINE, detail, STREAM_DIFFERS)


def _parser_blame(result: CheckResult) -> CheckResult:
    if result.failed and result.blame is Blame.MODEL and result.name in ("expected_calls", "no_unparsed_call"):
        return CheckResult(result.name, result.outcome, Blame.ENGINE, result.detail + " (replay: the text is given)",
                           result.kind)
    return result


def judge_replay(fixture: Fixture, family: Family, exchange: Exchange, reference: Exchange | None,
                 info: ReplayInfo, run_id: str, mode: str) -> Record:
    """The record of one fixture x engine x chunking."""
    case = fixture_case(fixture)
    inputs = CheckInput(case, exchange, family, case.expect, reference)
    checks = [_parser_blame(c) for c in run_checks(inputs)]
    checks.append(_text_check(fixture, inputs.message))
    if reference is not None:
        checks.append(_stream_check(inputs.message, reference.message()))
    decision = judge(checks, {}, case.features)
    return Record(run_id, fixture.id, case.category, mode, decision.verdict, decision.blame, decision.reason,
                  tuple(checks), description=fixture.source or None, expect=fixture.to_dict()["expected"],
                  blamed_by=BlameSource.WIRE if decision.verdict is not Verdict.PASS else None, replay=info,
                  **transcript(exchange))

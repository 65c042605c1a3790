"""The declared gaps of an unsupported record are a field of its own (``gaps``), written from the judge's decision;
records written before the field still read, their gaps taken from their reason as the judge then worded it."""

from __future__ import annotations

import json

from tests.helpers_results import record, write_results
from toolmatrix.base.specs import validate_instance
from toolmatrix.judge.checks import judge
from toolmatrix.records import Blame, CheckOutcome, CheckResult, Record, Verdict, read_records
from toolmatrix.records.codec import migrate

FAILED = CheckResult("finish_reason", CheckOutcome.FAIL, Blame.ENGINE, "'stop' with calls", "FINISH_REASON")
SPEC = {"finish_reason": "tool calls end with 'stop'; always", "tool_choice.named": "becomes auto"}


def older(reason: str, checks: list[dict] | None = None, version: int = 2) -> dict:
    """An unsupported record as toolmatrix wrote it before ``gaps``."""
    rec = record("single.a", "unsupported", reason=reason)
    if checks is not None:
        rec["checks"] = checks
    return {**rec, "schema_version": version}


def test_the_decision_gaps_are_written_and_read_back():
    decision = judge([FAILED], SPEC, ["tool_choice.named"])
    written = Record("run-1", "single.a", "single", "nonstream", decision.verdict, decision.blame, decision.reason,
                     (FAILED,), gaps=decision.gaps, request={}).to_dict()
    assert written["gaps"] == SPEC and validate_instance(written, "record.schema.json") == []
    assert Record.from_dict(json.loads(json.dumps(written))).gaps == SPEC
    passed = Record("run-1", "single.a", "single", "nonstream", Verdict.PASS, None, "", (), request={}).to_dict()
    assert "gaps" not in passed  # only an unsupported record has gaps


def test_an_older_unsupported_record_gets_its_gaps_from_its_reason():
    decision = judge([FAILED], SPEC, ["tool_choice.named"])
    old = older(decision.reason, [{"name": "finish_reason", "outcome": "fail", "blame": "engine",
                                   "detail": "'stop' with calls"}])
    # An unsupported record that declared no gap (its reason empty) has none to give: no empty-named gap is made.
    assert "gaps" not in migrate(older("", []))
    # The reason as the judge worded it gives the gaps back: the failing check's words dropped, a "; " kept.
    assert migrate(old)["gaps"] == SPEC
    assert validate_instance(migrate(old), "record.schema.json") == []


def test_older_records_read_with_their_gaps(tmp_path):
    """Version 1 (a check's outcome in ``status``) and version 2, read as every reader reads them."""
    v1 = older("reasoning: the model does not think (args_object: not an object)", version=1,
               checks=[{"name": "args_object", "status": "fail", "blame": "model", "detail": "not an object"}])
    v2 = {**older("api.responses: no route"), "case_id": "single.b"}
    lacking = {**older("reasoning: the model does not think", checks=[]), "case_id": "single.c"}
    directory = write_results(tmp_path / "r", [v1, v2, lacking])
    assert [r.gaps for r in read_records(directory)] == [
        {"reasoning": "the model does not think"}, {"api.responses": "no route"},
        {"reasoning": "the model does not think"}]


def test_other_records_are_left_as_they_are():
    failing = record("single.a", "fail", reason="finish_reason: x; y: z")
    assert migrate(failing) is failing and "gaps" not in migrate(record("single.a"))
    recorded = {**older("worded for people"), "gaps": {"api.responses": "no route"}}
    assert migrate(recorded)["gaps"] == {"api.responses": "no route"}

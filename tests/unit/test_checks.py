"""Checks on hand-made exchanges: matchers, stream reassembly, and no crash on any engine output."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CHECKS, CheckInput, judge, run_checks, value_matches
from toolmatrix.library.cases import load_cases
from toolmatrix.records import CheckOutcome, CheckResult
from toolmatrix.wire.chat import assemble_stream
from toolmatrix.wire.exchange import Exchange

CASES = {c.id: c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])}
HERMES = get_family("hermes")


def test_matchers_use_json_equality():
    assert value_matches(3, 3.0) and not value_matches(1, True) and not value_matches(3, "3")
    assert value_matches({"any_of": ["Paris", "paris"]}, "paris") and not value_matches({"any_of": ["Paris"]}, "Lyon")
    assert value_matches({"regex": "(?i)^tok"}, "Tokyo") and not value_matches({"regex": "x"}, 5)
    assert value_matches({"schema": {"type": "integer", "minimum": 1}}, 2) and not value_matches({"schema": {"type": "integer"}}, "2")
    assert value_matches([{"a": 1}], [{"a": 1.0}]) and not value_matches({"a": 1}, {"a": 1, "b": 2})


def test_stream_reassembles_by_index():
    chunks = (
        {"choices": [{"delta": {"role": "assistant", "content": "Hi "}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    )
    message = assemble_stream(chunks)
    assert message.content == "Hi " and message.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.parsed_arguments()) for c in message.tool_calls] == [("a", "f", {"x": 1}), ("b", "g", {})]


def test_judge_orders_blame_and_declared_gaps():
    case = CASES["faults.choice_named"]
    body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        "finish_reason": "tool_calls"}]}
    results = run_checks(CheckInput(case, Exchange("nonstream", {}, 200, body), HERMES, case.expect))
    verdict = judge(results, {}, case.features)
    assert (verdict.verdict, verdict.blame) == ("fail", "engine") and verdict.reason.startswith("tool_choice:")
    gap = judge(results, {"tool_choice.named": "becomes auto", "api.messages": "no route"}, case.features)
    assert gap.verdict == "unsupported" and gap.gaps == {"tool_choice.named": "becomes auto"}
    assert gap.reason == f"tool_choice.named: becomes auto ({verdict.reason})"  # worded for people too
    assert verdict.gaps == {}


def test_request_text_is_not_a_leak():
    """A marker the user asked to echo is content, not a leak."""
    case = CASES["faults.single"]
    body = {"choices": [{"message": {"role": "assistant", "content": "echo: </tool_call>"}, "finish_reason": "stop"}]}
    request = {"messages": [{"role": "user", "content": "Repeat </tool_call> please"}]}
    results = {r.name: r for r in run_checks(CheckInput(case, Exchange("nonstream", request, 200, body), HERMES, case.expect))}
    assert results["no_marker_leak"].outcome == "pass"
    leaked = {r.name: r for r in run_checks(CheckInput(case, Exchange("nonstream", {}, 200, body), HERMES, case.expect))}
    assert leaked["no_marker_leak"].outcome == "fail"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
shaped = st.fixed_dictionaries({"choices": st.lists(st.fixed_dictionaries({
    "message": st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "reasoning_content"]), json_values),
    "delta": st.dictionaries(st.sampled_from(["content", "tool_calls"]), json_values),
    "finish_reason": json_values}), max_size=2)})


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(json_values, shaped), chunks=st.lists(st.one_of(json_values, shaped), max_size=5),
       status=st.sampled_from([200, 400, 500, None]), case_id=st.sampled_from(sorted(CASES)))
def test_no_engine_output_crashes_a_check(body, chunks, status, case_id):
    case = CASES[case_id]
    for exchange in (Exchange("nonstream", {}, status, body), Exchange("stream", {}, status, tuple(chunks))):
        results = run_checks(CheckInput(case, exchange, HERMES, case.expect, Exchange("nonstream", {}, 200, body)))
        assert [r.name for r in results] == [c.name for c in CHECKS]
        assert all(r.outcome in ("pass", "fail", "skip") for r in results)
        json.dumps([attrs.asdict(r) for r in results])


def _call_body(arguments: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
        "finish_reason": "tool_calls"}]}


def test_ascii_escape_is_told_from_an_escaped_backslash():
    case = CASES["faults.unicode"]

    def status(arguments: str) -> str:
        results = run_checks(CheckInput(case, Exchange("nonstream", {}, 200, _call_body(arguments)), HERMES, case.expect))
        return next(r.outcome for r in results if r.name == "ascii_escaping")

    assert status(json.dumps({"city": "Zürich"}, ensure_ascii=True)) == "fail"
    assert status(json.dumps({"city": "Zürich"}, ensure_ascii=False)) == "pass"
    assert status(json.dumps({"city": "literal \\u00fc text"}, ensure_ascii=False)) == "pass"


def test_a_failing_check_declared_unsupported_is_a_gap():
    """TGI answers finish_reason 'stop' with calls: declared, so 'unsupported' and not 'fail'."""
    case = CASES["faults.single"]
    body = _call_body('{"city": "Paris"}')
    body["choices"][0]["finish_reason"] = "stop"
    results = run_checks(CheckInput(case, Exchange("nonstream", {}, 200, body), HERMES, case.expect))
    assert judge(results, {}, case.features).verdict == "fail"
    gap = judge(results, {"finish_reason": "tool calls end with 'stop'"}, case.features)
    assert gap.verdict == "unsupported" and gap.reason.startswith("finish_reason: tool calls end with 'stop'")
    assert gap.gaps == {"finish_reason": "tool calls end with 'stop'"}


def test_a_pass_on_what_the_model_lacks_is_unsupported_with_its_gaps():
    """A case on thinking passed by a model that does not think proves nothing: its gaps, and no blame."""
    results = [CheckResult("http_status", CheckOutcome.PASS, None, "")]
    lacking = judge(results, {"reasoning": "the model does not think", "api.messages": "no route"}, ["reasoning"])
    assert (lacking.verdict, lacking.blame, lacking.gaps) == ("unsupported", None, {"reasoning": "the model does not think"})
    assert lacking.reason == "reasoning: the model does not think"

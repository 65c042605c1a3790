"""Nothing hangs: an answer with thousands of calls is judged in time linear in its size.

A 10,000-call answer once stalled a run for over ten minutes. The checks here would take minutes on quadratic
code; a deadline (``signal.alarm``) turns such a stall into a failure instead of a hung test run. Where the work
can be counted, it is counted instead of timed.
"""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager
from itertools import permutations
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolmatrix.formats import get_family
from toolmatrix.judge import checks
from toolmatrix.judge.checks import CheckInput, run_checks
from toolmatrix.library.cases import CallExpectation, Expectation, load_cases
from toolmatrix.wire.answer import Call
from toolmatrix.wire.exchange import Exchange

CASES = {c.id: c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])}
ROUND_TRIP = CASES["faults.round_trip"]
HERMES = get_family("hermes")
PARIS_AND_TOKYO = Expectation(calls=(CallExpectation("get_weather", {"city": "Paris"}),
                                     CallExpectation("get_weather", {"city": "Tokyo"})), allow_extra_calls=True)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail the test when the block runs past ``seconds`` (linear code needs a fraction of it)."""

    def expire(signum, frame):
        pytest.fail(f"still running after {seconds} s: the work is not linear in the answer's size")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _calls(count: int, city) -> list[dict]:
    return [{"id": f"call_{n}", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": city(n)})}} for n in range(count)]


def _answer(calls: list[dict], content: str | None = None) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": content, "tool_calls": calls},
                         "finish_reason": "tool_calls"}]}


def _follow_up(count: int, result_size: int) -> dict:
    """The second turn of a round trip whose first answer had ``count`` calls, each answered at length."""
    calls = _calls(count, lambda n: f"Paris {n}")
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "x" * result_size} for c in calls]
    return {"model": "m", "tools": list(ROUND_TRIP.tools), "messages": [
        *ROUND_TRIP.messages, {"role": "assistant", "content": None, "tool_calls": calls}, *results]}


def test_a_follow_up_with_thousands_of_leaking_calls_is_judged_in_linear_time():
    """Every argument leaks a marker the 10 MB request does not hold: one search of the request per marker, not
    one per field (minutes before)."""
    request = _follow_up(10_000, 1000)
    body = _answer(_calls(10_000, lambda n: f"P{n}<|im_end|>"), "21")
    with deadline(20):
        results = run_checks(CheckInput(ROUND_TRIP, Exchange("nonstream", request, 200, body), HERMES,
                                        ROUND_TRIP.followup.expect), "followup.")
    failed = {r.name: r.detail for r in results if r.failed}
    assert failed["followup.no_marker_leak"] == "'<|im_end|>' in arguments of get_weather"


def test_a_follow_up_with_thousands_of_calls_is_matched_in_linear_time():
    """4,000 Paris calls where Paris and Tokyo are expected, extra calls allowed (32 s before)."""
    request = _follow_up(4000, 10)
    body = _answer(_calls(4000, lambda n: "Paris"))
    with deadline(20):
        results = run_checks(CheckInput(ROUND_TRIP, Exchange("nonstream", request, 200, body), HERMES,
                                        PARIS_AND_TOKYO), "followup.")
    assert [r.name for r in results if r.failed] == ["followup.expected_calls"]


def _judge_calls(expect: Expectation, cities: list[str]) -> checks.CheckResult:
    body = _answer(_calls(len(cities), lambda n: cities[n]))
    ev = CheckInput(ROUND_TRIP, Exchange("nonstream", {}, 200, body), HERMES, expect)
    return next(r for r in run_checks(ev) if r.name == "expected_calls")


def test_order_free_matching_compares_each_pair_once(monkeypatch):
    """The work is len(expected) x len(returned) comparisons, where backtracking made it len(returned)^2."""
    compared = []
    value_matches = checks.value_matches
    monkeypatch.setattr(checks, "value_matches", lambda m, v: compared.append(v) or value_matches(m, v))
    assert _judge_calls(PARIS_AND_TOKYO, ["Paris"] * 300).outcome == "fail"
    assert len(compared) <= 2 * 300


@pytest.mark.parametrize(("expected", "cities", "outcome"), [
    # The first expected call fits both answers; the only assignment gives it the one the second cannot take.
    ([{"city": {"regex": "."}}, {"city": "Paris"}], ["Paris", "Tokyo"], "pass"),
    ([{"city": "Paris"}, {"city": {"regex": "."}}, {"city": "Tokyo"}], ["Tokyo", "Paris", "Paris"], "pass"),
    ([{"city": "Paris"}, {"city": "Paris"}], ["Paris", "Tokyo"], "fail"),
    ([{"city": {"regex": "."}}, {"city": "Paris"}, {"city": "Paris"}], ["Paris", "Paris", "Tokyo", "Oslo"], "pass"),
    ([{"city": {"regex": "."}}, {"city": "Paris"}, {"city": "Paris"}], ["Paris", "Tokyo", "Oslo"], "fail"),
])
def test_order_free_matching_moves_earlier_choices(expected, cities, outcome):
    expect = Expectation(calls=tuple(CallExpectation("get_weather", a) for a in expected), allow_extra_calls=True)
    assert _judge_calls(expect, cities).outcome == outcome


@settings(max_examples=300, deadline=None)
@given(expected=st.lists(st.sampled_from(["Paris", "Tokyo", {"regex": "."}, {"regex": "o"}]), max_size=4),
       cities=st.lists(st.sampled_from(["Paris", "Tokyo", "Oslo"]), max_size=6))
def test_order_free_matching_agrees_with_trying_every_assignment(expected, cities):
    calls = [Call(str(n), "function", "get_weather", json.dumps({"city": c})) for n, c in enumerate(cities)]
    wanted = [CallExpectation("get_weather", {"city": m}) for m in expected]
    every = any(all(checks.call_matches(w, calls[j]) for w, j in zip(wanted, chosen))
                for chosen in permutations(range(len(calls)), len(wanted)))
    assert checks._assign(wanted, calls) == every


def test_a_long_pythonic_call_list_is_parsed_in_linear_time():
    """10,000 calls in one list: each call's source is cut once from the text, not after splitting it anew
    (ast.get_source_segment; 40 s for 4,000 calls before)."""
    text = "[" + ", ".join(f'get_weather(city="Paris {n}")' for n in range(10_000)) + "]"
    with deadline(20):
        parsed = get_family("pythonic").parse(text)
    assert len(parsed.calls) == 10_000 and parsed.calls[-1].raw == 'get_weather(city="Paris 9999")'


@pytest.mark.parametrize(("text", "raws"), [
    ('[f(a="x"), g(b=1)]', ['f(a="x")', "g(b=1)"]),
    ('[f(a="é€𝄞"), g(b="""two\nlines"""),\n  h(c=[1,\r\n 2])]', ['f(a="é€𝄞")', 'g(b="""two\nlines""")', "h(c=[1,\r\n 2])"]),
    ('```tool_code\nprint(f(a=1))\r\nprint(g(b="\\u00e9"))\rh(c=2)\n```', ["f(a=1)", 'g(b="\\u00e9")', "h(c=2)"]),
])
def test_pythonic_raw_text_is_the_source_segment(text, raws):
    """Each call's raw text is its exact source, whatever the characters and line ends."""
    assert [c.raw for c in get_family("gemma3").parse(text).calls] == raws

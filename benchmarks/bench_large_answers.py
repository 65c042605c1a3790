"""How long do the checks take on an answer with thousands of calls? Three figures per size, each in seconds:

- leak: a follow-up turn whose request holds n calls and n tool results of 1 KB, whose answer leaks a marker in
  each of its n calls' arguments (every check, as the plugin runs them);
- match: n returned calls where two are expected and extra calls are allowed, and one expected call has no match
  (order-free matching);
- pythonic: n calls in one pythonic list, read by the reference parser.

Each must grow linearly with n: 10x the calls, about 10x the time.

    python benchmarks/bench_large_answers.py [--sizes 1000 4000 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CheckInput, run_checks
from toolmatrix.library.cases import CallExpectation, Expectation, load_cases
from toolmatrix.wire.exchange import Exchange

ROOT = Path(__file__).resolve().parents[1]
ROUND_TRIP = next(c for c in load_cases([ROOT / "tests" / "data" / "fault_cases.yaml"]) if c.id == "faults.round_trip")
HERMES = get_family("hermes")
PARIS_AND_TOKYO = Expectation(calls=(CallExpectation("get_weather", {"city": "Paris"}),
                                     CallExpectation("get_weather", {"city": "Tokyo"})), allow_extra_calls=True)


def _calls(count: int, city: Callable[[int], str]) -> list[dict]:
    return [{"id": f"call_{n}", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": city(n)})}} for n in range(count)]


def _exchange(request: dict, calls: list[dict]) -> Exchange:
    body = {"choices": [{"message": {"role": "assistant", "content": "21", "tool_calls": calls},
                         "finish_reason": "tool_calls"}]}
    return Exchange("nonstream", request, 200, body)


def leak(count: int) -> Callable[[], object]:
    first = _calls(count, lambda n: f"Paris {n}")
    results = [{"role": "tool", "tool_call_id": c["id"], "content": "x" * 1000} for c in first]
    request = {"model": "m", "tools": list(ROUND_TRIP.tools),
               "messages": [*ROUND_TRIP.messages, {"role": "assistant", "content": None, "tool_calls": first}, *results]}
    exchange = _exchange(request, _calls(count, lambda n: f"P{n}<|im_end|>"))
    return lambda: run_checks(CheckInput(ROUND_TRIP, exchange, HERMES, ROUND_TRIP.followup.expect), "followup.")


def match(count: int) -> Callable[[], object]:
    exchange = _exchange({}, _calls(count, lambda n: "Paris"))
    return lambda: run_checks(CheckInput(ROUND_TRIP, exchange, HERMES, PARIS_AND_TOKYO))


def pythonic(count: int) -> Callable[[], object]:
    text = "[" + ", ".join(f'get_weather(city="Paris {n}")' for n in range(count)) + "]"
    return lambda: get_family("pythonic").parse(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 10_000])
    args = parser.parse_args()
    print(f"{'calls':>8} {'leak':>8} {'match':>8} {'pythonic':>8}")
    for count in args.sizes:
        figures = []
        for scenario in (leak, match, pythonic):
            work = scenario(count)
            started = time.perf_counter()
            work()
            figures.append(time.perf_counter() - started)
        print(f"{count:>8} " + " ".join(f"{s:>7.2f}s" for s in figures), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

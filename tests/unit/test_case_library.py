"""The authored case library: its generated parts match their generators, and a case on thinking is
``unsupported`` on a model that does not think (the registry says which models think)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from toolmatrix.base.features import NOT_THINKING, REASONING
from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CheckInput, judge, run_checks
from toolmatrix.library.cases import load_cases
from toolmatrix.library.casetable import table
from toolmatrix.serving.registry import data_root, load_engines, load_models
from toolmatrix.wire.exchange import Exchange

ROOT = Path(__file__).parents[2]
CASES = {case.id: case for case in load_cases([data_root() / "cases"])}


def _catalog_module():
    spec = importlib.util.spec_from_file_location("catalog", ROOT / "cases" / "tools" / "catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_catalog_file_is_its_generator_output():
    assert (ROOT / "cases" / "tools" / "catalog.yaml").read_text() == _catalog_module().render(), \
        "cases/tools/catalog.yaml is stale: run python cases/tools/catalog.py"


def test_tool_catalog_cases_offer_the_whole_catalog_at_once():
    every = set(_catalog_module().catalog())
    offered = [case for case in CASES.values() if case.category == "tool_catalog"]
    assert len(every) >= 50 and offered
    assert all(set(case.tool_names) == every for case in offered)


def test_docs_table_is_the_command_output():
    page = (ROOT / "docs" / "cases.md").read_text()
    found = re.search(r"<!-- toolmatrix cases: begin[^\n]*-->\n(.*?)<!-- toolmatrix cases: end -->", page, re.S)
    assert found, "docs/cases.md has no generated case table between its markers"
    assert found.group(1) == table([data_root() / "cases"]), "docs/cases.md's case table is stale: paste `toolmatrix cases`"


def _judged(case_id: str, model_id: str, arguments: str) -> tuple[str, str]:
    """(verdict, reason) of one non-streamed answer calling get_weather, on llama.cpp with the model given."""
    case = CASES[case_id]
    body = {"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "The user means Paris.",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]}}]}
    checks = run_checks(CheckInput(case, Exchange("nonstream", {}, 200, body), get_family("hermes"), case.expect))
    gaps = load_engines()["llamacpp"].pair_unsupported(load_models()[model_id])
    decision = judge(checks, gaps, case.features)
    return decision.verdict.value, decision.reason


def test_the_registry_says_which_models_do_not_think():
    models = load_models()
    assert models["qwen2.5-coder-0.5b"].unsupported[REASONING] == NOT_THINKING
    assert REASONING not in models["qwen3"].unsupported  # reasoning: qwen3


def test_reasoning_case_is_unsupported_on_a_model_that_does_not_think():
    assert REASONING in CASES["reasoning.call_after_thinking"].features
    right, wrong = '{"city": "Paris"}', '{"city": "Lyon"}'
    assert _judged("reasoning.call_after_thinking", "qwen3", right) == ("pass", "")
    assert _judged("reasoning.call_after_thinking", "qwen3", wrong)[0] == "fail"
    # Even a right answer proves nothing about thinking from a model that does not think.
    assert _judged("reasoning.call_after_thinking", "qwen2.5-coder-0.5b", right) == \
        ("unsupported", f"reasoning: {NOT_THINKING}")
    verdict, reason = _judged("reasoning.call_after_thinking", "qwen2.5-coder-0.5b", wrong)
    assert verdict == "unsupported" and reason.startswith(f"reasoning: {NOT_THINKING} (expected_calls:")


def test_cases_that_do_not_require_reasoning_are_judged_on_every_model():
    assert _judged("single.get_weather_paris", "qwen2.5-coder-0.5b", '{"city": "Paris"}') == ("pass", "")

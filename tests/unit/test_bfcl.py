"""BFCL's data, converted by toolmatrix.library.bfcl: the real bfcl-eval package's files, loaded and judged by the real
case loader and checks.

bfcl-eval is installed data-only (``pip install --no-deps``, .ci/run); without it these skip, unless
TOOLMATRIX_REQUIRE_ENGINES=1 (CI) makes its absence a failure.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from pathlib import Path

import pytest
import tomllib

from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CheckInput, run_checks
from toolmatrix.library import bfcl
from toolmatrix.library.cases import Case, load_cases
from toolmatrix.wire.exchange import Exchange

ROOT = Path(__file__).parents[2]
# Cases per category in bfcl-eval 2026.3.23 (its data files' lines); a new pin changes them on purpose.
COUNTS = {"simple": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200, "irrelevance": 240,
          "live_simple": 258, "live_multiple": 1053, "live_parallel": 16, "live_parallel_multiple": 24,
          "live_irrelevance": 884, "live_relevance": 16}


def require_bfcl() -> None:
    try:
        bfcl.data_dir()
    except bfcl.BfclUnavailable as exc:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, list[Case]]:
    """Every category written as a case file and loaded back by the loader, schema checks included."""
    require_bfcl()
    folder = tmp_path_factory.mktemp("bfcl")
    out = {}
    for category in bfcl.CATEGORIES:
        path = folder / f"{category}.yaml"
        bfcl.write_case_file(category, path)
        out[category] = load_cases([path])
    return out


def answer(case: Case, *calls: tuple[str, dict]) -> CheckInput:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}
    body = {"choices": [{"message": message, "finish_reason": "tool_calls" if calls else "stop"}]}
    return CheckInput(case, Exchange("nonstream", {}, 200, body), get_family("hermes"), case.expect)


def passes(case: Case, *calls: tuple[str, dict]) -> bool:
    """Every check passes on an answer with these calls (the checks the suite runs on each exchange)."""
    return not [r for r in run_checks(answer(case, *calls)) if r.failed]


def test_the_pin_is_the_installed_version_everywhere():
    require_bfcl()
    assert importlib.metadata.version("bfcl-eval") == bfcl.BFCL_EVAL
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["bfcl"] == [f"bfcl-eval=={bfcl.BFCL_EVAL}"]
    assert bfcl.INSTALL in (ROOT / ".ci" / "run").read_text()


def test_every_category_converts_with_its_count(converted):
    assert {c: len(cases) for c, cases in converted.items()} == COUNTS
    for category, cases in converted.items():
        assert {c.category for c in cases} == {f"bfcl_{category}"}
        assert all(c.id.startswith(f"bfcl_{category}.") for c in cases)


def test_the_table_counts_what_converts(converted):
    table = bfcl.category_table()
    for category, cases in converted.items():
        assert f"| `bfcl:{category}` |" in table and f"| {len(cases)} |" in table


def test_the_docs_carry_the_generated_table():
    require_bfcl()
    page = (ROOT / "docs" / "cases.md").read_text()
    marker = "<!-- toolmatrix bfcl-categories: "
    found = re.search(re.escape(marker) + r"begin[^\n]*-->\n(.*?)" + re.escape(marker + "end -->"), page, re.S)
    assert found, "docs/cases.md has no generated BFCL table between its markers"
    assert found.group(1) == bfcl.category_table() + "\n", "docs/cases.md's BFCL table is stale: toolmatrix bfcl-categories"


def test_no_bfcl_type_survives(converted):
    """Every tool schema is JSON Schema (the loader checked that); none keeps BFCL's own type words."""
    text = json.dumps([t for cases in converted.values() for c in cases for t in c.tools])
    for word in ("dict", "float", "tuple", "any"):
        assert f'"type": "{word}"' not in text
    assert '"optional": true' not in text


def test_irrelevance_expects_no_call_and_relevance_some_call(converted):
    for category in ("irrelevance", "live_irrelevance"):
        assert all(c.expect.no_call for c in converted[category])
    case = converted["irrelevance"][0]
    assert passes(case) and not passes(case, (case.tool_names[0], {"weight": 70, "height": 1.8}))
    assert all(c.expect.any_call for c in converted["live_relevance"])


def test_accepted_values_pass_and_others_fail(converted):
    """simple_python_0: base [10], height [5], unit ["units", ""] (may be left out)."""
    case = next(c for c in converted["simple"] if c.id == "bfcl_simple.simple_python_0")
    name = "calculate_triangle_area"
    assert passes(case, (name, {"base": 10, "height": 5}))
    assert passes(case, (name, {"base": 10, "height": 5, "unit": "units"}))
    assert passes(case, (name, {"base": 10.0, "height": 5, "unit": "Units."}))  # BFCL's standardize_string
    assert not passes(case, (name, {"base": 10, "height": 5, "unit": "cm"}))
    assert not passes(case, (name, {"base": 11, "height": 5}))
    assert not passes(case, (name, {"base": 10}))
    assert not passes(case, (name, {"base": 10, "height": 5}), (name, {"base": 10, "height": 5}))


def test_dotted_names_and_nested_answers(converted):
    """simple_python_1 calls math.factorial (sent as math_factorial, as BFCL does); simple_python_89's conditions
    are a dict answer: either school spelling passes, an unknown key does not; fetch_limit is "" or 0."""
    factorial = next(c for c in converted["simple"] if c.id == "bfcl_simple.simple_python_1")
    assert factorial.tool_names == ("math_factorial",) and passes(factorial, ("math_factorial", {"number": 5}))
    case = next(c for c in converted["simple"] if c.id == "bfcl_simple.simple_python_89")
    args = {"database_name": "StudentDB", "table_name": "students",
            "conditions": {"department": "science", "school": "Bluebird HS"}}
    assert passes(case, ("db_fetch_records", args))
    assert passes(case, ("db_fetch_records", {**args, "fetch_limit": 0}))
    assert not passes(case, ("db_fetch_records", {**args, "fetch_limit": 10}))
    assert not passes(case, ("db_fetch_records", {**args, "conditions": {**args["conditions"], "grade": "9"}}))
    assert not passes(case, ("db_fetch_records", {**args, "conditions": {"department": "Science"}}))


def test_parallel_calls_match_in_any_order(converted):
    """parallel_0: spotify.play for Taylor Swift 20 and Maroon 5 15."""
    case = next(c for c in converted["parallel"] if c.id == "bfcl_parallel.parallel_0")
    swift, maroon = ("spotify_play", {"artist": "Taylor Swift", "duration": 20}), ("spotify_play", {"artist": "Maroon 5", "duration": 15})
    assert passes(case, swift, maroon) and passes(case, maroon, swift)
    assert not passes(case, swift) and not passes(case, swift, ("spotify_play", {"artist": "Maroon 5", "duration": 20}))


def test_gorilla_types_become_json_schema():
    doc = {"type": "dict", "required": ["xs"], "properties": {
        "xs": {"type": "tuple", "items": {"type": "float"}, "optional": True},
        "anything": {"type": "any", "required": True},
        "tags": {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"]},
        "count": {"type": "integer", "enum": ["1", "dontcare"]},
    }}
    assert bfcl.json_schema(doc) == {"type": "object", "required": ["xs"], "properties": {
        "xs": {"type": "array", "items": {"type": "number"}},
        "anything": {},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "count": {"type": "integer"},
    }}
    with pytest.raises(ValueError, match="unknown BFCL type 'HashMap'"):
        bfcl.json_schema({"type": "HashMap"}, "f")


def test_unknown_category_and_missing_package_are_one_line(monkeypatch):
    with pytest.raises(bfcl.BfclUnavailable, match="unknown BFCL category 'nope'; known: simple, multiple"):
        bfcl.case_source("bfcl:nope")
    assert bfcl.case_source("cases/single.yaml") == Path("cases/single.yaml")

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(bfcl.BfclUnavailable, match=f"bfcl-eval is not installed.*{bfcl.INSTALL}"):
        bfcl.case_source("bfcl:simple")

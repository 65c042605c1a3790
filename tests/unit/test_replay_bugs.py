"""Bug fixtures (toolmatrix.replay.bugs): the ``bug`` object's schema and checks, the expected verdict per version,
the versions an install lays over, and the committed file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.replay.adapters import Adapter
from toolmatrix.replay.bugs import MODES, Bug, default_file, load_bugs, versions_to_install
from toolmatrix.replay.fixtures import FixtureError

BUG = {"repo": "sgl-project/sglang", "issue": 18102, "engine": "sglang", "broken": "0.5.9", "fixed": "0.5.10"}
GOOD = {"id": "b.1", "family": "hermes", "model": "qwen2.5", "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
        "expected": {"tool_calls": [{"name": "f", "arguments": {}}], "content": None, "reasoning": None}, "bug": BUG}


def _write(tmp_path: Path, *fixtures: dict) -> Path:
    path = tmp_path / "bugs.jsonl"
    path.write_text("".join(json.dumps(f) + "\n" for f in fixtures), encoding="utf-8")
    return path


def test_a_good_bug_fixture_loads_with_every_mode_by_default(tmp_path: Path) -> None:
    ((fixture, bug),) = load_bugs(_write(tmp_path, GOOD))
    assert fixture.id == "b.1" and bug.label == "sgl-project/sglang#18102"
    assert bug.chunkings == MODES and bug.fixed == "0.5.10"


@pytest.mark.parametrize(("change", "problem"), [
    ({"issue": "18102"}, "$.bug.issue: '18102' is not of type 'integer'"),
    ({"repo": "sglang"}, "$.bug.repo: 'sglang' does not match"),
    ({"engine": "ollama"}, "$.bug.engine: 'ollama' has no replay adapter; known: "),
    ({"broken": "main"}, "$.bug.broken: 'main' is not a version"),
    ({"fixed": "0.5.9"}, "$.bug.fixed: 0.5.9 is not after broken 0.5.9"),
    ({"chunkings": ["bytes"]}, "$.bug.chunkings[0]: 'bytes' is not one of"),
    ({"fixed_in": "0.5.10"}, "$.bug: unknown field(s) ('fixed_in' was unexpected)"),
])
def test_a_bad_bug_field_is_named_by_file_line_and_field(tmp_path: Path, change: dict, problem: str) -> None:
    bad = {**GOOD, "id": "b.2", "bug": {**BUG, **change}}
    path = _write(tmp_path, GOOD, bad)
    with pytest.raises(FixtureError) as caught:
        load_bugs(path)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(f"{path}:2: {problem}"), caught.value.problems


def test_a_fixture_without_a_bug_is_refused_in_a_bug_file(tmp_path: Path) -> None:
    plain = {k: v for k, v in GOOD.items() if k != "bug"}
    path = _write(tmp_path, {**plain, "id": "b.0"}, GOOD)
    with pytest.raises(FixtureError) as caught:
        load_bugs(path)
    assert caught.value.problems == (f"{path}:1: $.bug: required in a bug fixture file: "
                                     "{repo, issue, engine, broken, fixed}",)


def test_expected_verdict_fails_before_the_fix_and_everywhere_while_open() -> None:
    fixed = Bug("o/r", 1, "sglang", "0.5.9", "0.5.10")
    assert [fixed.expected(v) for v in ("0.5.3", "0.5.9", "0.5.10", "0.5.23")] == ["fail", "fail", "pass", "pass"]
    assert Bug("o/r", 1, "sglang", "0.5.9", None).expected("0.5.23") == "fail"


def test_install_lays_over_only_the_versions_that_are_not_pinned(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(Adapter, "version", property(lambda adapter: "0.5.23"))
    open_bug = {**GOOD, "id": "b.2", "bug": {**BUG, "broken": "0.5.23", "fixed": None}}
    assert versions_to_install(load_bugs(_write(tmp_path, GOOD, open_bug))) == ["sglang@0.5.9", "sglang@0.5.10"]


def test_the_committed_bug_file_holds_ten_distinct_reports() -> None:
    bugs = load_bugs(default_file())
    assert len({bug.label for _, bug in bugs}) >= 10
    assert all(fixture.source.startswith("https://github.com/") for fixture, _ in bugs)

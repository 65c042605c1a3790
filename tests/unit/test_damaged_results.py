"""Damaged results are unusable, said in one line naming the file, never half read and never a traceback.

A results.jsonl cut short at a line boundary, a case x mode recorded twice with two verdicts, a record holding a
lone surrogate or nested 100,000 deep: the reader refuses each with a ResultsError, the matrix skips the run with
that reason, and the gate exits 2 (input error), never 1 (which means a regression).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from tests.helpers_results import suite, write_results
from toolmatrix.cli import main
from toolmatrix.matrix import build_matrix
from toolmatrix.records import ResultsError, check_results, read_outcomes, read_records, read_run_info
from toolmatrix.report.gate import EXIT_INPUT

VERDICTS = {"single.a": "pass", "single.b": "pass/fail", "parallel.c": "fail", "parallel.d": "pass"}


def _lines(directory: Path) -> list[str]:
    return (directory / "results.jsonl").read_text(encoding="utf-8").splitlines()


def _rewrite(directory: Path, lines: list[str]) -> None:
    (directory / "results.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def truncated(directory: Path) -> None:
    """The last three lines lost, at a line boundary: every line left is a valid record."""
    _rewrite(directory, _lines(directory)[:-3])


def duplicated(directory: Path) -> None:
    """Line 7 (parallel.d, nonstream, pass) recorded again as a failure, on line 4 in place of another failure:
    the counts per verdict still match run.json's."""
    lines = _lines(directory)
    again = json.loads(lines[6])
    again.update(verdict="fail", blame="engine", reason="args_object: broken")
    again["checks"][1].update(outcome="fail", blame="engine", detail="broken")
    lines[3] = json.dumps(again)
    _rewrite(directory, lines)


def lone_surrogate(directory: Path) -> None:
    lines = _lines(directory)
    lines[2] = lines[2].replace('"reason": "', '"reason": "\\ud800', 1)
    _rewrite(directory, lines)


def deep(directory: Path) -> None:
    lines = _lines(directory)
    record = json.loads(lines[0])
    record["response"] = "@"
    lines[0] = json.dumps(record).replace('"response": "@"', '"response": ' + "[" * 100_000 + "]" * 100_000)
    _rewrite(directory, lines)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncated, r"results\.jsonl: 5 records \(fail 2, pass 3\), but .*run\.json counts 8 "
                             r"\(fail 3, pass 5\)"),
    "duplicated": (duplicated, r"results\.jsonl:7: case 'parallel\.d' \[nonstream\] recorded twice, on lines 4 and 7"),
    "lone-surrogate": (lone_surrogate, r"results\.jsonl:3: not JSON: lone surrogate '\\ud800'"),
    "deep": (deep, r"results\.jsonl:1: not JSON: nested deeper than 256 levels"),
}


@pytest.fixture(params=sorted(DAMAGE))
def damaged(request, tmp_path) -> tuple[Path, str]:
    """A results directory of 8 records, damaged one way; and the one-line reason expected for it."""
    directory = write_results(tmp_path / "damaged", suite(VERDICTS), run_id="now", started="2026-02-01T10:00:00+00:00")
    damage, expected = DAMAGE[request.param]
    damage(directory)
    return directory, expected


def test_the_reader_refuses_damaged_results_in_one_line(damaged):
    directory, expected = damaged
    for read in (lambda: read_outcomes(read_run_info(directory)), lambda: list(read_records(directory))):
        with pytest.raises(ResultsError) as raised:
            read()
        assert re.search(expected, str(raised.value)), str(raised.value)
        assert "\n" not in str(raised.value)


def test_check_results_names_the_damage(damaged):
    directory, expected = damaged
    problems = check_results(directory)
    assert len(problems) == 1 and re.search(expected, problems[0]), problems


def test_the_matrix_skips_a_damaged_run_and_strict_exits_2(damaged, tmp_path, capsys):
    directory, expected = damaged
    good = write_results(tmp_path / "good", suite(VERDICTS), engine="e2")
    report = build_matrix([good, directory], tmp_path / "out")
    assert [c.path for c in report.cells] == [str(good)]
    (skipped,) = report.skipped
    assert skipped.path == str(directory) and re.search(expected, skipped.reason), skipped.reason
    assert main(["matrix", "build", str(good), str(directory), "-o", str(tmp_path / "out"), "--strict"]) == 2
    assert re.search(expected, capsys.readouterr().err)


@pytest.mark.parametrize("role", ["baseline", "results"])
def test_the_gate_calls_damaged_results_an_input_error_not_a_regression(damaged, tmp_path, role, capsys):
    directory, expected = damaged
    sound = write_results(tmp_path / "sound", suite(VERDICTS), run_id="base")
    baseline, results = (directory, sound) if role == "baseline" else (sound, directory)
    assert main(["gate", "--baseline", str(baseline), "--results", str(results)]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"toolmatrix gate: {role}: ") and re.search(expected, err), err
    assert "Traceback" not in err


def test_a_record_as_deep_as_a_chat_body_needs_still_reads(tmp_path):
    """The depth limit is far above what a record holds: a response 250 levels deep reads."""
    directory = write_results(tmp_path / "r", suite({"single.a": "pass"}))
    lines = _lines(directory)
    record = json.loads(lines[0])
    record["response"] = "@"
    lines[0] = json.dumps(record).replace('"response": "@"', '"response": ' + "[" * 250 + "]" * 250)
    _rewrite(directory, lines)
    assert check_results(directory) == [] and len(list(read_records(directory))) == 2


def _nest_response(directory: Path, levels: int) -> None:
    """Line 1's response replaced by a list nested ``levels`` deep (the record itself is one level more)."""
    lines = _lines(directory)
    record = json.loads(lines[0])
    record["response"] = "@"
    lines[0] = json.dumps(record).replace('"response": "@"', '"response": ' + "[" * levels + "]" * levels)
    _rewrite(directory, lines)


def test_the_depth_limit_is_exact(tmp_path):
    """256 levels read, 257 do not: the record's own level counts."""
    at_limit = write_results(tmp_path / "at", suite({"single.a": "pass"}))
    _nest_response(at_limit, 255)
    assert check_results(at_limit) == []
    over = write_results(tmp_path / "over", suite({"single.a": "pass"}))
    _nest_response(over, 256)
    assert check_results(over) == [f"{over / 'results.jsonl'}:1: not JSON: nested deeper than 256 levels"]


def _edit_run(directory: Path, **fields) -> None:
    run = json.loads((directory / "run.json").read_text(encoding="utf-8"))
    (directory / "run.json").write_text(json.dumps({**run, **fields}), encoding="utf-8")


def test_a_run_without_counts_is_not_compared(tmp_path):
    """Runs written before run.json counted records read as they are, even cut short."""
    directory = write_results(tmp_path / "old", suite(VERDICTS))
    truncated(directory)
    _edit_run(directory, counts={})
    assert check_results(directory) == [] and len(read_outcomes(read_run_info(directory))) == 5


@pytest.mark.parametrize("status", ["interrupted", "engine_died", "internal_error"])
def test_a_run_that_stopped_early_reads_when_its_counts_match(tmp_path, status):
    """A run that stopped early wrote fewer records, and counted those it wrote (zero counts included)."""
    directory = write_results(tmp_path / "stopped", suite(VERDICTS))
    truncated(directory)
    _edit_run(directory, exit_status=status, counts={"pass": 3, "fail": 2, "unsupported": 0, "error": 0})
    assert check_results(directory) == [] and len(list(read_records(directory))) == 5


def test_check_results_names_every_repeat(tmp_path):
    """A file written twice over: each line of the second copy names the line it repeats."""
    directory = write_results(tmp_path / "twice", suite(VERDICTS))
    lines = _lines(directory)
    _rewrite(directory, lines + lines)
    problems = check_results(directory)
    assert len(problems) == 8 and problems[0].endswith(
        "results.jsonl:9: case 'single.a' [nonstream] recorded twice, on lines 1 and 9"), problems
    assert problems[-1].endswith("results.jsonl:16: case 'parallel.d' [stream] recorded twice, on lines 8 and 16")


@pytest.mark.parametrize("value", ['"\\ud800"', "[" * 100_000 + "]" * 100_000], ids=["lone-surrogate", "deep"])
def test_a_damaged_run_json_is_an_input_error_too(tmp_path, value, capsys):
    directory = write_results(tmp_path / "r", suite(VERDICTS))
    text = (directory / "run.json").read_text(encoding="utf-8")
    (directory / "run.json").write_text(text.replace('"hardware": {', f'"damage": {value}, "hardware": {{', 1))
    with pytest.raises(ResultsError, match=r"run\.json: not readable JSON: (lone surrogate|nested deeper than 256)"):
        read_run_info(directory)
    sound = write_results(tmp_path / "sound", suite(VERDICTS))
    assert main(["gate", "--baseline", str(sound), "--results", str(directory)]) == EXIT_INPUT
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("cut", ["empty", "mid-line"])
def test_the_matrix_of_nothing_usable_exits_2_and_leaves_an_older_page(tmp_path, cut, capsys):
    directory = write_results(tmp_path / "only", suite(VERDICTS))
    records = (directory / "results.jsonl").read_bytes()
    (directory / "results.jsonl").write_bytes(b"" if cut == "empty" else records[: len(records) // 2])
    assert main(["matrix", "build", str(directory), "-o", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()  # no empty page that would pass for a result
    older = tmp_path / "older"
    older.mkdir()
    (older / "index.html").write_text("the last good page")
    assert main(["matrix", "build", str(directory), "-o", str(older)]) == 2
    assert sorted(p.name for p in older.iterdir()) == ["index.html"]
    assert (older / "index.html").read_text() == "the last good page"
    err = capsys.readouterr().err
    assert "skipped: " in err and "no usable results directory among the inputs" in err

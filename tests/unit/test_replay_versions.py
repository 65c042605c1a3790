"""The version table (toolmatrix.replay.versions): pass shares per family and release, releases in version order,
and every record that flipped between adjacent replayed releases, named as a regression or a fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_results import record, write_results
from toolmatrix.cli import main
from toolmatrix.records import ResultsError
from toolmatrix.replay.versions import FIX, REGRESSION, layout, read_sweep, read_versions, table

NO_GEMMA4 = {"gemma4": "sglang gemma4: --tool-call-parser gemma4: not a choice of this release"}


def _release(root: Path, version: str, verdicts: dict[tuple[str, str], str], skipped: dict[str, str]) -> None:
    """A sweep run as replay-sweep writes it: one record per (case, mode), its family the case's first word and a
    reason where it did not pass, and a run.json with the families in ``skipped`` skipped, with their reason."""
    directory = root / f"sglang@{version}"
    records = [{**record(case, verdict, mode=mode, category=f"replay.{case.split('.')[0]}",
                         reason="" if verdict == "pass" else f"{case} {verdict}s at {version}"),
                "replay": {"tier": "replay", "engine": "sglang", "engine_version": version, "parser": "x",
                           "chunking": "none" if mode == "nonstream" else "whole", "family": case.split(".")[0]}}
               for (case, mode), verdict in verdicts.items()]
    write_results(directory, records, model="parser-replay", engine="sglang", run_id=f"replay-sglang-{version}",
                  version=version)
    run = json.loads((directory / "run.json").read_text())
    run["engine"].update(tier="replay", flags=[], skipped_families=skipped)
    (directory / "run.json").write_text(json.dumps(run))


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    _release(tmp_path, "0.5.10", {("hermes.a", "stream"): "pass", ("hermes.b", "stream"): "pass",
                                  ("glm45.a", "nonstream"): "pass"}, NO_GEMMA4)
    _release(tmp_path, "0.5.9", {("hermes.a", "stream"): "fail", ("hermes.b", "stream"): "pass",
                                 ("glm45.a", "nonstream"): "pass"}, NO_GEMMA4)
    cannot = "sglang==0.5.11 does not install here:\nERROR: No matching"
    _release(tmp_path, "0.5.11", {}, dict.fromkeys(("gemma4", "glm45", "hermes"), cannot))
    _release(tmp_path, "0.5.12", {("hermes.a", "stream"): "pass", ("hermes.b", "stream"): "pass",
                                  ("glm45.a", "nonstream"): "error"}, NO_GEMMA4)
    _release(tmp_path, "0.5.13", {("hermes.a", "stream"): "pass", ("hermes.b", "stream"): "pass",
                                  ("glm45.a", "nonstream"): "error", ("gemma4.a", "stream"): "pass"}, {})
    return tmp_path


def test_releases_are_in_version_order_with_each_familys_pass_share(sweep_dir: Path) -> None:
    sweep = read_sweep(sweep_dir)
    columns = sweep.columns["sglang"]
    assert [c.version for c in columns] == ["0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13"]  # 0.5.10 after 0.5.9
    assert [c.share("hermes") for c in columns] == [(1, 2), (2, 2), None, (2, 2), (2, 2)]


def test_flips_between_adjacent_replayed_releases_are_fixes_and_regressions(sweep_dir: Path) -> None:
    flips = read_sweep(sweep_dir).flips("sglang")
    assert [(f.kind, f.before, f.after, f.case_id, f.mode, f.why_was, f.why_now) for f in flips] == [
        (FIX, "0.5.9", "0.5.10", "hermes.a", "stream", "hermes.a fails at 0.5.9", ""),
        # 0.5.11 could not replay: stepped over
        (REGRESSION, "0.5.10", "0.5.12", "glm45.a", "nonstream", "", "glm45.a errors at 0.5.12"),
    ]


def test_the_table_marks_changed_cells_and_names_flipped_records_and_why_a_release_is_missing(sweep_dir: Path) -> None:
    text = table(layout(read_sweep(sweep_dir), str(sweep_dir)))
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:5]}
    assert rows == {"gemma4": ["n/a", "n/a", "n/a", "n/a", "1/1"], "glm45": ["1/1", "1/1", "n/a", "0/1", "v", "0/1"],
                    "hermes": ["1/2", "2/2", "^", "n/a", "2/2", "2/2"]}
    assert "fix 0.5.9 -> 0.5.10 hermes: hermes.a [stream] fail->pass" in text
    assert "regression 0.5.10 -> 0.5.12 glm45: glm45.a [nonstream] pass->error" in text
    assert "0.5.11: cannot replay here: ERROR: No matching" in text
    assert ("first replayed at 0.5.13: gemma4 (before: sglang gemma4: --tool-call-parser gemma4: not a choice of "
            "this release)") in text


def test_a_folder_without_sweep_runs_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ResultsError, match="no ENGINE@VERSION run in it"):
        read_sweep(tmp_path)
    assert main(["replay-versions", str(tmp_path)]) == 2  # an input error, not an empty table
    assert "no ENGINE@VERSION run in it" in capsys.readouterr().err


def test_a_summary_file_holds_the_table_and_each_flipped_records_reasons(sweep_dir: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    """A full sweep is gigabytes of records; its summary is what a snapshot keeps: the same table read back,
    the fixture file it replayed named by hash, and every flipped record with why it failed on each side."""
    fixtures = tmp_path / "fx.jsonl"
    fixtures.write_text("{}\n")
    summary = tmp_path / "out" / "versions.json"
    assert main(["replay-versions", str(sweep_dir), "--write", str(summary), "--fixtures", str(fixtures)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(summary.read_text())
    assert (data["kind"], data["schema_version"], data["fixtures"]["path"]) == ("toolmatrix-versions", 1,
                                                                                 str(fixtures))
    assert len(data["fixtures"]["sha256"]) == 64
    [entry] = read_versions(summary)
    assert entry["source"] == str(summary)
    assert [r for f in entry["flips"] for r in f["records"]] == [
        ["hermes.a", "stream", "fail", "pass", "hermes.a fails at 0.5.9", ""],
        ["glm45.a", "nonstream", "pass", "error", "", "glm45.a errors at 0.5.12"]]
    assert main(["replay-versions", str(summary)]) == 0 and capsys.readouterr().out == printed


def test_a_file_that_is_not_a_summary_is_named(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for name, text, says in [("a.json", "[1]", "not a replay-versions summary"),
                             ("b.json", '{"kind": "toolmatrix-versions", "schema_version": 9}', "schema_version 9"),
                             ("c.json", "{", "not a sweep directory or summary")]:
        (tmp_path / name).write_text(text)
        assert main(["replay-versions", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert str(tmp_path / name) in err and says in err


def test_a_summary_holds_no_machine_path(sweep_dir: Path, tmp_path: Path) -> None:
    """A release that could not start names the worker's traceback: published, it says nothing of the machine."""
    from toolmatrix.serving.registry import cache_dir

    where = f"{cache_dir()}/venvs/sglang-replay/lib/x.py and {Path.home()}/y.py"
    column = sweep_dir / "sglang@0.5.11" / "run.json"
    run = json.loads(column.read_text())
    run["engine"]["skipped_families"] = {"hermes": f"Traceback: File {where}"}
    column.write_text(json.dumps(run))
    summary = tmp_path / "out" / "versions.json"
    assert main(["replay-versions", str(sweep_dir), "--write", str(summary)]) == 0
    text = summary.read_text()
    assert "{cache}/venvs/sglang-replay/lib/x.py and ~/y.py" in text and str(Path.home()) not in text

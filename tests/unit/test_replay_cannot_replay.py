"""Every engine is a column of the replay table: an engine without a replay adapter carries its measured reason
(``replay.cannot_replay``), and ``toolmatrix replay`` writes that column with the reason on every family."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.unit.test_matrix import page_data
from toolmatrix.cli import main
from toolmatrix.matrix import build_matrix
from toolmatrix.matrix.page import md_text
from toolmatrix.records import read_records
from toolmatrix.replay.adapters import replay_engines
from toolmatrix.replay.fixtures import load_fixtures
from toolmatrix.serving.registry import data_root, load_engines

FIXTURES = data_root() / "results" / "replay" / "fixtures.jsonl"


def test_every_engine_spec_has_a_replay_adapter_or_a_measured_reason_never_both() -> None:
    specs = load_engines()
    silent = sorted(e for e, s in specs.items() if e not in replay_engines() and s.cannot_replay is None)
    both = sorted(e for e, s in specs.items() if e in replay_engines() and s.cannot_replay is not None)
    assert silent == [], f"no replay adapter and no replay.cannot_replay: {silent}"
    assert both == [], f"a replay adapter and a replay.cannot_replay reason: {both}"
    assert "tgi" in specs and specs["tgi"].cannot_replay.startswith("TGI 3.3.5 has no tool-call text parser")


def test_replay_engine_tgi_writes_its_column_and_the_page_gives_the_reason_on_every_family(tmp_path: Path,
                                                                                         capsys) -> None:
    reason = load_engines()["tgi"].cannot_replay
    families = sorted({f.family for f in load_fixtures(FIXTURES)})
    assert len(families) > 10

    assert main(["replay", "--fixtures", str(FIXTURES), "--results-dir", str(tmp_path / "r"), "--engine", "tgi"]) == 0
    assert "tgi: cannot replay here (tgi.yaml: replay.cannot_replay)" in capsys.readouterr().out
    run = json.loads((tmp_path / "r" / "tgi" / "run.json").read_text())
    assert (run["pair"], run["engine"]["tier"], run["counts"]) == (
        "parser-replay@tgi", "replay", {v: 0 for v in run["counts"]})
    assert run["engine"]["skipped_families"] == {family: reason for family in families}
    assert list(read_records(tmp_path / "r" / "tgi")) == []

    build_matrix([tmp_path / "r" / "tgi"], tmp_path / "out")
    replay = page_data(tmp_path / "out")["replay"]
    assert [e["id"] for e in replay["engines"]] == ["tgi"] and replay["families"] == families
    assert [(c["family"], c["reason"]) for c in replay["cells"]] == [(family, reason) for family in families]
    md = (tmp_path / "out" / "matrix.md").read_text()
    rows = re.findall(r"^\| (\S+) +\| not replayed: (.+?) +\|$", md, re.M)
    assert rows == [(md_text(family), md_text(reason, 160)) for family in families]


def test_an_engine_with_neither_adapter_nor_reason_is_refused_by_name(tmp_path: Path, capsys) -> None:
    assert main(["replay", "--fixtures", str(FIXTURES), "--results-dir", str(tmp_path), "--engine", "nosuch"]) == 2
    error = capsys.readouterr().err
    assert "--engine nosuch: no replay adapter and no replay.cannot_replay" in error and "tgi" in error
    assert not (tmp_path / "nosuch").exists()

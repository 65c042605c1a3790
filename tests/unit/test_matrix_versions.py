"""The page's version axis (toolmatrix.matrix.versions): a sweep folder given to ``matrix build`` gives, per engine,
families x releases with each family's pass share, each change since the release before pointing at the records
that flipped, in matrix.json, matrix.md and the page's data; a folder of live runs gives none."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers_results import suite, write_replay_results, write_results
from toolmatrix.matrix import build_matrix

SCRIPT = "<script>alert(1)</script>"


def sweep(root: Path) -> Path:
    """sglang at 0.5.9 and 0.5.10: hermes regresses, glm45 is fixed, qwen3_coder holds, gemma4 arrives."""
    write_replay_results(root / "sglang@0.5.10", "sglang",
                         {"hermes": "fail", "glm45": "pass", "qwen3_coder": "pass", "gemma4": "pass"}, {},
                         version="0.5.10")
    write_replay_results(root / "sglang@0.5.9", "sglang", {"hermes": "pass", "glm45": "fail", "qwen3_coder": "pass"},
                         {"gemma4": f"not a choice of this release {SCRIPT}"}, version="0.5.9")
    return root


def test_a_sweep_folder_gives_families_x_releases_with_each_flip_and_its_records(tmp_path: Path) -> None:
    report = build_matrix([sweep(tmp_path / "sweep")], tmp_path / "out")
    assert not report.skipped
    [entry] = json.loads((tmp_path / "out" / "matrix.json").read_text())["versions"]
    assert (entry["engine"], entry["source"], entry["releases"]) == ("sglang", "../sweep", ["0.5.9", "0.5.10"])
    assert entry["families"] == ["gemma4", "glm45", "hermes", "qwen3_coder"]
    flips = [(f["kind"], f["before"], f["after"], f["family"], f["records"]) for f in entry["flips"]]
    assert [(kind, before, after, family, [r[:4] for r in records]) for kind, before, after, family, records
            in flips] == [("fix", "0.5.9", "0.5.10", "glm45", [["glm45.case", "nonstream", "fail", "pass"],
                                                               ["glm45.case", "stream:token", "fail", "pass"]]),
                          ("regression", "0.5.9", "0.5.10", "hermes", [["hermes.case", "nonstream", "pass", "fail"],
                                                                       ["hermes.case", "stream:token", "pass", "fail"]])]
    cells = entry["cells"]
    assert cells["hermes"] == [{"pass": 2, "total": 2, "rate": 1.0, "flips": []},
                               {"pass": 0, "total": 2, "rate": 0.0, "flips": [1]}]
    assert cells["glm45"][1]["flips"] == [0] and cells["qwen3_coder"][1]["flips"] == []
    assert cells["gemma4"][0] == {"reason": f"not a choice of this release {SCRIPT}"}
    assert entry["arrivals"] == [{"family": "gemma4", "version": "0.5.10",
                                  "reason": f"not a choice of this release {SCRIPT}"}]

    page = (tmp_path / "out" / "index.html").read_text()
    assert SCRIPT not in page and "not a choice of this release \\u003cscript\\u003e" in page
    md = (tmp_path / "out" / "matrix.md").read_text()
    section = md[md.index("## Parser replay across releases"):]
    rows = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")]
                                              for line in section.splitlines() if line.startswith("| "))}
    assert rows["hermes"] == ["100% (2/2)", "0% (0/2) ▼"] and rows["glm45"] == ["0% (0/2)", "100% (2/2) ▲"]
    assert rows["gemma4"][0].startswith("n/a: not a choice of this release &lt;script&gt;")
    assert "- regression 0.5.9 -> 0.5.10 hermes (2): hermes.case [nonstream] pass->fail, " in md
    assert SCRIPT not in md


def test_a_folder_of_live_runs_or_of_one_release_has_no_version_axis(tmp_path: Path) -> None:
    write_results(tmp_path / "live" / "m1@e1", suite({"single.a": "pass"}))
    write_replay_results(tmp_path / "live" / "sglang", "sglang", {"hermes": "pass"}, {})
    build_matrix([tmp_path / "live"], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "matrix.json").read_text())["versions"] == []


def test_a_summary_alone_builds_the_version_axis_page(tmp_path: Path, capsys) -> None:
    """``matrix build --versions FILE`` with no results directory: the page of a snapshot that keeps only the
    sweep's summary, the same axis as the sweep folder gives, its source the summary file."""
    from toolmatrix.cli import main

    summary = tmp_path / "snap" / "versions.json"
    assert main(["replay-versions", str(sweep(tmp_path / "sweep")), "--write", str(summary)]) == 0
    assert main(["matrix", "build", "--versions", str(summary), "-o", str(tmp_path / "out")]) == 0
    [entry] = json.loads((tmp_path / "out" / "matrix.json").read_text())["versions"]
    assert (entry["source"], entry["releases"]) == ("../snap/versions.json", ["0.5.9", "0.5.10"])
    assert [f["kind"] for f in entry["flips"]] == ["fix", "regression"]
    assert "## Parser replay across releases" in (tmp_path / "out" / "matrix.md").read_text()
    capsys.readouterr()
    assert main(["matrix", "build", "-o", str(tmp_path / "none")]) == 2
    assert "name a RESULTS directory or a --versions FILE" in capsys.readouterr().err
    assert main(["matrix", "build", "--versions", str(tmp_path / "nope.json"), "-o", str(tmp_path / "none")]) == 2
    assert "nope.json: not a sweep of releases" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_the_page_holds_the_first_records_of_a_big_flip_and_matrix_json_all(tmp_path: Path) -> None:
    """A release that rewrites a parser flips thousands of records: the page (one file) keeps the first 25 of
    each flip and says how many there are; matrix.json keeps every one."""
    records = [[f"hermes.c{i}", "nonstream", "pass", "fail", "", "why"] for i in range(30)]
    entry = {"engine": "sglang", "source": "x", "releases": ["1", "2"], "families": ["hermes"],
             "cells": {"hermes": [{"pass": 30, "total": 30, "rate": 1.0, "flips": []},
                                  {"pass": 0, "total": 30, "rate": 0.0, "flips": [0]}]},
             "flips": [{"before": "1", "after": "2", "kind": "regression", "family": "hermes", "count": 30,
                        "records": records}], "arrivals": []}
    summary = tmp_path / "versions.json"
    summary.write_text(json.dumps({"kind": "toolmatrix-versions", "schema_version": 1, "engines": [entry]}))
    build_matrix([], tmp_path / "out", versions=[summary])
    [kept] = json.loads((tmp_path / "out" / "matrix.json").read_text())["versions"]
    assert kept["flips"][0]["records"] == records
    page = (tmp_path / "out" / "index.html").read_text()
    assert '"hermes.c24"' in page and '"hermes.c25"' not in page and '"count":30' in page


def page_data(out: Path) -> dict:
    html = (out / "index.html").read_text()
    return json.loads(re.search(r'<script type="application/json" id="toolmatrix-data">(.*?)</script>', html,
                                re.S).group(1))


def test_a_page_of_releases_says_what_it_holds_and_nothing_of_a_live_matrix(tmp_path: Path) -> None:
    """A page of the version axis alone opens with what it holds (engines, releases, flips), not "0 cells", an empty
    model x engine table and the live legend (pass@1, conformance, surfaces); its engines are named without the
    file their sweep was read from."""
    from toolmatrix.cli import main

    summary = tmp_path / "snap" / "versions.json"
    assert main(["replay-versions", str(sweep(tmp_path / "sweep")), "--write", str(summary)]) == 0
    build_matrix([], tmp_path / "out", versions=[summary])
    holds = "1 engine's parser across 2 releases, 2 groups of flipped records (1 regression, 1 fix)"
    data = page_data(tmp_path / "out")
    assert data["holds"] == holds and data["models"] == [] and data["cells"] == []  # the script hides the live parts
    assert data["heading"] == "toolmatrix"  # its title, no "compatibility matrix" of pairs it does not hold
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert md.startswith("# toolmatrix\n")
    assert md.splitlines()[2].endswith(f" by toolmatrix {data['toolmatrix_version']}: {holds}.")
    assert "model \\ engine" not in md and "Pass rate" not in md and "pass@1" not in md
    assert "versions.json" not in md and "### sglang: 2 releases" in md
    assert "| family \\ release " in md


def test_the_committed_page_of_releases_opens_with_what_it_holds() -> None:
    """results/versions/matrix, as `matrix build --versions` writes it (docs/published-results.md)."""
    built = Path(__file__).parents[2] / "results" / "versions" / "matrix"
    data = page_data(built)
    assert re.fullmatch(r"6 engines' parsers across 3\d releases, \d+ groups of flipped records "
                        r"\(\d+ regressions?, \d+ fix(es)?\)", data["holds"]), data["holds"]
    assert not data["models"] and not data["cells"]
    md = (built / "matrix.md").read_text()
    assert md.startswith("# toolmatrix: engines' parsers across releases (replay)\n")
    assert md.splitlines()[2].endswith(f": {data['holds']}.")
    assert "model \\ engine" not in md and "Pass rate" not in md and "(../versions.json)" not in md
    assert re.findall(r"^### (\S+): \d+ releases$", md, re.M) == [e["engine"] for e in data["versions"]]

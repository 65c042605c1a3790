"""The page's version axis (toolmatrix.matrix.versions): a sweep folder given to ``matrix build`` gives, per engine,
families x releases with each family's pass share, each change since the release before pointing at the records
that flipped, in matrix.json, matrix.md and the page's data; a folder of live runs gives none."""

from __future__ import annotations

import json
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
    assert flips == [("fix", "0.5.9", "0.5.10", "glm45", [["glm45.case", "nonstream", "fail", "pass"],
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

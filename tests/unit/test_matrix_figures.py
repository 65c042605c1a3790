"""toolmatrix.matrix.figures: a share's colour is that of the figure printed (205 of 414 prints "50%" and is amber,
as the legend says of >= 50 %), and what nothing of could be judged reads "unsupported", grey, in every table."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from tests.helpers_results import suite, write_results
from toolmatrix.matrix import build_matrix
from toolmatrix.matrix.figures import LEVELS, Figure, figure, percent, whole_percent

# 205 of 414 passing, as llamacpp's Chat Completions cell of the CPU snapshot: 102 cases pass in both modes, one
# in the non-streamed one only, 104 fail in both.
HALF = {**{f"single.p{n}": "pass" for n in range(102)}, "single.half": "pass/fail",
        **{f"single.f{n}": "fail" for n in range(104)}}


def md_rows(md: str, header: str) -> dict[str, list[str]]:
    """The rows of the Markdown table whose first header cell is ``header``, by their first cell."""
    table = md[md.index(f"| {header} "):].split("\n\n")[0].splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    return {row[0]: row[1:] for row in cells[2:]}


def test_205_of_414_prints_50_percent_and_is_amber():
    assert 205 / 414 < 0.5 and figure(205 / 414) == Figure("50%", "warn")
    assert (percent(205 / 414), figure(205 / 414).level) == ("50%", "warn")
    assert figure(204 / 414) == Figure("49%", "bad")  # 49.3 %: printed 49, red


def test_a_half_rounds_up_as_the_page_rounds_not_to_even():
    # Python's f"{12.5:.0f}" is "12"; the page's Math.round(12.5) is 13: matrix.md and the page print one figure.
    assert [whole_percent(r) for r in (0.125, 0.005, 0.945, 0.995, 0.0, 1.0)] == [13, 1, 95, 100, 0, 100]
    assert [percent(r) for r in (0.125, 0.945, 0.795)] == ["13%", "95%", "80%"]


def test_each_level_starts_at_the_whole_percent_its_legend_names():
    assert LEVELS == (("good", 95), ("ok", 80), ("warn", 50), ("bad", 0))
    assert [figure(r).level for r in (1.0, 0.95, 0.9449, 0.8, 0.7949, 0.5, 0.4949, 0.0)] == [
        "good", "good", "ok", "ok", "warn", "warn", "bad", "bad"]


def test_nothing_judged_is_grey_unsupported_and_no_rate_is_grey_dash():
    assert figure(0.0, unsupported=True) == Figure("unsupported", "none")
    assert figure(None) == Figure("-", "none") and percent(None) == "-"


def test_the_page_colours_from_the_thresholds_its_data_carries_and_draws_its_legends_from_them():
    """One definition: the page's script reads LEVELS from its data; no threshold is written in the template."""
    template = resources.files("toolmatrix.matrix").joinpath("templates/index.html").read_text(encoding="utf-8")
    assert "DATA.levels" in template and "Math.round(rate * 100)" in template
    assert not re.search(r"&ge;|\u2265 ?\d|>= ?0?\.\d|rate >= ", template), "a threshold written twice"


def test_matrix_md_prints_205_of_414_as_50_percent_and_an_unjudged_category_as_unsupported(tmp_path: Path):
    write_results(tmp_path / "half", suite(HALF))
    # 24 records of a category the model cannot do (it does not think): nothing judged, beside a judged category
    write_results(tmp_path / "think", suite({**{f"reasoning.r{n}": "unsupported" for n in range(12)},
                                             "single.a": "pass", "single.b": "fail"}),
                  engine="e2", run_id="run-2")
    report = build_matrix([tmp_path], tmp_path / "out")
    assert {c.pair: c.pass_rate for c in report.cells}["m1@e1"] == round(205 / 414, 4)

    md = (tmp_path / "out" / "matrix.md").read_text()
    row = md_rows(md, "model \\ engine")["m1"]
    assert row[0].startswith("50% (205/414), engine ")
    by_category = md_rows(md, "pair")
    assert by_category["m1@e1"][0] == "-" and by_category["m1@e1"][1].startswith("50% (205/414)")
    assert by_category["m1@e2"][0] == "unsupported", "0 judged of 24 unsupported is no 0 %"
    assert by_category["m1@e2"][1].startswith("50% (2/4)")


def test_a_cell_nothing_of_which_was_judged_reads_unsupported_even_with_no_declared_reason(tmp_path: Path):
    write_results(tmp_path / "none", suite({"reasoning.r": "unsupported"}, reason=""))
    build_matrix([tmp_path], tmp_path / "out")
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert md_rows(md, "model \\ engine")["m1"] == ["unsupported (2)"] and "0% (0/2)" not in md

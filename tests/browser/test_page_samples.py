"""A cell of repeated samples (--samples K) in real headless Chromium: pass@1 with its interval, pass^k, the
disagreeing case x mode, and each failing sample named in the detail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser.test_page import CHROMIUM, NO_CHROMIUM, browser, cell, open_page  # noqa: F401 - browser: the fixture
from tests.helpers_results import record, write_results
from toolmatrix.matrix import build_matrix

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


def test_a_sampled_cell_shows_its_interval_pass_hat_k_and_disagreement(browser, tmp_path):  # noqa: F811
    verdicts = {"single.a": ["pass", "pass"], "single.b": ["pass", "fail"]}
    write_results(tmp_path / "r", [{**record(case, verdict, mode=mode), "sample": index}
                                   for case, per_sample in verdicts.items() for mode in ("nonstream", "stream")
                                   for index, verdict in enumerate(per_sample, start=1)])
    build_matrix([tmp_path / "r"], tmp_path / "matrix")
    stats = json.loads((tmp_path / "matrix" / "matrix.json").read_text())["cells"][0]["samples"]
    low, high = (round(100 * v) for v in stats["pass_at_1"]["interval"])
    page = open_page(browser, tmp_path / "matrix" / "index.html")
    m1e1 = cell(page, "m1@e1")
    assert m1e1.locator(".rate").inner_text() == "75%"  # every sample counts: pass@1
    assert m1e1.locator(".samples").inner_text() == (
        f"k=2: pass@1 75% [{low}%\u2013{high}%] \u00b7 pass^k 50% (2/4) \u00b7 2 disagree \u00b7 "
        f"engine 75% [{low}%\u2013{high}%]")
    m1e1.locator("button").click()
    assert "[stream sample 2]" in page.locator("#detail details.case[data-case='single.b']").nth(1).inner_text()
    page.close()


def test_a_cell_of_one_sample_has_no_samples_line(browser, tmp_path):  # noqa: F811
    write_results(tmp_path / "r", [record("single.a"), record("single.a", mode="stream")])
    build_matrix([tmp_path / "r"], tmp_path / "matrix")
    page = open_page(browser, Path(tmp_path / "matrix" / "index.html"))
    assert cell(page, "m1@e1").locator(".samples").count() == 0
    page.close()

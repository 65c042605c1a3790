"""The end-of-run table: both numbers per category, and what evidence moved."""

from toolmatrix.records import Posted
from toolmatrix.report.summary import summary_table


def test_the_table_shows_conformance_and_the_blames_evidence_moved():
    posted = [
        Posted("", "single", "nonstream", "pass", None, True),
        Posted("", "single", "stream", "fail", "engine", False, "obtained", "model"),  # moved by evidence
        Posted("", "single", "nonstream", "fail", "model", True, "not_comparable"),
        Posted("", "parallel", "stream", "error", "infra", None),  # no answer: not judged
    ]
    table = summary_table(posted)
    single = next(line for line in table.splitlines() if line.startswith("| single"))
    assert "| 33%  " in single and "67% (2/3)" in single
    assert "| TOTAL" in table and "67% (2/3)" in table.splitlines()[-2]
    assert table.splitlines()[-1] == ("evidence: 1 not_comparable, 1 obtained; "
                                      "blames it moved from the wire rules': model->engine 1")


def test_no_evidence_line_when_none_was_asked():
    assert "evidence:" not in summary_table([Posted("", "single", "nonstream", "pass", None, True)])

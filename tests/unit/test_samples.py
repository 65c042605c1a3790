"""Repeated samples (--samples K): the Wilson interval, pass^k and disagreement, sample ids, the request of a
sample, records and cells with samples, and the gate's lower-bound threshold."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import toolmatrix
from tests.helpers_results import record, write_results
from toolmatrix.cli import main
from toolmatrix.live.sampling import SAMPLED_TEMPERATURE, Sampling, sample_seed, sample_suffix
from toolmatrix.matrix import build_matrix
from toolmatrix.plugin.keys import ItemKey, item_key
from toolmatrix.records import Outcome, Verdict, check_results, fold, read_records
from toolmatrix.report.gate import EXIT_FAILED, EXIT_PASS, run_gate
from toolmatrix.report.passk import sample_stats, wilson


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (5, 10, 0.2366, 0.7634),  # the textbook case (e.g. Newcombe, Stat. Med. 17, 1998, table I: 0.2366-0.7634)
    (0, 10, 0.0, 0.2775),  # upper = z^2 / (n + z^2)
    (10, 10, 0.7225, 1.0),
    (81, 263, 0.2553, 0.3662),  # Newcombe's 81/263: 0.2553-0.3662
])
def test_wilson_interval_known_values(successes, n, low, high):
    got = wilson(successes, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_needs_cases():
    with pytest.raises(ValueError, match="n must be above 0"):
        wilson(0, 0)


def outcome(verdict: str, conformant: bool | None = True) -> Outcome:
    return Outcome("single", Verdict(verdict), None if verdict == "pass" else "model", "", conformant)


def test_pass_hat_k_and_disagreement_counted_per_case_x_mode():
    groups = {
        ("a", "stream"): [outcome("pass")] * 5,  # all passed
        ("b", "stream"): [outcome("pass"), outcome("fail"), outcome("pass"), outcome("pass"), outcome("pass")],
        ("c", "stream"): [outcome("fail", False)] * 5,  # all failed: no disagreement
        ("d", "stream"): [outcome("error", None), outcome("pass"), outcome("fail"), outcome("fail"), outcome("fail")],
    }
    stats = sample_stats(groups)
    assert stats["samples"] == [5, 5]
    assert stats["pass_hat_k"] == 0.25 and stats["all_passed"] == 1
    assert stats["disagreeing"] == 2
    mean = (1 + 0.8 + 0 + 0.2) / 4
    assert stats["pass_at_1"]["mean"] == mean and stats["pass_at_1"]["n"] == 4
    assert stats["pass_at_1"]["interval"] == [round(v, 4) for v in wilson(mean * 4, 4)]
    # conformance: each case x mode's share of conformant judged samples (d: 4 judged, all conformant)
    assert stats["conformance"]["mean"] == 0.75 and stats["conformance"]["n"] == 4


def test_fold_passes_only_when_every_sample_passed():
    assert fold([outcome("pass")] * 3).verdict is Verdict.PASS
    folded = fold([outcome("pass"), outcome("error", None), outcome("fail", False)])
    assert folded.verdict is Verdict.ERROR and folded.conformant is False
    assert fold([outcome("error", None)]).conformant is None


@pytest.mark.parametrize(("nodeid", "key"), [
    ("suite.py::test_case[single.get_weather_paris-nonstream]", ItemKey("single.get_weather_paris", "nonstream")),
    ("suite.py::test_case[single.get_weather_paris-nonstream-s2]",
     ItemKey("single.get_weather_paris", "nonstream", "chat", 2)),
    ("suite.py::test_case[multi.x-y-stream-s12-responses]@multi.x-y", ItemKey("multi.x-y", "stream", "responses", 12)),
    ("suite.py::test_case[multi.x-stream-messages]", ItemKey("multi.x", "stream", "messages")),
])
def test_item_key_reads_the_sample_only_where_there_is_one(nodeid, key):
    assert item_key(nodeid) == key


def test_one_sample_is_the_suite_as_before():
    one = Sampling()
    assert one.indexes == (None,) and sample_suffix(None) == ""
    assert one.fields("single.a", {"temperature": 0}, None) == {}
    assert Sampling(1, 0.3).fields("single.a", {"temperature": 0}, None) == {"temperature": 0.3}


def test_several_samples_sample_each_with_a_seed_of_its_own():
    five = Sampling(5)
    assert five.indexes == (1, 2, 3, 4, 5) and sample_suffix(2) == "-s2"
    seed = sample_seed("single.a", 2)
    assert five.fields("single.a", {"temperature": 0}, 2) == {"temperature": SAMPLED_TEMPERATURE, "seed": seed}
    assert five.fields("single.a", {"temperature": 0.7}, 3)["temperature"] == 0.7  # the case's own is kept
    assert Sampling(5, 0.2).fields("single.a", {"temperature": 0.7}, 1)["temperature"] == 0.2
    seeds = {sample_seed(case, sample) for case in ("single.a", "single.b") for sample in range(1, 6)}
    assert len(seeds) == 10 and all(0 <= s < 2**31 for s in seeds)  # no two askings share their draws
    assert seed == sample_seed("single.a", 2)  # a rerun asks the same


# -- records, cells and the gate over samples -------------------------------------------------------------------


def sampled(verdicts: dict[str, list[str]], **options) -> list[dict]:
    """Records of ``{case_id: [verdict of sample 1, ...]}`` in both modes, each with its sample index."""
    return [{**record(case_id, verdict, mode=mode, **options), "sample": index}
            for case_id, per_sample in verdicts.items() for mode in ("nonstream", "stream")
            for index, verdict in enumerate(per_sample, start=1)]


SAMPLED = {"single.a": ["pass"] * 3, "single.b": ["pass", "fail", "pass"], "single.c": ["fail"] * 3,
           "parallel.d": ["pass"] * 3}


def test_sampled_records_are_valid_and_old_records_still_are(tmp_path):
    schema = json.loads((Path(toolmatrix.__file__).parent / "schemas" / "record.schema.json").read_text())
    directory = write_results(tmp_path / "r", sampled(SAMPLED) + [record("multi.old")])
    assert check_results(directory) == []
    assert sorted({r.sample for r in read_records(directory)}, key=str) == [1, 2, 3, None]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**record("single.a"), "sample": 0}, schema)


def test_a_sample_recorded_twice_is_refused_but_samples_are_not(tmp_path):
    records = sampled({"single.a": ["pass", "pass"]})
    directory = write_results(tmp_path / "r", [*records, records[0]])
    assert check_results(directory) == [f"{directory / 'results.jsonl'}:5: case 'single.a' [nonstream sample 1] "
                                        f"recorded twice, on lines 1 and 5"]


def test_a_cell_with_samples_shows_pass_at_1_interval_pass_hat_k_and_disagreement(tmp_path):
    write_results(tmp_path / "r", sampled(SAMPLED))
    build_matrix([tmp_path / "r"], tmp_path / "out")
    cell = json.loads((tmp_path / "out" / "matrix.json").read_text())["cells"][0]
    assert cell["total"] == 24 and cell["pass_rate"] == round(16 / 24, 4)  # every sample counts: pass@1
    stats = cell["samples"]
    assert stats["pass_at_1"]["n"] == 8 and stats["pass_at_1"]["mean"] == round(16 / 24, 4)
    assert stats["pass_hat_k"] == 0.5 and stats["all_passed"] == 4 and stats["disagreeing"] == 2
    assert {(f["case_id"], f["mode"], f["sample"]) for f in cell["failures"]} == {
        ("single.b", "nonstream", 2), ("single.b", "stream", 2), *(("single.c", m, s) for m in ("nonstream", "stream")
                                                                    for s in (1, 2, 3))}
    low, high = stats["pass_at_1"]["interval"]
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert (f"k=3: pass@1 67% [{100 * low:.0f}%-{100 * high:.0f}%], pass^k 50% (4/8), 2 disagreeing, "
            f"engine 67% [{100 * low:.0f}%-{100 * high:.0f}%], 8 fail") in md  # the helper blames failures on the engine


def test_a_cell_with_one_sample_has_no_sample_statistics(tmp_path):
    write_results(tmp_path / "r", [record("single.a"), record("single.a", mode="stream")])
    build_matrix([tmp_path / "r"], tmp_path / "out")
    assert "samples" not in json.loads((tmp_path / "out" / "matrix.json").read_text())["cells"][0]
    row = next(line for line in (tmp_path / "out" / "matrix.md").read_text().splitlines() if line.startswith("| m1 "))
    assert row.split("|")[2].strip() == "100% (2/2), engine 100% (2/2)"


def test_gate_reads_a_case_with_a_failing_sample_as_not_passing(tmp_path):
    baseline = write_results(tmp_path / "base", sampled({"single.b": ["pass"] * 3}), run_id="base")
    now = write_results(tmp_path / "now", sampled({"single.b": ["pass", "fail", "pass"]}), run_id="now")
    [report] = run_gate(baseline, now).reports
    assert [r.key for r in report.regressions] == [("single.b", "nonstream"), ("single.b", "stream")]


def test_gate_lower_bound_threshold(tmp_path, capsys):
    baseline = write_results(tmp_path / "base", sampled(SAMPLED), run_id="base")
    now = write_results(tmp_path / "now", sampled(SAMPLED), run_id="now")
    single = sample_stats({(c, m): [outcome(v) for v in SAMPLED[c]] for c in SAMPLED if c.startswith("single.")
                           for m in ("nonstream", "stream")})["pass_at_1"]  # 5/9 over 6 case x mode
    [report] = run_gate(baseline, now, min_pass_lower={"single": 0.2, "parallel": 0.5}).reports
    assert [r.lower for r in report.rates] == [single["interval"][0], round(wilson(2, 2)[0], 4)]
    # single: 0.22 >= 0.2; parallel passed every sample, but 2 case x mode prove no more than 0.34
    assert [r.category for r in report.breaches] == ["parallel"]
    assert main(["gate", "--baseline", str(baseline), "--results", str(now), "--min-pass-lower", "single=0.3"]) \
        == EXIT_FAILED
    out = capsys.readouterr().out
    assert (f"UNDER THRESHOLD single: pass@1 lower bound {100 * single['interval'][0]:.1f}% (pass@1 55.6%, 10/18 "
            f"samples) < 30%") in out
    assert main(["gate", "--baseline", str(baseline), "--results", str(now), "--min-pass-lower", "*=0.33"]) \
        == EXIT_PASS  # 8 case x mode, pass@1 16/24: low end 0.339


def test_the_repro_of_a_sampled_run_asks_the_same_samples(tmp_path):
    directory = write_results(tmp_path / "r", sampled({"single.b": ["pass", "fail"]}))
    run = json.loads((directory / "run.json").read_text())
    (directory / "run.json").write_text(json.dumps({**run, "command": ["pytest", "--samples", "2", "-n", "2"]}))
    build_matrix([directory], tmp_path / "out")
    failure = json.loads((tmp_path / "out" / "matrix.json").read_text())["cells"][0]["failures"][0]
    assert failure["repro"] == "pytest --engine=e1 --model=m1 --samples=2 -k 'single.b and nonstream'"

"""toolmatrix.matrix: merging result directories, history, skipping bad inputs, escaping, the page size cap."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.helpers_results import answer, record, suite, write_replay_results, write_results
from toolmatrix.cli import main
from toolmatrix.matrix import build_matrix
from toolmatrix.matrix.cell import key_flags
from toolmatrix.matrix.detail import expectation_diff, failure_detail
from toolmatrix.matrix.page import embed_json, md_text
from toolmatrix.records import Run, RunEngine, RunModel, repro_command, repro_prefix

DAY1, DAY2, DAY3 = (f"2026-01-0{d}T10:00:00+00:00" for d in (1, 2, 3))


def page_data(out: Path) -> dict:
    html = (out / "index.html").read_text()
    match = re.search(r'<script type="application/json" id="toolmatrix-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def cell_of(out: Path, pair: str, source: str = "matrix.json") -> dict:
    data = json.loads((out / "matrix.json").read_text()) if source == "matrix.json" else page_data(out)
    return next(c for c in data["cells"] if c["pair"] == pair)


def test_two_pairs_make_rows_and_columns_in_all_three_outputs(tmp_path):
    write_results(tmp_path / "a", suite({"single.a": "pass", "single.b": "pass/fail"}), model="m1", engine="e1")
    write_results(tmp_path / "b", suite({"single.a": "pass", "parallel.c": "error"}), model="m2", engine="e2",
                  run_id="run-2", flags=["--port", "1", "--tool-call-parser", "hermes"])

    report = build_matrix([tmp_path / "a", tmp_path / "b"], tmp_path / "out")

    assert [(c.pair, c.total, c.pass_rate) for c in report.cells] == [("m1@e1", 4, 0.75), ("m2@e2", 4, 0.5)]
    assert report.skipped == ()
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "| model \\ engine" in md and "e2 b1234 (--tool-call-parser hermes)" in md
    assert re.search(r"\| m1 +\| 75% \(3/4\), engine 75% \(3/4\), 1 fail +\| - +\|", md)
    data = page_data(tmp_path / "out")
    assert data["models"] == ["m1", "m2"] and [e["id"] for e in data["engines"]] == ["e1", "e2"]
    assert data["categories"] == ["parallel", "single"]
    full = cell_of(tmp_path / "out", "m1@e1")
    # The failure is blamed on the engine: 3 of 4 answers conformant, 2 of 2 streamed.
    assert (full["conformance"], full["conformance_counts"]) == (0.75, {"conformant": 3, "judged": 4})
    assert ["single", "stream", False, 1] in full["conformance_breakdown"]
    assert full["failures"] == [{
        "case_id": "single.b", "category": "single", "mode": "stream", "verdict": "fail", "blame": "engine",
        "reason": "ARGS_NOT_OBJECT: arguments are not an object",
        "repro": "pytest --engine=e1 --model=m1 -k 'single.b and stream and not nonstream'"}]
    details = (tmp_path / "out" / full["details_file"]).read_text().splitlines()
    assert [json.loads(line)["case_id"] for line in details] == ["single.b"]


def test_newest_run_wins_and_the_one_before_gives_the_history(tmp_path):
    write_results(tmp_path / "old", suite({"single.a": "pass"}) + [{"broken": True}], run_id="r0", started=DAY1)
    write_results(tmp_path / "prev", suite({"single.a": "pass", "single.b": "fail", "single.c": "pass"}),
                  run_id="r1", started=DAY2)
    write_results(tmp_path / "new", suite({"single.a": "pass", "single.b": "pass", "single.c": "pass/fail"}),
                  run_id="r2", started=DAY3)

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert (cell.run_id, cell.previous, cell.newly_failing, cell.newly_passing) == ("r2", str(tmp_path / "prev"), 1, 2)
    assert report.superseded == (str(tmp_path / "old"),)  # never read: its broken record is not reported
    assert report.skipped == ()
    changes = cell_of(tmp_path / "out", "m1@e1")["history"]
    assert [(h["case_id"], h["mode"], h["was"], h["now"]) for h in changes["newly_failing"]] == [
        ("single.c", "stream", "pass", "fail")]
    assert [(h["case_id"], h["mode"]) for h in changes["newly_passing"]] == [
        ("single.b", "nonstream"), ("single.b", "stream")]
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "## Changes since the previous run" in md
    assert "- newly failing: single.c \\[stream\\] (pass -> fail)" in md
    assert "- newly passing: single.b \\[nonstream\\] (fail -> pass)" in md


def test_a_broken_newest_run_is_skipped_and_the_next_one_is_shown(tmp_path):
    write_results(tmp_path / "good", suite({"single.a": "pass"}), run_id="r1", started=DAY1)
    bad = write_results(tmp_path / "bad", suite({"single.a": "pass"}), run_id="r2", started=DAY2)
    with (bad / "results.jsonl").open("a") as handle:
        handle.write("{not json\n")

    report = build_matrix([tmp_path], tmp_path / "out")

    assert [c.run_id for c in report.cells] == ["r1"]
    assert [s.path for s in report.skipped] == [str(bad)]
    assert f"{bad}/results.jsonl:3: not JSON" in report.skipped[0].reason


def _bad_record(directory: Path) -> None:
    write_results(directory, [{**record("single.a"), "verdict": "maybe"}])


def _mixed_run(directory: Path) -> None:
    write_results(directory, suite({"single.a": "pass"}))
    with (directory / "results.jsonl").open("a") as handle:
        handle.write(json.dumps({**record("single.b"), "run_id": "another-run"}) + "\n")


def _partial(directory: Path) -> None:
    directory.mkdir()
    (directory / "results.jsonl.partial").write_text(json.dumps(record("single.a")) + "\n")


def _bad_run_json(directory: Path) -> None:
    write_results(directory, suite({"single.a": "pass"}))
    run = json.loads((directory / "run.json").read_text())
    del run["engine"]["id"]
    (directory / "run.json").write_text(json.dumps(run))


def _foreign(directory: Path) -> None:
    directory.mkdir()
    (directory / "notes.txt").write_text("hello")


@pytest.mark.parametrize(("make", "expected"), [
    (_bad_record, r"results\.jsonl:1: \$\.verdict: 'maybe' is not one of"),
    (_mixed_run, r"results\.jsonl:3: \$\.run_id: 'another-run' is not this run's id"),
    (_partial, r"incomplete run \(results\.jsonl\.partial only"),
    (_bad_run_json, r"run\.json: \$\.engine: 'id' is a required property"),
    (_foreign, r"no results directory in it \(no run\.json found\)"),
], ids=["bad-record", "mixed-run-ids", "partial", "bad-run-json", "foreign-dir"])
def test_unusable_inputs_are_reported_by_name_and_skipped(tmp_path, make, expected):
    write_results(tmp_path / "good", suite({"single.a": "pass"}))
    make(tmp_path / "bad")

    report = build_matrix([tmp_path / "good", tmp_path / "bad"], tmp_path / "out")

    assert [c.pair for c in report.cells] == ["m1@e1"]
    (skipped,) = report.skipped
    assert skipped.path == str(tmp_path / "bad")
    assert re.search(expected, skipped.reason), skipped.reason
    assert "Skipped inputs" in (tmp_path / "out" / "matrix.md").read_text()
    # The page names it where its reader finds it: beside the page's folder, not at this machine's path.
    assert page_data(tmp_path / "out")["skipped"][0]["path"] == "../bad"
    assert skipped.reason.split(": ")[0] not in (tmp_path / "out" / "matrix.md").read_text()


def test_cli_exit_status_and_messages(tmp_path, capsys):
    write_results(tmp_path / "good", suite({"single.a": "pass"}))
    (tmp_path / "empty").mkdir()

    assert main(["matrix", "build", str(tmp_path / "good"), str(tmp_path / "empty"), "-o", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert "m1@e1: 100% of 2" in out and f"skipped: {tmp_path / 'empty'}: no results directory" in err
    assert main(["matrix", "build", str(tmp_path / "good"), str(tmp_path / "empty"), "-o", str(tmp_path / "o"),
                 "--strict"]) == 2
    capsys.readouterr()
    before = (tmp_path / "o" / "matrix.md").read_text()
    # Nothing usable: exit 2, and nothing written or claimed written (the page of the last good build stays).
    assert main(["matrix", "build", str(tmp_path / "missing"), "-o", str(tmp_path / "o")]) == 2
    out, err = capsys.readouterr()
    assert "does not exist" in err and "wrote" not in out
    assert (tmp_path / "o" / "matrix.md").read_text() == before
    assert main(["matrix", "build", str(tmp_path / "missing"), "-o", str(tmp_path / "fresh")]) == 2
    assert not (tmp_path / "fresh").exists()


def test_cells_of_pairs_no_longer_shown_are_removed(tmp_path):
    write_results(tmp_path / "a", suite({"single.a": "fail"}), model="m1")
    write_results(tmp_path / "b", suite({"single.a": "fail"}), model="m2")
    build_matrix([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    assert len(list((tmp_path / "out" / "cells").glob("*.jsonl"))) == 2

    build_matrix([tmp_path / "a"], tmp_path / "out")

    assert [p.name.split("-")[0] for p in (tmp_path / "out" / "cells").glob("*.jsonl")] == ["m1@e1"]


def test_the_page_embeds_failing_cases_only_within_its_byte_budget(tmp_path):
    huge = answer(content="x" * 50_000)
    records = [record(f"single.c{n:03d}", "fail", body=huge) for n in range(400)]
    write_results(tmp_path / "r", records + suite({"single.ok": "pass"}))

    build_matrix([tmp_path / "r"], tmp_path / "out")

    html_size = (tmp_path / "out" / "index.html").stat().st_size
    assert html_size < 1_500_000
    cell = cell_of(tmp_path / "out", "m1@e1", "page")
    assert cell["failures_total"] == 400 and 0 < cell["details_shown"] <= len(cell["failures"]) <= 400
    assert cell["details_shown"] < 400
    assert "more characters" in cell["failures"][0]["detail"]["response"]  # one blob capped, not the page broken
    assert len(cell_of(tmp_path / "out", "m1@e1")["failures"]) == 400  # matrix.json: all of them
    details = tmp_path / "out" / cell["details_file"]
    assert sum(1 for _ in details.open()) == 400


def test_embedded_json_cannot_end_the_script_element():
    text = embed_json({"a": "</script><script>alert(1)</script>", "b": "<!-- & -->"})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"a": "</script><script>alert(1)</script>", "b": "<!-- & -->"}


def test_untrusted_text_stays_data_in_page_and_markdown(tmp_path):
    evil = "<img src=x onerror=alert(1)>|`x`"
    write_results(tmp_path / "r", [record("single.a", "fail", reason=f"</script><script>alert(2)</script>{evil}")],
                  model=f"m{evil}")

    build_matrix([tmp_path / "r"], tmp_path / "out")

    html = (tmp_path / "out" / "index.html").read_text()
    assert html.count("</script>") == 2 and html.count("<script") == 2  # the data block and the page's script
    assert "<img" not in html
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;\\|\\`x\\`" in md
    table = [line for line in md.splitlines() if line.startswith("| m")]
    assert len(re.findall(r"(?<!\\)\|", table[0])) == 3  # the pipe in the model id did not add a column


def test_the_csp_admits_exactly_the_page_script(tmp_path):
    write_results(tmp_path / "r", suite({"single.a": "pass"}))
    build_matrix([tmp_path / "r"], tmp_path / "out")
    html = (tmp_path / "out" / "index.html").read_text()

    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


def test_md_text_makes_one_inert_line():
    assert md_text("a|b\n<c> [d](e) _f_") == "a\\|b &lt;c&gt; \\[d\\](e) \\_f\\_"


def test_repro_command_for_a_spec_and_for_an_external_server():
    def run(engine: RunEngine, model: RunModel) -> Run:
        return Run("r", "p", engine, model, {}, "2026-01-01T00:00:00+00:00", None, "0", {})

    spec = run(RunEngine("llamacpp", None, "process", []), RunModel("gemma3-270m", "gemma", "g"))
    ext = run(RunEngine("vllm", None, "external", [], base_url="http://h:8000/v1"),
              RunModel("qwen", "qwen", "Qwen/Qwen3"))
    assert repro_command(repro_prefix(spec), "single.weather", "nonstream") == (
        "pytest --engine=llamacpp --model=gemma3-270m -k 'single.weather and nonstream'")
    assert repro_command(repro_prefix(ext), "a'; rm -rf ~", "stream") == (
        "pytest --base-url=http://h:8000/v1 --model=Qwen/Qwen3 -k 'a'\"'\"'; rm -rf ~ and stream and not nonstream'")


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_the_diff_shows_expected_against_got_calls_as_the_records_surface_reads_them(mode, api):
    got = answer(calls=[{"name": "get_weather", "arguments": {"city": "Pariss"}},
                        {"name": "get_time", "arguments": {"zone": "CET"}}])
    diff = failure_detail(record("single.a", "fail", mode=mode, body=got, api=api))["diff"]
    assert diff.startswith("--- expected\n+++ got")
    # The calls the model made, read through the record's own surface: never "tool_calls": [] as read as chat.
    assert '-        "city": "Paris"' in diff and '+        "city": "Pariss"' in diff
    assert '+      "name": "get_time"' in diff and '"tool_calls": []' not in diff


def test_the_diff_of_a_replay_record_reads_the_fixtures_expected_calls():
    got = answer(calls=[{"name": "get_weather", "arguments": {"city": "Pariss"}}])
    replayed = {**record("single.a", "fail", body=got),
                "expect": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                           "content": None, "reasoning": None}}
    diff = expectation_diff(replayed)
    assert '-        "city": "Paris"' in diff and '+        "city": "Pariss"' in diff, diff


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_the_diff_of_a_surface_answer_that_matches_says_so(api):
    diff = expectation_diff(record("single.a", "fail", mode="stream", api=api))
    assert diff == "(the tool calls match the expectation; see the failing checks)"


def test_key_flags_keep_tool_calling_flags_and_their_values():
    flags = ["--port", "8080", "--jinja", "--tool-call-parser", "hermes", "-m", "/w.gguf", "--chat-template=x.jinja"]
    assert key_flags(flags) == ["--jinja", "--tool-call-parser hermes", "--chat-template=x.jinja"]


# -- runs of one pair from several machines -------------------------------------------------------------------


def _two_hosts(root: Path, older_fails: bool, **newer_options) -> tuple[Path, Path]:
    """One pair run on host gpu-a (newer) and host cpu-b (older); they disagree on single.b [stream] only."""
    disagreeing = {"single.a": "pass", "single.b": "pass/fail" if older_fails else "pass/error"}
    agreeing = {"single.a": "pass", "single.b": "pass"}
    newer = write_results(root / "a", suite(agreeing if older_fails else disagreeing), run_id="ra", started=DAY2,
                          host="gpu-a", gpus=("NVIDIA H100", "NVIDIA H100"), **newer_options)
    older = write_results(root / "b", suite(disagreeing if older_fails else agreeing), run_id="rb", started=DAY1,
                          host="cpu-b", flags=["--port", "9090", "--jinja"])
    return newer, older


def test_the_shards_of_a_batch_are_one_cell_whatever_their_hosts(tmp_path):
    """A fan-out: two repeats on one host disagree (mixed), a retried shard replaces its lost attempt, and the
    next batch replaces this one, with the history against it; pod-like host names never pile up."""
    def shard(name: str, run_id: str, started: str, batch: str, b_verdict: str, host: str) -> None:
        write_results(tmp_path / run_id, suite({"single.a": "pass", "single.b": b_verdict}), run_id=run_id,
                      started=started, host=host, batch=batch, shard=name,
                      flags=["--port", "1", "--chat-template-file", f"/home/{host}/t.jinja"])

    shard("p.r1", "b1-r1", "2026-03-01T10:00:00+00:00", "b1", "pass", "pod-x1")
    shard("p.r2", "b1-r2-lost", "2026-03-01T10:00:00+00:00", "b1", "error", "pod-x2")
    shard("p.r2", "b1-r2", "2026-03-01T10:30:00+00:00", "b1", "fail", "pod-x3")  # the retry of r2
    (cell,) = build_matrix([tmp_path], tmp_path / "out").cells
    assert (cell.runs, cell.mixed, cell.total) == (2, 2, 4)  # r1 passed single.b, r2 failed it: mixed
    assert {r["run_id"] for r in cell_of(tmp_path / "out", "m1@e1")["runs"]} == {"b1-r1", "b1-r2"}

    shard("p.r1", "b2-r1", "2026-03-08T10:00:00+00:00", "b2", "pass", "pod-y1")
    shard("p.r2", "b2-r2", "2026-03-08T10:00:00+00:00", "b2", "pass", "pod-y2")
    report = build_matrix([tmp_path], tmp_path / "out2")
    (cell,) = report.cells
    assert (cell.runs, cell.mixed, cell.pass_rate) == (2, 0, 1.0)  # batch b1's pods are not in it
    # The history: against the newest run left out (b1's r2, which failed single.b in both modes).
    assert (Path(cell.previous).name, cell.newly_passing, len(report.superseded)) == ("b1-r2", 2, 2)


def test_a_case_that_passed_nowhere_is_a_failure_not_mixed(tmp_path):
    """fail on one machine, error on another: no run passed it, so it stays a failure (the newer run's)."""
    write_results(tmp_path / "a", suite({"single.a": "pass", "single.b": "fail"}), run_id="ra", started=DAY2,
                  host="gpu-a")
    write_results(tmp_path / "b", suite({"single.a": "pass", "single.b": "error"}), run_id="rb", started=DAY1,
                  host="cpu-b")
    (cell,) = build_matrix([tmp_path], tmp_path / "out").cells
    full = cell_of(tmp_path / "out", "m1@e1")
    assert (cell.runs, cell.mixed, full["counts"]) == (2, 0, {"pass": 2, "fail": 2})
    assert [(f["case_id"], f["verdict"]) for f in full["failures"]] == [("single.b", "fail"), ("single.b", "fail")]


@pytest.mark.parametrize("older_fails", [True, False], ids=["older-run-fails", "newer-run-fails"])
def test_runs_of_one_configuration_on_two_hosts_are_one_cell_and_their_disagreement_is_mixed(tmp_path, older_fails):
    newer, older = _two_hosts(tmp_path, older_fails)

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert (cell.run_id, cell.runs, cell.mixed, cell.total, cell.previous) == ("ra", 2, 1, 4, None)
    assert cell.pass_rate == 0.75  # the mixed case x mode is not a pass
    assert report.superseded == () and report.skipped == ()
    full = cell_of(tmp_path / "out", "m1@e1")
    assert full["counts"] == {"pass": 3, "mixed": 1}
    assert ["single", "stream", "mixed", "engine", 1] in full["breakdown"]
    assert [(r["run_id"], r["host"], r["gpus"], r["case_shard"], r["total"], r["pass_rate"]) for r in full["runs"]] == [
        ("ra", "gpu-a", "2x NVIDIA H100", None, 4, 1.0 if older_fails else 0.75),
        ("rb", "cpu-b", "CPU", None, 4, 0.75 if older_fails else 1.0)]
    (mixed,) = full["mixed"]
    bad = "fail" if older_fails else "error"
    verdicts = [(r["host"], r["verdict"], r["blame"]) for r in mixed["runs"]]
    assert (mixed["case_id"], mixed["mode"]) == ("single.b", "stream")
    assert verdicts == ([("gpu-a", "pass", None), ("cpu-b", bad, "engine")] if older_fails
                        else [("gpu-a", bad, "engine"), ("cpu-b", "pass", None)])
    assert full["failures"] == [] and full["failures_total"] == 0  # listed as mixed, not as a failure
    # The engine failed the mixed case on one host: not conformant there, so not conformant.
    assert full["conformance_counts"] == {"conformant": 3, "judged": 4}
    details = (tmp_path / "out" / full["details_file"]).read_text().splitlines()
    assert [(json.loads(d)["run_id"], json.loads(d)["case_id"]) for d in details] == [
        ("rb" if older_fails else "ra", "single.b")]
    page = cell_of(tmp_path / "out", "m1@e1", "page")
    assert (page["mixed_total"], len(page["mixed"]), len(page["runs"])) == (1, 1, 2)
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert re.search(r"\| m1 +\| 75% \(3/4\), engine 75% \(3/4\), 1 mixed, 2 runs +\|", md)
    assert f"- single.b \\[stream\\]: gpu-a: {verdicts[0][1]}" in md and "## Mixed verdicts" in md


def test_the_same_runs_with_different_engine_versions_keep_newest_wins_with_history(tmp_path):
    newer, older = _two_hosts(tmp_path, older_fails=True, version="b9999")

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert (cell.run_id, cell.runs, cell.mixed, cell.total, cell.pass_rate) == ("ra", 1, 0, 4, 1.0)
    assert (cell.previous, cell.newly_failing, cell.newly_passing) == (str(older), 0, 1)
    full = cell_of(tmp_path / "out", "m1@e1")
    assert [r["host"] for r in full["runs"]] == ["gpu-a"] and full["mixed"] == []
    assert "Mixed verdicts" not in (tmp_path / "out" / "matrix.md").read_text()


def test_case_shards_on_four_hosts_add_up_to_one_whole_cell(tmp_path):
    cases = [f"single.c{n}" for n in range(8)]
    for index in range(4):
        shard = {case: ("fail" if case == "single.c5" else "pass") for case in cases[index::4]}
        write_results(tmp_path / f"s{index}", suite(shard), run_id=f"r{index}", host=f"node-{index}",
                      case_shard=f"{index + 1}/4", started=f"2026-01-01T10:0{index}:00+00:00")

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert (cell.runs, cell.mixed, cell.total, cell.previous) == (4, 0, 16, None)
    assert cell.pass_rate == 0.875
    full = cell_of(tmp_path / "out", "m1@e1")
    assert sorted((r["host"], r["case_shard"], r["total"]) for r in full["runs"]) == [
        (f"node-{i}", f"{i + 1}/4", 4) for i in range(4)]
    assert full["counts"] == {"pass": 14, "fail": 2}
    assert [(f["case_id"], f["mode"], f["host"], f["run_id"]) for f in full["failures"]] == [
        ("single.c5", "nonstream", "node-1", "r1"), ("single.c5", "stream", "node-1", "r1")]


def test_a_rerun_on_the_same_host_and_slice_wins_and_the_history_compares_with_the_older(tmp_path):
    write_results(tmp_path / "h1-old", suite({"single.a": "fail"}), run_id="h1-old", started=DAY1, host="h1")
    write_results(tmp_path / "h2", suite({"single.b": "pass"}), run_id="h2", started=DAY2, host="h2")
    write_results(tmp_path / "h1-new", suite({"single.a": "pass"}), run_id="h1-new", started=DAY3, host="h1")
    write_results(tmp_path / "h1-oldest", suite({"single.a": "pass"}), run_id="h1-oldest",
                  started="2025-12-31T10:00:00+00:00", host="h1")

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert (cell.run_id, cell.runs, cell.mixed, cell.total) == ("h1-new", 2, 0, 4)
    assert (cell.previous, cell.newly_failing, cell.newly_passing) == (str(tmp_path / "h1-old"), 0, 2)
    assert report.superseded == (str(tmp_path / "h1-oldest"),)
    assert [r["run_id"] for r in cell_of(tmp_path / "out", "m1@e1")["runs"]] == ["h1-new", "h2"]


@pytest.mark.parametrize(("flags_b", "one_cell"), [
    (["--port", "9191", "-m", "/data/b/w.gguf", "--jinja", "--tool-call-parser", "hermes"], True),
    (["--port", "8080", "-m", "/models/w.gguf", "--jinja", "--tool-call-parser", "llama3_json"], False),
], ids=["port-and-path-differ", "parser-differs"])
def test_only_tool_calling_flags_make_a_different_configuration(tmp_path, flags_b, one_cell):
    flags_a = ["--port", "8080", "-m", "/models/w.gguf", "--jinja", "--tool-call-parser", "hermes"]
    write_results(tmp_path / "a", suite({"single.a": "pass"}), run_id="ra", started=DAY2, host="a", flags=flags_a)
    write_results(tmp_path / "b", suite({"single.a": "pass"}), run_id="rb", started=DAY1, host="b", flags=flags_b)

    (cell,) = build_matrix([tmp_path], tmp_path / "out").cells

    assert (cell.runs, cell.previous is None) == ((2, True) if one_cell else (1, False))


def test_a_broken_run_leaves_its_cell_and_an_older_run_of_its_host_takes_its_place(tmp_path):
    write_results(tmp_path / "a", suite({"single.a": "pass"}), run_id="ra", started=DAY3, host="a")
    bad = write_results(tmp_path / "b-new", suite({"single.a": "pass"}), run_id="rb2", started=DAY2, host="b")
    with (bad / "results.jsonl").open("a") as handle:
        handle.write("{not json\n")
    write_results(tmp_path / "b-old", suite({"single.a": "fail"}), run_id="rb1", started=DAY1, host="b")

    report = build_matrix([tmp_path], tmp_path / "out")

    (cell,) = report.cells
    assert [s.path for s in report.skipped] == [str(bad)]
    assert (cell.runs, cell.mixed, cell.previous) == (2, 2, None)
    full = cell_of(tmp_path / "out", "m1@e1")
    assert [r["run_id"] for r in full["runs"]] == ["ra", "rb1"]
    details = (tmp_path / "out" / full["details_file"]).read_text().splitlines()
    assert {json.loads(d)["run_id"] for d in details} == {"rb1"}  # nothing of the broken run


def test_the_page_caps_the_runs_and_mixed_lists_of_a_cell(tmp_path):
    cases = {f"single.c{n:03d}": "pass" for n in range(300)}
    write_results(tmp_path / "a", suite(cases), run_id="ra", started=DAY2, host="a")
    write_results(tmp_path / "b", suite(dict.fromkeys(cases, "fail")), run_id="rb", started=DAY1, host="b")
    for n in range(60):
        write_results(tmp_path / f"s{n}", suite({f"other.c{n}": "pass"}), run_id=f"s{n}", host=f"shard-host-{n}",
                      started=DAY1)

    build_matrix([tmp_path], tmp_path / "out")

    full, page = cell_of(tmp_path / "out", "m1@e1"), cell_of(tmp_path / "out", "m1@e1", "page")
    assert (full["runs_total"], len(full["runs"]), full["mixed_total"], len(full["mixed"])) == (62, 62, 600, 600)
    assert page["runs_total"] == 62 and 1 <= len(page["runs"]) <= 50
    assert page["mixed_total"] == 600 and 0 < len(page["mixed"]) <= 50
    assert full["pass_rate"] == round(120 / 720, 4)  # the other hosts' passes; every mixed one is not


def test_host_names_stay_data_in_page_and_markdown(tmp_path):
    evil = "<img src=x onerror=alert(1)>|"
    write_results(tmp_path / "a", suite({"single.a": "pass"}), run_id="ra", started=DAY2, host=evil, gpus=(evil,))
    write_results(tmp_path / "b", suite({"single.a": "fail"}), run_id="rb", started=DAY1, host="b")

    build_matrix([tmp_path], tmp_path / "out")

    assert "<img" not in (tmp_path / "out" / "index.html").read_text()
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "<img" not in md and "- single.a \\[nonstream\\]: &lt;img src=x onerror=alert(1)&gt;\\|: pass" in md
    assert cell_of(tmp_path / "out", "m1@e1", "page")["runs"][0]["gpus"] == evil


def test_replay_cells_get_their_own_family_table_and_every_empty_cell_its_reason(tmp_path):
    write_results(tmp_path / "live", suite({"single.a": "pass"}), model="m1", engine="vllm")
    write_replay_results(tmp_path / "r1", "sglang", {"hermes": "pass", "glm45": "fail"}, {})
    write_replay_results(tmp_path / "r2", "vllm", {"hermes": "pass"}, {"glm45": "vllm glm45: no offline tokenizer"})

    build_matrix([tmp_path / "live", tmp_path / "r1", tmp_path / "r2"], tmp_path / "out")

    data = page_data(tmp_path / "out")
    # The live table keeps its model x engine shape: no "parser-replay" row.
    assert data["models"] == ["m1"] and [e["id"] for e in data["engines"]] == ["vllm"]
    replay = data["replay"]
    assert replay["families"] == ["glm45", "hermes"] and [e["id"] for e in replay["engines"]] == ["sglang", "vllm"]
    cells = {(c["engine"], c["family"]): c for c in replay["cells"]}
    assert (cells["sglang", "glm45"]["rate"], cells["sglang", "glm45"]["total"]) == (0.0, 2)
    assert cells["vllm", "glm45"] == {"engine": "vllm", "family": "glm45", "pair": "parser-replay@vllm",
                                      "reason": "vllm glm45: no offline tokenizer"}
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "## Parser replay (no model ran)" in md
    assert re.search(r"\| glm45 +\| 0% \(0/2\), 2 fail +\| not replayed: vllm glm45: no offline tokenizer +\|", md)
    assert "replay.hermes" not in md.split("## Parser replay")[0]  # the live by-category table stays live


def test_the_replay_table_links_its_triage_relative_to_the_page(tmp_path):
    write_replay_results(tmp_path / "r1", "sglang", {"hermes": "fail"}, {})
    build_matrix([tmp_path / "r1"], tmp_path / "out" / "matrix", triage=tmp_path / "out" / "TRIAGE.md")
    assert "[../TRIAGE.md](../TRIAGE.md)" in (tmp_path / "out" / "matrix" / "matrix.md").read_text()
    assert '"triage":"../TRIAGE.md"' in (tmp_path / "out" / "matrix" / "index.html").read_text()
    build_matrix([tmp_path / "r1"], tmp_path / "plain")
    assert "TRIAGE" not in (tmp_path / "plain" / "matrix.md").read_text()


def not_served(case_id: str, mode: str, check: str, detail: str, also: str = "") -> dict:
    """A record of a surface the engine does not serve: unsupported with the spec's reason (and the case's other
    declared gaps, ``also``), then the check's words."""
    declared = "api.responses: e1 has no /v1/responses route (server/app.py)" + also
    rec = record(case_id, "unsupported", mode=mode, reason=f"{declared} ({check}: {detail})")
    rec["checks"][1] = {"name": check, "outcome": "fail", "blame": "engine", "detail": detail}
    return rec


def test_a_cell_whose_every_record_is_unsupported_says_why_instead_of_0_percent(tmp_path):
    write_results(tmp_path / "chat", suite({"single.a": "pass", "single.b": "unsupported", "reasoning.r": "unsupported"}))
    write_results(tmp_path / "responses", [
        not_served("single.a", "nonstream", "http_status", "HTTP 404: Not Found"),
        not_served("single.a", "stream", "wire_shape", "HTTP 404 error body: $: 'type' is a required property"),
        not_served("single.b", "nonstream", "http_status", "HTTP 404: Not Found", also="; reasoning: no thinking"),
        not_served("single.b", "stream", "http_status", "HTTP 404: Not Found", also="; reasoning: no thinking"),
    ], run_id="run-2", api="responses")

    build_matrix([tmp_path], tmp_path / "out")

    # Each declared gap once, the most shared first, whatever check failed after it.
    reason = "api.responses: e1 has no /v1/responses route (server/app.py); reasoning: no thinking"
    for source in ("matrix.json", "page"):
        assert cell_of(tmp_path / "out", "m1@e1 [responses]", source)["unsupported_reason"] == reason
        assert "unsupported_reason" not in cell_of(tmp_path / "out", "m1@e1", source)  # some unsupported only
    md = (tmp_path / "out" / "matrix.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| m1 "))
    assert f"unsupported (4): {md_text(reason)}" in row and "0% (0/4)" not in md
    assert re.search(r"\| m1@e1 \\\[responses\\\] +\| - +\| unsupported +\|", md)  # its category too
    # A category of a judged cell that holds nothing judged (the model does not think) is no 0 % either.
    assert re.search(r"\| m1@e1 +\| unsupported +\| 50% \(2/4\)", md)


def test_a_cell_reads_the_declared_gaps_from_their_field_and_older_records_from_their_reason(tmp_path):
    """A record carries its declared gaps as a field: its reason is worded for people and not read back (a why may
    hold "; " itself). A record written before the field still gives its gaps, read out of its reason."""
    route = "e1 has no /v1/responses route (server/app.py)"
    recorded = not_served("single.a", "nonstream", "http_status", "HTTP 404: Not Found")
    recorded.update(gaps={"api.responses": route, "reasoning": "no thinking; none at all"}, reason="not read")
    older = not_served("single.a", "stream", "http_status", "HTTP 404: Not Found", also="; reasoning: no thinking")
    write_results(tmp_path / "responses", [recorded, older], run_id="run-2", api="responses")

    build_matrix([tmp_path], tmp_path / "out")

    assert cell_of(tmp_path / "out", "m1@e1 [responses]")["unsupported_reason"] == (
        f"api.responses: {route}; reasoning: no thinking; none at all; reasoning: no thinking")


def test_the_surfaces_of_an_engine_share_its_one_column_in_page_markdown_and_json(tmp_path):
    write_results(tmp_path / "chat", suite({"single.a": "pass", "single.b": "pass"}))
    write_results(tmp_path / "messages", suite({"single.a": "pass", "single.b": "fail"}, api="messages"),
                  run_id="run-2", api="messages")
    write_results(tmp_path / "responses", [not_served("single.a", mode, "http_status", "HTTP 404: Not Found")
                                           for mode in ("nonstream", "stream")], run_id="run-3", api="responses")
    write_results(tmp_path / "m2", suite({"single.a": "pass"}), model="m2", run_id="run-4")

    build_matrix([tmp_path], tmp_path / "out")

    cells = json.loads((tmp_path / "out" / "matrix.json").read_text())["cells"]
    assert sorted((c["pair"], c["engine"], c["api"]) for c in cells) == [  # a cell per surface, in its engine's column
        ("m1@e1", "e1", "chat"), ("m1@e1 [messages]", "e1", "messages"), ("m1@e1 [responses]", "e1", "responses"),
        ("m2@e1", "e1", "chat")]
    engines = page_data(tmp_path / "out")["engines"]
    assert [(e["id"], [a["id"] for a in e["apis"]]) for e in engines] == [("e1", ["chat", "responses", "messages"])]
    md = (tmp_path / "out" / "matrix.md").read_text().splitlines()
    header = next(line for line in md if line.startswith("| model \\ engine"))
    assert [h.strip() for h in header.strip("|").split("|")] == ["model \\ engine", "e1 b1234 (--jinja)"]
    m1 = next(line for line in md if line.startswith("| m1 ")).split("|")[2].strip()
    assert m1.split("<br>") == [
        "Chat Completions: 100% (4/4), engine 100% (4/4)",
        f"Responses: unsupported (2): {md_text('api.responses: e1 has no /v1/responses route (server/app.py)')}",
        "Anthropic Messages: 50% (2/4), engine 50% (2/4), 2 fail"]
    m2 = next(line for line in md if line.startswith("| m2 ")).split("|")[2].strip()
    assert m2.split("<br>") == ["Chat Completions: 100% (2/2), engine 100% (2/2)", "Responses: not run",
                                "Anthropic Messages: not run"]

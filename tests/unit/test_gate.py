"""toolmatrix gate: exit 0 pass / 1 gate failed / 2 input error, the allowlist, thresholds and JUnit XML."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers_results import suite, write_replay_results, write_results
from toolmatrix.cli import main
from toolmatrix.report.gate import EXIT_FAILED, EXIT_INPUT, EXIT_PASS, run_gate

BASELINE = {"single.a": "pass", "single.b": "pass", "parallel.c": "pass", "parallel.d": "fail"}


@pytest.fixture
def baseline(tmp_path) -> Path:
    return write_results(tmp_path / "baseline", suite(BASELINE), run_id="base")


def results(tmp_path: Path, verdicts: dict[str, str], **options) -> Path:
    return write_results(tmp_path / "results", suite(verdicts, **options), run_id="now",
                         started="2026-02-01T10:00:00+00:00")


def gate(*args: str | Path) -> int:
    return main(["gate", *map(str, args)])


def allowlist(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "allow.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_same_results_pass(tmp_path, baseline, capsys):
    now = results(tmp_path, BASELINE)
    assert gate("--baseline", baseline, "--results", now) == EXIT_PASS
    out = capsys.readouterr().out
    assert "gate: PASSED" in out and "2 case x mode(s) failing but not passing in the baseline either" in out


def test_a_case_that_passed_and_now_fails_is_a_listed_regression(tmp_path, baseline, capsys):
    now = results(tmp_path, {**BASELINE, "single.b": "pass/fail", "parallel.d": "pass"})
    assert gate("--baseline", baseline, "--results", now) == EXIT_FAILED
    out = capsys.readouterr().out
    assert ("REGRESSION single.b [stream]: passed in the baseline, now fail (blame: engine): "
            "ARGS_NOT_OBJECT: arguments are not an object") in out
    assert "  repro: pytest --engine=e1 --model=m1 -k 'single.b and stream and not nonstream'" in out
    assert out.count("REGRESSION") == 1 and "gate: FAILED (1 regression(s), 0 category(ies) under threshold)" in out


def test_a_case_missing_from_the_results_is_a_regression(tmp_path, baseline):
    now = results(tmp_path, {k: v for k, v in BASELINE.items() if k != "single.a"})
    [report] = run_gate(baseline, now).reports
    assert [(r.key, r.message) for r in report.regressions] == [
        (("single.a", "nonstream"), "passed in the baseline, missing from the results"),
        (("single.a", "stream"), "passed in the baseline, missing from the results")]
    assert report.exit_code == EXIT_FAILED


@pytest.mark.parametrize(("threshold", "expected"), [
    ("parallel=0.5", EXIT_PASS), ("parallel=0.51", EXIT_FAILED), ("parallel=50%", EXIT_PASS),
    ("*=0.75", EXIT_PASS), ("*=0.76", EXIT_FAILED),
])
def test_category_thresholds(tmp_path, baseline, threshold, expected):
    # parallel: c passes, d fails -> 50%; all: 6 of 8 -> 75%.
    now = results(tmp_path, BASELINE)
    assert gate("--baseline", baseline, "--results", now, "--min-pass-rate", threshold) == expected


def test_a_breached_threshold_is_reported(tmp_path, baseline, capsys):
    now = results(tmp_path, BASELINE)
    assert gate("--baseline", baseline, "--results", now, "--min-pass-rate", "parallel=0.9",
                "--min-pass-rate", "single=0.9") == EXIT_FAILED
    assert "UNDER THRESHOLD parallel: pass rate 50.0% (2/4) < 90%" in capsys.readouterr().out


def test_a_category_gone_from_the_results_breaches_its_threshold(tmp_path, baseline):
    now = results(tmp_path, {"single.a": "pass", "single.b": "pass"})
    [report] = run_gate(baseline, now, min_pass_rates={"parallel": 0.1}).reports
    assert [str(b) for b in report.breaches] == ["parallel: pass rate no records (0/0) < 10%"]


@pytest.mark.parametrize(("blame", "expected"), [("model", EXIT_PASS), ("engine", EXIT_FAILED)])
def test_a_conformance_threshold_gates_the_engine_not_the_model(tmp_path, baseline, blame, expected, capsys):
    """parallel.d fails in both modes: a model's mistake leaves the engine 100% conformant, an engine's does not."""
    now = results(tmp_path, BASELINE, blame=blame)
    assert gate("--baseline", baseline, "--results", now, "--min-conformance", "parallel=0.9",
                "--junit-xml", tmp_path / "j.xml") == expected
    out = capsys.readouterr().out
    assert ("UNDER THRESHOLD parallel: engine conformance 50.0% (2/4) < 90%" in out) == (blame == "engine")
    names = [c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")]
    assert "min_conformance[parallel]" in names


@pytest.mark.parametrize("bad", ["parallel", "parallel=1.5", "=0.5", "parallel=abc"])
def test_a_malformed_threshold_is_a_usage_error(tmp_path, baseline, bad, capsys):
    with pytest.raises(SystemExit) as exc:
        gate("--baseline", baseline, "--results", results(tmp_path, BASELINE), "--min-pass-rate", bad)
    assert exc.value.code == EXIT_INPUT
    assert "argument --min-pass-rate: expected CATEGORY=RATE" in capsys.readouterr().err


def test_an_unknown_threshold_category_is_an_input_error(tmp_path, baseline, capsys):
    now = results(tmp_path, BASELINE)
    assert gate("--baseline", baseline, "--results", now, "--min-pass-rate", "paralel=0.9") == EXIT_INPUT
    assert "unknown category 'paralel' (known: parallel, single)" in capsys.readouterr().err


def test_an_allowlisted_unsupported_cell_passes(tmp_path, baseline, capsys):
    now = results(tmp_path, {**BASELINE, "parallel.c": "pass/unsupported"})
    # Without the allowlist: a regression. With it: not gated, and not counted (parallel: 1 of 3 passes, not 1 of 4).
    assert gate("--baseline", baseline, "--results", now) == EXIT_FAILED
    allow = allowlist(tmp_path, """\
        allow:
          - case: parallel.*
            mode: stream
            pair: m1@*
            reason: e1 does not stream parallel calls (upstream issue 123)
        """)
    code = gate("--baseline", baseline, "--results", now, "--allow", allow, "--min-pass-rate", "parallel=0.33")
    assert code == EXIT_PASS
    out = capsys.readouterr().out
    assert "allowlisted: 2 case x mode(s) not gated" in out and "gate: PASSED" in out


def test_an_allowlist_entry_for_another_pair_does_not_apply(tmp_path, baseline):
    now = results(tmp_path, {**BASELINE, "parallel.c": "pass/unsupported"})
    allow = allowlist(tmp_path, """\
        allow:
          - {category: parallel, pair: other@e1, reason: not this pair}
        """)
    gating = run_gate(baseline, now, allowlist=allow)
    assert gating.exit_code == EXIT_FAILED
    assert [e.where for e in gating.unused_allow] == [f"{allow}:2"]


@pytest.mark.parametrize(("text", "expected"), [
    ("allow:\n  - case: parallel.c\n    mode: stream\n",
     r"allow\.yaml:2: \$\.allow\[0\]: 'reason' is a required property"),
    ("allow:\n  - case: parallel.c\n    reasn: typo\n    reason: x\n",
     r"allow\.yaml:2: \$\.allow\[0\]: unknown field\(s\) \('reasn' was unexpected\)"),
    ("allow:\n  - reason: no selector\n", r"allow\.yaml:2: \$\.allow\[0\]: 'category' is a required property"),
    ("allow:\n  - case: a\n    mode: both\n    reason: x\n",
     r"allow\.yaml:3: \$\.allow\[0\]\.mode: 'both' is not one of"),
    ("allow: [case: a\n", r"allow\.yaml:2: \$: invalid YAML"),
], ids=["no-reason", "unknown-field", "no-selector", "bad-mode", "bad-yaml"])
def test_a_malformed_allowlist_is_an_input_error_naming_file_line_and_field(tmp_path, baseline, capsys, text, expected):
    allow = tmp_path / "allow.yaml"
    allow.write_text(text)
    assert gate("--baseline", baseline, "--results", results(tmp_path, BASELINE), "--allow", allow) == EXIT_INPUT
    err = capsys.readouterr().err
    assert re.search(expected, err), err


def test_a_missing_baseline_is_an_input_error_not_a_pass(tmp_path, capsys):
    now = results(tmp_path, BASELINE)
    assert gate("--baseline", tmp_path / "nope", "--results", now) == EXIT_INPUT
    assert f"baseline: {tmp_path / 'nope'}: does not exist" in capsys.readouterr().err


def test_an_unreadable_baseline_is_an_input_error(tmp_path, baseline, capsys):
    (baseline / "run.json").write_text("{truncated")
    assert gate("--baseline", baseline, "--results", results(tmp_path, BASELINE)) == EXIT_INPUT
    assert f"baseline: {baseline}/run.json: not readable JSON" in capsys.readouterr().err


def test_an_invalid_baseline_names_its_file_and_line(tmp_path, baseline, capsys):
    with (baseline / "results.jsonl").open("a") as handle:
        handle.write('{"half a record\n')
    assert gate("--baseline", baseline, "--results", results(tmp_path, BASELINE)) == EXIT_INPUT
    assert f"baseline: {baseline}/results.jsonl:9: not JSON" in capsys.readouterr().err


def test_an_empty_baseline_is_an_input_error(tmp_path, capsys):
    empty = write_results(tmp_path / "empty", [])
    assert gate("--baseline", empty, "--results", results(tmp_path, BASELINE)) == EXIT_INPUT
    assert "no records (a gate against nothing would always pass)" in capsys.readouterr().err


def test_missing_results_are_an_input_error(tmp_path, baseline):
    assert gate("--baseline", baseline, "--results", tmp_path / "none") == EXIT_INPUT


def test_junit_xml_is_written_and_parseable(tmp_path, baseline):
    now = results(tmp_path, {**BASELINE, "single.b": "pass/fail", "parallel.c": "pass/unsupported"})
    allow = allowlist(tmp_path, "allow:\n  - {case: parallel.c, mode: stream, reason: known}\n")
    junit = tmp_path / "reports" / "gate.xml"

    code = gate("--baseline", baseline, "--results", now, "--allow", allow, "--junit-xml", junit,
                "--min-pass-rate", "single=0.9")

    assert code == EXIT_FAILED
    suite_node = ET.parse(junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite_node.iter("testcase")}
    assert len(cases) == 9  # 4 cases x 2 modes, 1 threshold
    failure = cases["single.b[stream]"].find("failure")
    assert failure.get("type") == "regression" and "now fail (blame: engine)" in failure.get("message")
    assert "repro: pytest --engine=e1 --model=m1 -k 'single.b and stream and not nonstream'" in failure.text
    assert "allowlisted" in cases["parallel.c[stream]"].find("skipped").get("message")
    assert cases["parallel.d[nonstream]"].find("skipped") is not None  # failing in both: not gated
    assert cases["single.a[stream]"].find("failure") is None and cases["single.a[stream]"].find("skipped") is None
    assert cases["min_pass_rate[single]"].find("failure").get("type") == "threshold"
    assert suite_node.get("failures") == "2"


def test_junit_xml_carries_text_xml_cannot(tmp_path, baseline):
    now = write_results(tmp_path / "results", suite({**BASELINE, "single.a": "fail"}, reason="bad \x00\x1b value"),
                        run_id="now")
    junit = tmp_path / "gate.xml"
    run_gate(baseline, now, junit_xml=junit)
    message = next(c for c in ET.parse(junit).iter("testcase") if c.get("name") == "single.a[nonstream]")
    assert message.find("failure").get("message").endswith("bad \ufffd\ufffd value")


def test_comparing_different_pairs_warns(tmp_path, baseline):
    now = write_results(tmp_path / "results", suite(BASELINE), model="m2", run_id="now")
    [report] = run_gate(baseline, now).reports
    assert report.warnings == ("comparing different pairs: results m2@e1, baseline m1@e1",)
    assert report.exit_code == EXIT_PASS


def test_a_replay_regression_says_parser_replay_and_repros_with_the_replay_command(tmp_path):
    base = write_replay_results(tmp_path / "base", "sglang", {"hermes": "pass"}, {})
    now = write_replay_results(tmp_path / "now", "sglang", {"hermes": "fail"}, {})
    run = json.loads((now / "run.json").read_text())
    run["command"] = ["toolmatrix", "replay", "--fixtures", "fx.jsonl", "--results-dir", "r", "--engine", "sglang"]
    (now / "run.json").write_text(json.dumps(run))

    [report] = run_gate(base, now).reports

    assert report.exit_code == EXIT_FAILED and report.tier == "replay"
    assert report.lines()[0].startswith("gate: parser-replay@sglang (parser replay: the engine's parser on given text")
    assert report.repro["hermes.case", "stream:token"] == (
        "grep -F '\"id\": \"hermes.case\"' fx.jsonl > /tmp/one.jsonl && toolmatrix replay --fixtures /tmp/one.jsonl "
        "--results-dir /tmp/repro --engine sglang --chunking token")


def test_two_releases_of_one_engine_gate_an_upgrade_listing_regressions_and_fixes(tmp_path, capsys):
    # DIR/ENGINE@VERSION as replay-sweep writes them: the same pair, another engine version.
    sweep = tmp_path / "sweep"
    write_replay_results(sweep / "sglang@0.5.10", "sglang", {"hermes": "pass", "glm45": "fail", "kimi_k2": "pass"}, {},
                         version="0.5.10")
    now = write_replay_results(sweep / "sglang@0.5.23", "sglang",
                               {"hermes": "fail", "glm45": "pass", "kimi_k2": "pass"}, {}, version="0.5.23")
    run = json.loads((now / "run.json").read_text())
    run["command"] = ["toolmatrix", "replay-sweep", "--engine", "sglang", "--versions", "0.5.10,0.5.23",
                      "--fixtures", "fx.jsonl", "--results-dir", "sweep"]
    (now / "run.json").write_text(json.dumps(run))

    assert gate("--baseline", sweep / "sglang@0.5.10", "--results", now) == EXIT_FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "upgrade: engine version 0.5.10 in the baseline, 0.5.23 in the results"
    assert not any(line.startswith("warning:") for line in out)
    assert [line.split(":")[0] for line in out if line.startswith(("REGRESSION", "fixed"))] == [
        "REGRESSION hermes.case [nonstream]", "REGRESSION hermes.case [stream", "fixed glm45.case [nonstream]",
        "fixed glm45.case [stream"]
    assert "fixed glm45.case [stream:token]: fail in the baseline, passes now" in out
    assert ("  repro: grep -F '\"id\": \"hermes.case\"' fx.jsonl > /tmp/one.jsonl && toolmatrix replay --fixtures "
            "/tmp/one.jsonl --results-dir /tmp/repro --engine sglang@0.5.23 --chunking token") in out
    assert out[-1] == "gate: FAILED (2 regression(s), 0 category(ies) under threshold)"


def test_a_fixed_case_counts_as_passing_in_the_pass_rate(tmp_path, baseline):
    now = results(tmp_path, {**BASELINE, "parallel.d": "pass"})
    [report] = run_gate(baseline, now, min_pass_rates={"parallel": 1.0}).reports
    assert [j.key for j in report.fixed] == [("parallel.d", "nonstream"), ("parallel.d", "stream")]
    assert report.exit_code == EXIT_PASS and report.rates[0].passed == 4 and report.versions == ("b1234", "b1234")


def runs_folder(root: Path, m1_responses: dict[str, str], m2: dict[str, str], run_id: str) -> Path:
    """A folder as a snapshot holds it: m1@e1 over chat and (``-surfaces/responses``) over Responses, and m2@e1."""
    write_results(root / "m1@e1", suite(BASELINE), run_id=f"{run_id}-m1")
    write_results(root / "m1@e1-surfaces" / "responses", suite(m1_responses), run_id=f"{run_id}-m1-responses",
                  api="responses")
    write_results(root / "m2@e1", suite(m2), model="m2", run_id=f"{run_id}-m2")
    return root


def test_a_folder_of_runs_is_gated_pair_by_pair(tmp_path, capsys):
    # m2 failed single.a in its own baseline: not a regression, though m1's baseline passed it.
    base = runs_folder(tmp_path / "base", BASELINE, {**BASELINE, "single.a": "fail"}, "base")
    now = runs_folder(tmp_path / "now", {**BASELINE, "single.b": "pass/fail"}, {**BASELINE, "single.a": "fail"}, "now")
    junit = tmp_path / "gate.xml"

    assert gate("--baseline", base, "--results", now, "--junit-xml", junit) == EXIT_FAILED

    out = capsys.readouterr().out
    assert f"gate: m1@e1 [responses]: results {now / 'm1@e1-surfaces' / 'responses'} (run now-m1-responses) " \
           f"against baseline {base / 'm1@e1-surfaces' / 'responses'} (run base-m1-responses)" in out
    assert out.count("REGRESSION") == 1 and "REGRESSION single.b [stream]" in out
    assert "  repro: pytest --engine=e1 --model=m1 --api=responses -k 'single.b and stream and not nonstream'" in out
    assert out.rstrip().endswith("gate: 3 pairs: FAILED (1 pair(s): m1@e1 [responses])")
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    assert sorted(suites) == ["toolmatrix gate m1@e1", "toolmatrix gate m1@e1 [responses]", "toolmatrix gate m2@e1"]
    assert [suites[name].get("failures") for name in sorted(suites)] == ["0", "1", "0"]
    assert suites["toolmatrix gate m2@e1"].get("skipped") == "4"  # parallel.d and single.a, failing in both runs


def test_a_pair_only_one_side_holds_is_an_input_error_naming_it(tmp_path, capsys):
    base = runs_folder(tmp_path / "base", BASELINE, BASELINE, "base")
    now = runs_folder(tmp_path / "now", BASELINE, BASELINE, "now")
    shutil.rmtree(now / "m2@e1")
    write_results(now / "m3@e1", suite(BASELINE), model="m3", run_id="now-m3")

    assert gate("--baseline", base, "--results", now) == EXIT_INPUT
    err = capsys.readouterr().err
    assert f"pair m3@e1 is in the results but not in the baseline {base}" in err
    assert f"pair m2@e1 is in the baseline but not in the results {now}" in err


def test_two_runs_of_one_pair_on_one_side_are_an_input_error(tmp_path, baseline, capsys):
    now = tmp_path / "now"
    for name in ("first", "again"):
        write_results(now / name, suite(BASELINE), run_id=name)
    assert gate("--baseline", baseline, "--results", now) == EXIT_INPUT
    assert f"results: {now} holds two runs of m1@e1: {now / 'again'} and {now / 'first'}; name one" in \
           capsys.readouterr().err


def test_over_a_folder_a_threshold_gates_the_pairs_that_hold_its_category_and_the_allowlist_is_stale_in_none(
        tmp_path):
    base = runs_folder(tmp_path / "base", BASELINE, {"single.a": "pass"}, "base")
    now = runs_folder(tmp_path / "now", BASELINE, {"single.a": "pass"}, "now")
    allow = allowlist(tmp_path, """\
        allow:
          - {case: single.a, pair: m2@*, reason: only m2's}
          - {case: nothing.here, reason: stale}
        """)

    gating = run_gate(base, now, min_pass_rates={"parallel": 0.9}, allowlist=allow)

    # m2 runs no parallel case: the threshold is not its; m1's parallel.d fails in both modes (2 of 4 pass).
    half = ["parallel: pass rate 50.0% (2/4) < 90%"]
    assert {r.pair: [str(b) for b in r.breaches] for r in gating.reports} == {
        "m1@e1": half, "m1@e1 [responses]": half, "m2@e1": []}
    assert [e.where for e in gating.unused_allow] == [f"{allow}:3"]

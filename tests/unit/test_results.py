"""toolmatrix.records owns the record and the run: typed, one writer, one reader, and version-1 results still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers_results import record, write_results
from toolmatrix.matrix import build_matrix
from toolmatrix.records import (
    Blame,
    CheckOutcome,
    Posted,
    Record,
    RecordWriter,
    ResultsError,
    Run,
    RunEngine,
    RunModel,
    Verdict,
    check_results,
    read_records,
    read_run_info,
    scan_fields,
    transcript,
)
from toolmatrix.report.gate import EXIT_PASS, run_gate
from toolmatrix.wire.answer import Cut
from toolmatrix.wire.exchange import Exchange
from toolmatrix.wire.surfaces import MESSAGES, RESPONSES

SNAPSHOT = Path(__file__).parents[2] / "results" / "cpu-gemma3-270m"
PAIRS = sorted(SNAPSHOT.glob("gemma3-270m@*"))


def test_a_record_round_trips_through_json():
    data = record("single.a", "fail", mode="stream", blame="engine")
    typed = Record.from_dict(data)
    assert typed.verdict is Verdict.FAIL and typed.blame is Blame.ENGINE
    assert typed.checks[1].outcome is CheckOutcome.FAIL and typed.chunks and typed.response is None
    assert json.loads(typed.encode()) == data  # nothing added, nothing lost: fields left at None are not written


@pytest.mark.parametrize("exchange", [
    Exchange("nonstream", {"model": "m"}, 502, None, error="HTTP 502", latency_s=0.25, raw_text="<html>bad gateway",
             cut=Cut(4096, 9000, True)),
    Exchange("stream", {"model": "m", "stream": True}, 200, chunks=({"choices": []}, "not json"), latency_s=1.5,
             api=RESPONSES),
    Exchange("nonstream", {"model": "m"}, 200, {"content": [{"type": "text", "text": "hi"}]}, api=MESSAGES),
], ids=["error-body-cut", "responses-stream", "messages"])
def test_a_record_keeps_the_whole_exchange_and_reads_it_back(exchange):
    record = Record("run-1", "single.a", "single", exchange.mode, Verdict.ERROR, Blame.INFRA, "x", (),
                    api=exchange.api, **transcript(exchange))
    assert Record.from_dict(json.loads(record.encode())).exchange() == exchange


def test_version_1_records_are_migrated_on_reading():
    v1 = {**record("single.a", "fail"), "schema_version": 1}
    v1["status"] = v1.pop("http_status")
    v1["checks"] = [{**{k: v for k, v in c.items() if k != "outcome"}, "status": c["outcome"]} for c in v1["checks"]]
    assert Record.from_dict(v1) == Record.from_dict(record("single.a", "fail"))


def test_a_field_scan_reads_a_version_1_line_migrated(tmp_path):
    """The scan gives a few fields of each line as the typed reader would read them: a version-1 line (a check's
    ``status``, the HTTP ``status``) migrated, the verdict and blame as their types, None for a field not there."""
    v1 = {**record("single.a", "fail"), "schema_version": 1}
    v1["status"] = v1.pop("http_status")
    v1["checks"] = [{**{k: v for k, v in c.items() if k != "outcome"}, "status": c["outcome"]} for c in v1["checks"]]
    write_results(tmp_path, [record("single.b"), v1])
    scanned = list(scan_fields(read_run_info(tmp_path), "case_id", "verdict", "blame", "http_status", "failed_checks",
                               "replay.family"))
    assert scanned == [(1, ("single.b", Verdict.PASS, None, 200, frozenset(), None)),
                       (2, ("single.a", Verdict.FAIL, Blame.ENGINE, 200, frozenset({"args_object"}), None))]
    assert [r.verdict for r in read_records(tmp_path)] == [v for _, (_, v, *_) in scanned]


@pytest.mark.parametrize(("damage", "says"), [
    (lambda line: line[:40], r"results\.jsonl:2: not JSON: "),
    (lambda line: line.replace('"verdict"', '"verdict_"'), r"results\.jsonl:2: \$: 'verdict' is a required property"),
], ids=["cut", "not-a-record"])
def test_a_field_scan_names_a_damaged_line_as_the_typed_reader_does(tmp_path, damage, says):
    write_results(tmp_path, [record("single.a"), record("single.b", "fail")])
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text("\n".join([lines[0], damage(lines[1])]) + "\n")
    with pytest.raises(ResultsError, match=says) as scanned:
        list(scan_fields(read_run_info(tmp_path), "case_id"))
    with pytest.raises(ResultsError) as typed:
        list(read_records(tmp_path))
    assert str(scanned.value) == str(typed.value) and str(tmp_path / "results.jsonl") in str(scanned.value)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_the_committed_version_1_snapshot_reads_whole(pair):
    assert check_results(pair) == []
    records = list(read_records(pair))
    run = read_run_info(pair).run
    assert len(records) == sum(run.counts.values()) == 252
    assert all(r.http_status is None or isinstance(r.http_status, int) for r in records)


def test_the_committed_snapshot_builds_into_the_same_matrix(tmp_path):
    build_matrix(PAIRS, tmp_path)
    built = json.loads((tmp_path / "matrix.json").read_text())["cells"]
    committed = json.loads((SNAPSHOT / "matrix" / "matrix.json").read_text())["cells"]
    # Every field the committed matrix has comes out the same; newer builds add fields (engine conformance). Paths
    # are where the page was built (relative to it).
    def placeless(cell: dict, keys) -> dict:
        return {k: [{**r, "path": None} for r in cell[k]] if k == "runs" else cell[k] for k in keys if k != "path"}

    assert [placeless(b, c) for b, c in zip(built, committed)] == [placeless(c, c) for c in committed]
    # Version-1 records hold no evidence: conformance is that of the wire rules, over every record but those that
    # got no answer to judge (an error blamed on infra).
    assert [c["conformance_counts"]["judged"] for c in built] == [
        sum(n for _, _, verdict, blame, n in c["breakdown"] if (verdict, blame) != ("error", "infra")) for c in committed]


CPU_SNAPSHOT = SNAPSHOT.parent / "cpu-qwen2.5-coder"
# A pair's run over chat (MODEL@ENGINE/), and its runs over the other surfaces (MODEL@ENGINE-surfaces/API/).
QWEN = sorted(p.parent for p in CPU_SNAPSHOT.glob("qwen2.5-coder-*@*/**/run.json"))


def made_in(run_dir: Path) -> Path:
    """The directory the snapshot's command was given: a surfaces run writes a folder per surface below it."""
    return run_dir.parent if run_dir.parent.name.endswith("-surfaces") else run_dir


def snapshot_cell(run_dir: Path) -> str:
    """The matrix cell a snapshot directory is named for."""
    folder = made_in(run_dir)
    return run_dir.name if folder == run_dir else f"{folder.name.removesuffix('-surfaces')} [{run_dir.name}]"


@pytest.fixture(scope="module")
def library_ids() -> list[str]:
    from toolmatrix.library.cases import library_dir, load_cases

    return sorted(case.id for case in load_cases([library_dir()], validate=False))


@pytest.mark.parametrize("pair", QWEN, ids=lambda p: str(p.relative_to(CPU_SNAPSHOT)))
def test_the_published_snapshot_is_the_library_and_names_the_pinned_weights(pair, library_ids):
    """The published tables are read from these: every pair a run of today's whole library (a case added,
    renamed or dropped since fails here until the snapshot is regenerated) on the registry's weights."""
    from toolmatrix.serving.registry import load_models

    assert check_results(pair) == []
    run = read_run_info(pair).run
    records = list(read_records(pair))
    assert len(records) == sum(run.counts.values()) and run.cell_key == snapshot_cell(pair)
    for mode in ("nonstream", "stream"):
        ran = sorted(r.case_id for r in records if r.mode == mode)
        missing, extra = sorted(set(library_ids) - set(ran)), sorted(set(ran) - set(library_ids))
        assert ran == library_ids, (f"{mode}: {len(ran)} records for {len(library_ids)} library cases; not run: "
                                    f"{len(missing)} {missing[:3]}, not in the library: {len(extra)} {extra[:3]}")
    model = load_models()[run.model_id]
    assert json.loads((pair / "run.json").read_text())["model"]["weights_sha256"] == model.weights["gguf"]["sha256"]


def test_the_snapshot_is_what_its_one_command_makes():
    """``regenerate.sh`` (docs/published-results.md) issues, for every committed run, the very command its
    ``run.json`` records (the results directory recorded as ``.``), and nothing the snapshot lacks."""
    import shlex
    import subprocess

    printed = subprocess.run(["bash", str(CPU_SNAPSHOT / "regenerate.sh"), "--dry-run"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    issued = {}
    for line in printed[:-1]:
        words = shlex.split(line)
        at = words.index("--results-dir")
        issued[Path(words[at + 1]).name] = words[:at + 1] + ["."] + words[at + 2:]
    assert printed[-1] == "toolmatrix matrix build results/cpu-qwen2.5-coder -o results/cpu-qwen2.5-coder/matrix"
    made = {}
    for run_dir in QWEN:
        command = tuple(json.loads((run_dir / "run.json").read_text())["command"])
        made.setdefault(made_in(run_dir).name, set()).add(command)
    assert {name: {tuple(command)} for name, command in issued.items()} == made
    typo = subprocess.run(["bash", str(CPU_SNAPSHOT / "regenerate.sh"), "--dryrun"], capture_output=True, text=True)
    assert (typo.returncode, typo.stdout) == (2, "") and typo.stderr.startswith("usage: ")


def test_the_published_page_holds_every_pair():
    cells = json.loads((CPU_SNAPSHOT / "matrix" / "matrix.json").read_text())["cells"]
    assert len(QWEN) >= 4 and sorted(c["pair"] for c in cells) == sorted(snapshot_cell(p) for p in QWEN)


@pytest.mark.parametrize("pair", PAIRS[:1], ids=lambda p: p.name)
def test_the_gate_reads_the_committed_snapshot(pair):
    assert run_gate(pair, pair).exit_code == EXIT_PASS


def test_the_writer_publishes_whole_files_only(tmp_path):
    writer = RecordWriter(tmp_path)
    rec = Record.from_dict(record("single.a", "fail"))
    writer.write(Posted.of(rec))
    assert not (tmp_path / "results.jsonl").exists() and (tmp_path / "results.jsonl.partial").is_file()
    run = Run("run-1", "m@e", RunEngine("e", None, "process", []), RunModel("m", "hermes", "m"), {},
              "2026-01-01T00:00:00+00:00", None, "0", writer.counts)
    writer.close(run)
    assert [r.case_id for r in read_records(tmp_path)] == ["single.a"]
    assert json.loads((tmp_path / "run.json").read_text())["counts"]["fail"] == 1


def test_records_of_another_run_make_the_directory_unusable(tmp_path):
    write_results(tmp_path, [record("single.a")])
    lines = (tmp_path / "results.jsonl").read_text().replace('"run-1"', '"run-2"')
    (tmp_path / "results.jsonl").write_text(lines)
    with pytest.raises(ResultsError, match=r"results.jsonl:1: \$.run_id: 'run-2' is not this run's id"):
        list(read_records(tmp_path))
    assert len(check_results(tmp_path)) == 1


COMMITTED = Path(__file__).parents[2] / "results"


def _without_nulls(data: dict) -> dict:
    return {key: value for key, value in data.items() if value is not None}


@pytest.mark.parametrize(("run_dir", "tier", "api", "launcher"), [
    ("cpu-qwen2.5-coder/qwen2.5-coder-0.5b@llamacpp", "live", "chat", "process"),
    ("replay/llama-cpp-python", "replay", "chat", "replay"),
    ("cpu-qwen2.5-coder/qwen2.5-coder-0.5b@vllm-surfaces/responses", "live", "responses", "process"),
], ids=["live", "replay", "surfaces"])
def test_a_committed_run_json_reads_typed_and_writes_back_what_it_holds(run_dir, tier, api, launcher):
    data = json.loads((COMMITTED / run_dir / "run.json").read_text())
    run = read_run_info(COMMITTED / run_dir).run
    assert (run.engine.tier, run.engine.replay, run.api, run.engine.launcher) == (tier, tier == "replay", api, launcher)
    engine = data["engine"]
    assert (run.engine.id, run.engine.version, run.engine.flags) == (engine["id"], engine["version"], engine["flags"])
    assert run.model.family == data["model"]["family"] and run.model.served_name == data["model"]["served_name"]
    written = run.to_dict()
    # Fields a launcher wrote as null are left out on writing (a reader sees None either way); nothing else changes.
    for part in ("engine", "model"):
        assert _without_nulls(written[part]) == _without_nulls(data[part])
    assert written["engine"]["version"] == data["engine"]["version"]  # required by run.schema.json, even null


def test_an_engine_field_no_type_names_is_kept_and_written_back():
    data = json.loads((COMMITTED / "replay/llama-cpp-python/run.json").read_text())
    data["engine"]["accelerator"] = {"kind": "tpu"}  # a launcher of tomorrow tells more
    run = Run.from_dict(data)
    assert run.engine.extra == {"accelerator": {"kind": "tpu"}}
    assert run.to_dict()["engine"]["accelerator"] == {"kind": "tpu"} and "extra" not in run.to_dict()["engine"]
    assert run.engine.skipped_families == data["engine"]["skipped_families"]


def test_an_option_of_the_runs_command_is_read_in_either_spelling():
    run = Run("r", "m@e", RunEngine("e", None, "process", []), RunModel("m", "hermes", "m"), {},
              "2026-11-25T00:00:00+00:00", None, "0", {},
              command=["pytest", "--api-key-env", "KEY", "--fixtures=fx.jsonl", "--results-dir"])
    assert (run.option("--api-key-env"), run.option("--fixtures")) == ("KEY", "fx.jsonl")
    assert run.option("--results-dir") is None and run.option("--model") is None  # no value, no option

"""One matrix cell from the runs of one pair configuration, in a single streaming pass over each run's records.

A cell keeps counts for every record but text for failing ones only, and only as much as its share of the page
allows; every failing record of every run is also copied verbatim to the cell's ``.jsonl`` file, which holds the
full story. Several runs (machines, slices of the cases) make one cell: each case x mode counts once, and one
whose runs disagree on the verdict is *mixed*: neither a pass nor a failure, listed with each run's verdict.
Repeated samples (``--samples``) count each sample: the pass rate is then pass@1 (the mean over samples), and the
cell's ``samples`` adds its interval, pass^k and the case x mode whose samples disagree (``passk``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import IO, Any, Mapping

import attrs

from toolmatrix.base.atomic import Replacing
from toolmatrix.judge.checks import worded_gaps
from toolmatrix.matrix.detail import BLOB_CAP, REASON_CAP, cap, failure_detail
from toolmatrix.records import (
    Outcome,
    ResultsError,
    RunInfo,
    Verdict,
    evidence_label,
    fold,
    repro_command,
    repro_prefix,
    scan_records,
)
from toolmatrix.report.passk import sample_stats

# Flags that change how tool calls are parsed or templated: shown in the column header.
KEY_FLAG = re.compile(r"tool|jinja|template|parser|reasoning|function|grammar", re.IGNORECASE)
FOLDERS = re.compile(r"(?<=[ =])[^\s=:]*/(?=[^\s/]+$)")  # "--x /a/b/c.jinja" -> "--x c.jinja"; a URL stays
HISTORY_CAP = 50  # newly failing / passing cases listed per cell on the page (all of them in matrix.json)
RUNS_CAP = 50  # runs and mixed cases listed per cell on the page (all of them in matrix.json)
MIXED = "mixed"  # a cell's verdict for a case x mode its runs disagree on; never a record's
Key = tuple  # (case_id, mode), or (case_id, mode, sample) for one of repeated samples


def record_key(record: Mapping[str, Any]) -> Key:
    """What a record counts as in a cell: its case x mode, and its sample where it is one of several."""
    sample = record.get("sample")
    return (record["case_id"], record["mode"]) if sample is None else (record["case_id"], record["mode"], sample)


def key_flags(flags: list[str]) -> list[str]:
    """The tool-calling flags of an engine command line, each with its value when it has one; a file by its name
    (where it lay differs from machine to machine; the full flags are in the drill-down)."""
    out = []
    for index, flag in enumerate(flags):
        if flag.startswith("-") and KEY_FLAG.search(flag):
            value = flags[index + 1] if index + 1 < len(flags) and not flags[index + 1].startswith("-") else None
            out.append(FOLDERS.sub("", f"{flag} {value}" if value is not None and "=" not in flag else flag))
    return out


def pass_rate(counts: Counter | dict) -> float | None:
    total = sum(counts.values())
    return round(counts.get("pass", 0) / total, 4) if total else None


def conformance_fields(counts: Counter) -> dict[str, Any]:
    """Engine conformance of a cell: the share of answered exchanges where the engine returned what the model said,
    in a valid wire shape, honouring the request's contract; rows ``[category, mode, conformant, n]`` (conformant
    null: nothing came back to judge)."""
    judged = sum(n for (_, _, ok), n in counts.items() if ok is not None)
    conformant = sum(n for (_, _, ok), n in counts.items() if ok)
    return {"conformance": round(conformant / judged, 4) if judged else None,
            "conformance_counts": {"conformant": conformant, "judged": judged},
            "conformance_breakdown": [[*key, n] for key, n in sorted(counts.items(), key=lambda kv: str(kv[0]))]}


@attrs.define
class _Budget:
    """Bytes of page data one cell may use for its failing cases: a quarter for the list, the rest for details."""

    rows: int
    details: int
    details_full: bool = False

    @classmethod
    def of(cls, total: int) -> _Budget:
        return cls(total // 4, total - total // 4)

    @property
    def blob_cap(self) -> int:
        # Small shares get shorter texts rather than no detail at all.
        return max(400, min(BLOB_CAP, self.details // 6))

    def take_row(self, entry: dict) -> bool:
        size = _size(entry) if self.rows else 0
        if not size or size > self.rows:
            self.rows = 0  # first-come order: later small ones would read as a random pick
            return False
        self.rows -= size
        return True

    def take_detail(self, detail: dict) -> bool:
        size = _size(detail)
        if size > self.details:
            self.details_full = True
            return False
        self.details -= size
        return True


@attrs.frozen
class Cell:
    """A cell for matrix.json (``full``) and for the page (``page``: the same, within its byte budget).

    ``info`` is its newest run; ``outcomes`` what each case x mode came to over all its runs."""

    info: RunInfo
    full: dict
    page: dict
    outcomes: dict[tuple[str, str], Outcome]


class BrokenRun(Exception):
    """A run of a cell whose records are unusable; the message names the file and the problem."""

    def __init__(self, info: RunInfo, message: str):
        super().__init__(message)
        self.info = info


@attrs.frozen
class _RunScan:
    """What one run of a cell came to: each of its case x mode (small tuples only), its evidence statuses and the
    reasons its engine spec declared for the unsupported ones."""

    info: RunInfo
    outcomes: dict[Key, Outcome]
    evidence: Counter
    declared: Counter


@attrs.define
class _Failures:
    """The failing cases of a cell: every one (for matrix.json), those within the page budget, and the file that
    gets every failing record of every run verbatim."""

    budget: _Budget
    details: IO[bytes]
    listed: list[dict] = attrs.Factory(list)
    shown: list[dict] = attrs.Factory(list)

    def copy(self, raw: bytes) -> None:
        self.details.write(raw if raw.endswith(b"\n") else raw + b"\n")

    def add(self, record: dict, prefix: list[str], source: dict) -> None:
        entry = {
            "case_id": record["case_id"], "category": record["category"], "mode": record["mode"],
            "verdict": record["verdict"], "blame": record["blame"], "reason": cap(record["reason"], REASON_CAP),
            "repro": repro_command(prefix, record["case_id"], record["mode"]), **source,
        }
        if record.get("sample") is not None:
            entry["sample"] = record["sample"]
        if record.get("description"):
            entry["description"] = record["description"]
        self.listed.append(entry)
        if self.budget.take_row(entry):
            detail = None if self.budget.details_full else failure_detail(record, self.budget.blob_cap)
            self.shown.append({**entry, "detail": detail} if detail and self.budget.take_detail(detail) else entry)

    def without(self, mixed: set[Key]) -> None:
        """Drop the cases found mixed after they were listed (a newer run failed them, an older one did not)."""
        if mixed:
            self.listed = [e for e in self.listed if record_key(e) not in mixed]
            self.shown = [e for e in self.shown if record_key(e) not in mixed]


def _run_fields(info: RunInfo, details_name: str) -> dict[str, Any]:
    run = info.run
    engine, model = run.engine, run.model
    return {
        "pair": info.pair, "model": run.model_id, "engine": run.engine_id, "api": run.api, "run_id": info.run_id,
        "started": run.started, "finished": run.finished, "exit_status": run.exit_status and run.exit_status.value,
        "path": str(info.path), "details_file": details_name,
        "engine_version": engine.version, "launcher": engine.launcher, "base_url": engine.base_url,
        "flags": engine.flags, "key_flags": key_flags(engine.flags),
        "model_info": {"family": model.family, "served_name": model.served_name, "revision": model.revision,
                       "weights": model.weights, "chat_template": model.chat_template},
        # live: a model served by the engine; replay: the engine's parser fed given text (no model ran)
        "tier": engine.tier,
        **({"skipped_families": dict(engine.skipped_families)} if engine.replay else {}),
    }


def gpu_names(hardware: dict) -> str:
    """The GPUs of a run's machine by name (``2x NVIDIA H100``), or ``CPU`` when it reported none."""
    names = Counter(str(g.get("name")) if isinstance(g, dict) else str(g) for g in hardware.get("gpus") or ())
    return ", ".join(name if n == 1 else f"{n}x {name}" for name, n in names.items()) or "CPU"


def _run_entry(scan: _RunScan) -> dict[str, Any]:
    run, outcomes = scan.info.run, scan.outcomes
    passed = sum(1 for o in outcomes.values() if o.verdict is Verdict.PASS)
    return {"run_id": run.run_id, "host": run.hardware.get("host"), "gpus": gpu_names(run.hardware),
            "case_shard": run.case_shard, "started": run.started, "path": str(scan.info.path),
            "total": len(outcomes), "pass_rate": round(passed / len(outcomes), 4) if outcomes else None}


def summarize_runs(infos: list[RunInfo], budget: int, out_dir: Path, details_name: str) -> Cell:
    """One cell of ``infos`` (newest first), reading each run's records once and copying the failing ones to
    ``out_dir/details_name``.

    Raises BrokenRun (and leaves no details file) when a record of one of the runs is bad.
    """
    details_path = out_dir / details_name
    details_path.parent.mkdir(parents=True, exist_ok=True)
    several = budget // 8 if len(infos) > 1 else 0  # room for the second run on and the mixed cases
    with Replacing(details_path, binary=True) as details:
        failures = _Failures(_Budget.of(budget - several), details)
        merged: dict[Key, Outcome] = {}
        scans = [_scan_run(info, merged, failures, len(infos) > 1) for info in infos]
    return _cell(scans, merged, failures, several, details_name)


def _scan_run(info: RunInfo, merged: dict[Key, Outcome], failures: _Failures, tag: bool) -> _RunScan:
    """One pass over a run: its outcomes, folded into ``merged``; its failing records copied, and listed unless a
    newer run of the cell recorded the case already (each case x mode counts once)."""
    prefix = repro_prefix(info.run)
    source = {"run_id": info.run_id, "host": info.run.hardware.get("host")} if tag else {}
    outcomes: dict[Key, Outcome] = {}
    evidence: Counter = Counter()
    declared: Counter = Counter()
    try:
        for line in scan_records(info):
            record = line.data  # failing records are copied as they are: the typed Record is not needed here
            key = record_key(record)
            outcome = outcomes[key] = line.outcome
            asked = record.get("evidence") or {}
            evidence[evidence_label(asked.get("status", "not asked"), asked.get("source"))] += 1
            if outcome.verdict is Verdict.PASS:
                continue
            if outcome.verdict is Verdict.UNSUPPORTED:
                declared.update(worded_gaps(record.get("gaps") or {}))  # each gap once however many cases share it
            failures.copy(line.raw)
            if key not in merged:
                failures.add(record, prefix, source)
    except ResultsError as exc:
        raise BrokenRun(info, str(exc)) from None
    _fold(merged, outcomes)
    return _RunScan(info, outcomes, evidence, declared)


def _fold(merged: dict[Key, Outcome], outcomes: Mapping[Key, Outcome]) -> None:
    for key, outcome in outcomes.items():
        first = merged.setdefault(key, outcome)
        if first is not outcome:
            merged[key] = _combine(first, outcome)


def _combine(newer: Outcome, older: Outcome) -> Outcome:
    """One case x mode of two runs: mixed where one passed and the other did not (with the first failure's blame),
    else the newer verdict (a fail on one machine and an error on another passed nowhere: it stays a failure);
    conformant only if no run found the engine at fault, and judged if any run was."""
    passed = {newer.verdict, older.verdict} & {Verdict.PASS, MIXED}
    verdict = MIXED if passed and newer.verdict != older.verdict else newer.verdict
    blamed = older if newer.verdict is Verdict.PASS else newer
    conformant: bool | None
    if False in (newer.conformant, older.conformant):
        conformant = False
    else:
        conformant = None if newer.conformant is None and older.conformant is None else True
    # verdict may be the cell's own MIXED, a word no record holds (Outcome's type knows the records' only).
    return Outcome(newer.category, verdict, blamed.blame, blamed.reason, conformant)  # type: ignore[arg-type]


def _mixed(merged: dict[Key, Outcome], scans: list[_RunScan]) -> list[dict]:
    """Each mixed case x mode with every verdict recorded for it: run, host, verdict, blame and reason."""
    out = []
    for key, outcome in merged.items():
        if outcome.verdict != MIXED:
            continue
        runs = [(scan.info.run, scan.outcomes[key]) for scan in scans if key in scan.outcomes]
        out.append({"case_id": key[0], "mode": key[1], **({"sample": key[2]} if len(key) > 2 else {}),
                    "category": outcome.category, "runs": [
            {"run_id": run.run_id, "host": run.hardware.get("host"), "verdict": str(o.verdict),
             "blame": o.blame and str(o.blame), "reason": cap(o.reason, REASON_CAP)} for run, o in runs]})
    return sorted(out, key=_order)


def _rows(counts: Counter) -> list[list]:
    """Counter keys as JSON rows, enum members as their words, in a stable order."""
    rows = [[*(str(v) if isinstance(v, str) else v for v in key), n] for key, n in counts.items()]
    return sorted(rows, key=lambda row: str(tuple(row[:-1])))


def _cell(scans: list[_RunScan], merged: dict[Key, Outcome], failures: _Failures, several: int,
          details_name: str) -> Cell:
    breakdown = Counter((o.category, key[1], o.verdict, o.blame) for key, o in merged.items())
    conformance = Counter((o.category, key[1], o.conformant) for key, o in merged.items())
    mixed = _mixed(merged, scans)
    failures.without({record_key(m) for m in mixed})
    runs = [_run_entry(scan) for scan in scans]
    breakdown_rows = _rows(breakdown)
    counts: Counter = Counter()
    for _, _, verdict, _, n in breakdown_rows:
        counts[verdict] += n
    base = {
        **_run_fields(scans[0].info, details_name),
        "total": sum(counts.values()), "counts": dict(counts), "pass_rate": pass_rate(counts),
        "breakdown": breakdown_rows, **conformance_fields(conformance),
        "evidence": dict(sorted(sum((s.evidence for s in scans), Counter()).items())),
        "failures_total": len(failures.listed), "runs_total": len(runs), "mixed_total": len(mixed), "history": None,
        **_samples_field(merged), **_unsupported_field(counts, scans),
    }
    full = {**base, "runs": runs, "mixed": mixed, "failures": sorted(failures.listed, key=_order)}
    listed = [{k: v for k, v in run.items() if k != "path"} for run in runs]  # the page has no use for paths
    page = {**base, "runs": listed[:1] + capped(listed[1:], RUNS_CAP - 1, several // 2),
            "mixed": capped(mixed, RUNS_CAP, several // 2), "failures": sorted(failures.shown, key=_order),
            "details_shown": sum(1 for e in failures.shown if "detail" in e)}
    return Cell(scans[0].info, full, page, {key: fold(samples) for key, samples in _by_case_mode(merged).items()})


def _by_case_mode(merged: Mapping[Key, Outcome]) -> dict[tuple[str, str], list[Outcome]]:
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for key, outcome in merged.items():
        groups.setdefault(key[:2], []).append(outcome)
    return groups


def _unsupported_field(counts: Counter, scans: list[_RunScan]) -> dict[str, Any]:
    """``unsupported_reason``: in a cell whose every record is unsupported (a surface the engine does not serve,
    say), why, as the engine spec declares it: not a failure at 0 %."""
    if not counts or set(counts) != {Verdict.UNSUPPORTED.value}:
        return {}
    declared = sum((scan.declared for scan in scans), Counter())
    return {"unsupported_reason": cap("; ".join(reason for reason, _ in declared.most_common()), REASON_CAP)}


def _samples_field(merged: Mapping[Key, Outcome]) -> dict[str, Any]:
    """``samples``: the statistics of repeated samples, in a cell with more than one sample per case x mode."""
    groups = _by_case_mode(merged)
    if all(len(outcomes) == 1 for outcomes in groups.values()):
        return {}
    return {"samples": sample_stats(groups)}


def _order(entry: dict) -> tuple:
    return entry["category"], entry["case_id"], entry["mode"], entry.get("sample") or 0


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def history(previous: RunInfo, before: dict[tuple[str, str], Outcome], now: dict[tuple[str, str], Outcome]) -> dict:
    """Cases newly failing / newly passing since ``previous`` (cases in only one of the runs are counted)."""
    def entry(key: tuple[str, str], was: Outcome) -> dict:
        o = now[key]
        return {"case_id": key[0], "mode": key[1], "category": o.category, "was": was.verdict, "now": o.verdict,
                "blame": o.blame, "reason": cap(o.reason, REASON_CAP)}

    common = sorted(before.keys() & now.keys())
    return {
        "previous_run_id": previous.run_id, "previous_started": previous.run.started,
        "previous_path": str(previous.path),
        "newly_failing": [entry(k, before[k]) for k in common if before[k].verdict == "pass" != now[k].verdict],
        "newly_passing": [entry(k, before[k]) for k in common if before[k].verdict != "pass" == now[k].verdict],
        "added": len(now.keys() - before.keys()), "removed": len(before.keys() - now.keys()),
    }


def page_history(changes: dict, budget: int) -> dict:
    """The history of a cell with its lists cut to ``budget`` bytes (and at most HISTORY_CAP entries each)."""
    out = dict(changes)
    for key in ("newly_failing", "newly_passing"):
        out[key + "_total"] = len(changes[key])
        out[key] = capped(changes[key], HISTORY_CAP, budget // 2)
    return out


def capped(entries: list[dict], limit: int, room: int) -> list[dict]:
    """The first of ``entries`` (at most ``limit``) that fit in ``room`` bytes: first come, not a random pick."""
    kept = []
    for entry in entries[:limit]:
        room -= _size(entry)
        if room < 0:
            break
        kept.append(entry)
    return kept

"""One matrix cell from one run, in a single streaming pass over its records.

A cell keeps counts for every record but text for failing ones only, and only as much as its share of the page
allows; every failing record is also copied verbatim to the cell's ``.jsonl`` file, which holds the full story.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from toolmatrix.matrix.detail import BLOB_CAP, REASON_CAP, cap, failure_detail
from toolmatrix.results import Outcome, RunInfo, Verdict, repro_command, scan_records

# Flags that change how tool calls are parsed or templated: shown in the column header.
KEY_FLAG = re.compile(r"tool|jinja|template|parser|reasoning|function|grammar", re.IGNORECASE)
HISTORY_CAP = 50  # newly failing / passing cases listed per cell on the page (all of them in matrix.json)


def key_flags(flags: list[str]) -> list[str]:
    """The tool-calling flags of an engine command line, each with its value when it has one."""
    out = []
    for index, flag in enumerate(flags):
        if flag.startswith("-") and KEY_FLAG.search(flag):
            value = flags[index + 1] if index + 1 < len(flags) and not flags[index + 1].startswith("-") else None
            out.append(f"{flag} {value}" if value is not None and "=" not in flag else flag)
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
    """A cell for matrix.json (``full``) and for the page (``page``: the same, within its byte budget)."""

    info: RunInfo
    full: dict
    page: dict
    outcomes: dict[tuple[str, str], Outcome]


def _run_fields(info: RunInfo, details_name: str) -> dict[str, Any]:
    run = info.run
    engine, model = run.engine, run.model
    return {
        "pair": info.pair, "model": run.model_id, "engine": run.engine_id, "run_id": info.run_id,
        "started": run.started, "finished": run.finished, "exit_status": run.exit_status and run.exit_status.value,
        "path": str(info.path), "details_file": details_name,
        "engine_version": engine.get("version"), "launcher": engine.get("launcher"),
        "base_url": engine.get("base_url"), "flags": engine.get("flags", []),
        "key_flags": key_flags(engine.get("flags", [])),
        "model_info": {k: model.get(k) for k in ("family", "served_name", "revision", "weights", "chat_template")},
    }


def summarize_run(info: RunInfo, budget: int, out_dir: Path, details_name: str) -> Cell:
    """Read every record of ``info`` once, copying the failing ones to ``out_dir/details_name``.

    Raises ResultsError (and leaves no details file) when a record is bad.
    """
    details_path = out_dir / details_name
    details_path.parent.mkdir(parents=True, exist_ok=True)
    partial = details_path.with_name(details_path.name + ".partial")
    try:
        with partial.open("wb") as details:
            cell = _summarize(info, _Budget.of(budget), details, details_name)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, details_path)
    return cell


def _summarize(info: RunInfo, budget: _Budget, details: Any, details_name: str) -> Cell:
    prefix = info.run.repro_prefix()
    blob_cap = budget.blob_cap
    breakdown: Counter = Counter()
    outcomes: dict[tuple[str, str], Outcome] = {}
    failures: list[dict] = []
    shown: list[dict] = []
    conformance: Counter = Counter()
    evidence: Counter = Counter()
    for line in scan_records(info):
        record = line.data  # failing records are copied as they are: the typed Record is not needed here
        outcome = line.outcome
        breakdown[record["category"], record["mode"], record["verdict"], record["blame"]] += 1
        conformance[record["category"], record["mode"], outcome.conformant] += 1
        evidence[(record.get("evidence") or {}).get("status", "not asked")] += 1
        outcomes[record["case_id"], record["mode"]] = outcome
        if record["verdict"] == Verdict.PASS:
            continue
        details.write(line.raw if line.raw.endswith(b"\n") else line.raw + b"\n")
        entry = {
            "case_id": record["case_id"], "category": record["category"], "mode": record["mode"],
            "verdict": record["verdict"], "blame": record["blame"], "reason": cap(record["reason"], REASON_CAP),
            "repro": repro_command(prefix, record["case_id"], record["mode"]),
        }
        if record.get("description"):
            entry["description"] = record["description"]
        failures.append(entry)
        if budget.take_row(entry):
            detail = None if budget.details_full else failure_detail(record, blob_cap)
            shown.append({**entry, "detail": detail} if detail and budget.take_detail(detail) else entry)
    counts: Counter = Counter()
    for (_, _, verdict, _), n in breakdown.items():
        counts[verdict] += n
    base = {
        **_run_fields(info, details_name),
        "total": sum(counts.values()), "counts": dict(counts), "pass_rate": pass_rate(counts),
        "breakdown": [[*key, n] for key, n in sorted(breakdown.items(), key=lambda kv: str(kv[0]))],
        **conformance_fields(conformance), "evidence": dict(sorted(evidence.items())),
        "failures_total": len(failures), "history": None,
    }
    order = lambda e: (e["category"], e["case_id"], e["mode"])  # noqa: E731
    full = {**base, "failures": sorted(failures, key=order)}
    page = {**base, "failures": sorted(shown, key=order),
            "details_shown": sum(1 for e in shown if "detail" in e)}
    return Cell(info, full, page, outcomes)


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
        kept, room = [], budget // 2
        for entry in changes[key][:HISTORY_CAP]:
            room -= _size(entry)
            if room < 0:
                break
            kept.append(entry)
        out[key] = kept
    return out

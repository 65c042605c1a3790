"""The version axis of a replay sweep (``toolmatrix replay-versions``): per engine, families x releases, each cell the
family's pass share on that release, and every record whose verdict flipped between two adjacent releases (a
regression where a pass stopped passing, a fix where it started). Reads ``DIR/ENGINE@VERSION`` runs as
``toolmatrix replay-sweep`` writes them; the page can show the same ``Sweep``.

A sweep over the full fixture set is gigabytes of records; its summary (``replay-versions DIR --write FILE``: each
family's share per release, every flipped record with its reason on both sides) is what a snapshot keeps and what
``matrix build --versions FILE`` lays out."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import attrs
from packaging.version import InvalidVersion, Version

from toolmatrix.base.atomic import write_text
from toolmatrix.records import RECORDS, ResultsError, Verdict, read_run_info, run_dirs, scan_fields

REGRESSION, FIX = "regression", "fix"
SUMMARY_KIND, SUMMARY_SCHEMA = "toolmatrix-versions", 1
REASON_CHARS = 300  # a flipped record's reason in the summary: its first words say what broke


@attrs.frozen
class Column:
    """One release of one engine: each record's verdict and family, and the families it skipped, with why."""

    engine: str
    version: str
    verdicts: dict[tuple[str, str], Verdict]  # (case_id, mode) -> verdict
    families: dict[tuple[str, str], str]  # (case_id, mode) -> family
    skipped: dict[str, str]  # family -> why the release replayed none of it
    reasons: dict[tuple[str, str], str] = attrs.field(factory=dict)  # (case_id, mode) -> why it did not pass

    def share(self, family: str) -> tuple[int, int] | None:
        """(passing, replayed) records of the family; None where the release replayed none of it."""
        verdicts = [v for key, v in self.verdicts.items() if self.families[key] == family]
        return (sum(v is Verdict.PASS for v in verdicts), len(verdicts)) if verdicts else None


@attrs.frozen
class Flip:
    """A record whose pass/non-pass verdict changed from ``before`` to ``after``, adjacent replayed releases."""

    engine: str
    family: str
    before: str
    after: str
    case_id: str
    mode: str
    was: Verdict
    now: Verdict
    why_was: str = ""  # the record's reason at ``before`` ("" where it passed)
    why_now: str = ""

    @property
    def kind(self) -> str:
        return FIX if self.now is Verdict.PASS else REGRESSION


@attrs.frozen
class Sweep:
    columns: dict[str, list[Column]]  # engine -> its releases, oldest first

    def families(self, engine: str) -> list[str]:
        found = {f for c in self.columns[engine] for f in (*c.families.values(), *c.skipped)}
        return sorted(found)

    def flips(self, engine: str) -> list[Flip]:
        """Every flip between each two adjacent releases that replayed (a release that could not replay at all
        is stepped over: the flip is then between its neighbours)."""
        replayed = [c for c in self.columns[engine] if c.verdicts]
        return [flip for older, newer in zip(replayed, replayed[1:]) for flip in _flips(older, newer)]

    def flip_groups(self, engine: str) -> dict[tuple[str, str, str, str], list[Flip]]:
        """The flips by (release before, release after, kind, family), in release order."""
        grouped: dict[tuple[str, str, str, str], list[Flip]] = {}
        for flip in self.flips(engine):
            grouped.setdefault((flip.before, flip.after, flip.kind, flip.family), []).append(flip)
        return grouped

    def arrivals(self, engine: str) -> list[tuple[str, str, str]]:
        """(family, release, why the release before skipped it) for each family a release replays that the
        release before it skipped: a parser added, not a fix."""
        replayed = [c for c in self.columns[engine] if c.verdicts]
        return [(family, newer.version, older.skipped[family]) for older, newer in zip(replayed, replayed[1:])
                for family in sorted(older.skipped) if newer.share(family) is not None]


def _flips(older: Column, newer: Column) -> Iterator[Flip]:
    for key in sorted(older.verdicts.keys() & newer.verdicts.keys()):
        was, now = older.verdicts[key], newer.verdicts[key]
        if (was is Verdict.PASS) != (now is Verdict.PASS):
            yield Flip(newer.engine, newer.families[key], older.version, newer.version, *key, was, now,
                       older.reasons.get(key, ""), newer.reasons.get(key, ""))


def _version_key(column: Column) -> tuple[int, Version | str]:
    try:
        return 0, Version(column.version)
    except InvalidVersion:
        return 1, column.version  # not a version (a branch build): after the releases


def read_column(directory: Path) -> Column:
    """One sweep run; ResultsError naming the directory where it is not a finished replay run."""
    info = read_run_info(directory)
    run = info.run
    engine, _, at = directory.name.partition("@")
    version = str(run.engine.version or at)
    verdicts, families, reasons = {}, {}, {}
    # Six fields of each record, scanned rather than typed: a release of a full sweep is 10^5 records.
    for number, (case_id, mode, verdict, replayed_by, family, reason) in scan_fields(
            info, "case_id", "mode", "verdict", "replay.engine", "replay.family", "reason"):
        if replayed_by is None:
            raise ResultsError(f"{directory / RECORDS}:{number}: not a replay record")
        key = (case_id, mode)
        verdicts[key], families[key] = verdict, family or ""  # a compact record omits a family left at ""
        if reason:
            reasons[key] = reason[:REASON_CHARS]
    return Column(run.engine.id, version, verdicts, families, dict(run.engine.skipped_families), reasons)


def _sweep_runs(directory: Path) -> list[Path]:
    """The runs directly under ``directory`` named ``ENGINE@VERSION`` (a run that died there too, for its reader
    to name); none where it holds no run."""
    try:
        found = run_dirs(directory)
    except ResultsError:
        return []
    return [run for run in found if run.parent == directory and "@" in run.name]


def is_sweep(directory: Path) -> bool:
    """Whether ``directory`` holds replay runs of one engine at two releases or more directly under it (its
    ``run.json`` files alone are read: a snapshot of live runs is told apart cheaply)."""
    versions: dict[str, set[str]] = {}
    for run_dir in _sweep_runs(directory):
        try:
            engine = read_run_info(run_dir).run.engine
        except ResultsError:
            continue  # read_sweep names it
        if engine.replay:
            versions.setdefault(engine.id, set()).add(str(engine.version))
    return any(len(found) > 1 for found in versions.values())


def read_sweep(directory: Path) -> Sweep:
    """Every ``ENGINE@VERSION`` run directly under ``directory``; ResultsError where there is none."""
    runs = _sweep_runs(directory)
    if not runs:
        raise ResultsError(f"{directory}: no ENGINE@VERSION run in it (toolmatrix replay-sweep writes them)")
    columns: dict[str, list[Column]] = {}
    for column in map(read_column, runs):
        columns.setdefault(column.engine, []).append(column)
    return Sweep({engine: sorted(found, key=_version_key) for engine, found in sorted(columns.items())})


def layout(sweep: Sweep, source: str) -> list[dict[str, Any]]:
    """Per engine of ``sweep`` (read from ``source``): ``{"engine", "source", "releases", "families", "cells",
    "flips", "arrivals"}``, the form the page, matrix.md, the table and a summary file share. ``cells[family]``
    holds per release ``{"pass", "total", "rate", "flips": [index]}`` or ``{"reason"}`` (not replayed there, and
    why) or None (no fixture of it); ``flips[index]`` is ``{"before", "after", "kind", "family", "count",
    "records": [[case_id, mode, was, now, why_was, why_now]]}`` (the page may hold fewer records than ``count``)."""
    out = []
    for engine, columns in sweep.columns.items():
        flips = [{"before": before, "after": after, "kind": kind, "family": family, "count": len(found),
                  "records": [[f.case_id, f.mode, str(f.was), str(f.now), f.why_was, f.why_now] for f in found]}
                 for (before, after, kind, family), found in sweep.flip_groups(engine).items()]
        cells: dict[str, list[dict[str, Any] | None]] = {}
        for family in sweep.families(engine):
            row: list[dict[str, Any] | None] = []
            for column in columns:
                share = column.share(family)
                if share is None:
                    row.append({"reason": column.skipped[family]} if family in column.skipped else None)
                    continue
                marked = [i for i, f in enumerate(flips) if f["family"] == family and f["after"] == column.version]
                row.append({"pass": share[0], "total": share[1], "rate": round(share[0] / share[1], 4),
                            "flips": marked})
            cells[family] = row
        out.append({"engine": engine, "source": source, "releases": [c.version for c in columns],
                    "families": sweep.families(engine), "cells": cells, "flips": flips,
                    "arrivals": [{"family": f, "version": v, "reason": why} for f, v, why in sweep.arrivals(engine)]})
    return out


def write_summary(entries: list[dict[str, Any]], path: Path, fixtures: str = "") -> None:
    """The sweep's summary file (``replay-versions --write``): ``entries`` as ``layout`` gives them, and the fixture
    file they replayed (its path as given and sha256) and when, written whole or not at all; not where the runs lay
    (``read_versions`` names the summary itself as the source), nor this machine's paths in a reason (a worker's
    traceback: written as the results are, ``{cache}/…``, relative to the checkout)."""
    import hashlib

    from toolmatrix.serving.runinfo import Portable

    path.parent.mkdir(parents=True, exist_ok=True)
    named = {"path": fixtures, "sha256": hashlib.sha256(Path(fixtures).read_bytes()).hexdigest()} if fixtures else None
    kept = Portable.here(path.parent).data([{key: value for key, value in entry.items() if key != "source"}
                                            for entry in entries])
    write_text(path, json.dumps({"kind": SUMMARY_KIND, "schema_version": SUMMARY_SCHEMA,
                                 "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                 "fixtures": named, "engines": kept}, ensure_ascii=False, indent=1) + "\n")


def read_versions(path: Path) -> list[dict[str, Any]]:
    """A sweep directory (``DIR/ENGINE@VERSION`` runs) or a summary file, as ``layout`` entries; ResultsError
    naming the path where it is neither."""
    if path.is_dir():
        return layout(read_sweep(path), str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: not a sweep directory or summary: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != SUMMARY_KIND:
        raise ResultsError(f"{path}: not a replay-versions summary (no \"kind\": \"{SUMMARY_KIND}\")")
    if data.get("schema_version") != SUMMARY_SCHEMA or not isinstance(data.get("engines"), list):
        raise ResultsError(f"{path}: schema_version {data.get('schema_version')!r}: this toolmatrix reads "
                           f"{SUMMARY_SCHEMA} (regenerate it with replay-versions --write)")
    return [{**entry, "source": str(path)} for entry in data["engines"]]  # where the page's reader finds it


def last_line(text: str, empty: str = "?") -> str:
    """A reason's last line, where pip and a dying worker put the error itself (``empty`` for a blank reason)."""
    return (text.strip().splitlines() or [empty])[-1][:200]


def marks(cell: dict[str, Any], flips: list[dict[str, Any]], symbols: dict[str, str]) -> str:
    """A ``layout`` cell's changes since the release before, one mark per kind (``symbols``: kind -> its mark)."""
    return "".join(sorted({symbols[flips[i]["kind"]] for i in cell["flips"]}))


def _cell(cell: dict[str, Any] | None, flips: list[dict[str, Any]]) -> str:
    if cell is None:
        return ""
    if "reason" in cell:
        return "n/a"
    mark = marks(cell, flips, {REGRESSION: "v", FIX: "^"})
    return f"{cell['pass']}/{cell['total']}{' ' + mark if mark else ''}"


def table(entries: list[dict[str, Any]]) -> str:
    """Per engine, families x releases (``passing/replayed``; ``^`` a fix from the release before, ``v`` a
    regression, ``n/a`` skipped), then each flip with its records, the families a release replays first, and the
    releases that could not replay."""
    from tabulate import tabulate

    parts = []
    for entry in entries:
        flips, cells = entry["flips"], entry["cells"]
        rows = [[family, *(_cell(c, flips) for c in cells[family])] for family in entry["families"]]
        parts.append(tabulate(rows, headers=[entry["engine"], *entry["releases"]]))
        parts += [f"{f['kind']} {f['before']} -> {f['after']} {f['family']}: "
                  + ", ".join(f"{case} [{mode}] {was}->{now}" for case, mode, was, now, *_ in f["records"])
                  for f in flips]
        parts += [f"first replayed at {a['version']}: {a['family']} (before: {last_line(a['reason'])})"
                  for a in entry["arrivals"]]
        missing = [(v, [c for c in (cells[f][i] for f in entry["families"]) if c]) for i, v in
                   enumerate(entry["releases"])]
        # a release that replayed nothing: the reason most of its families give (the rest are the spec's own skips)
        parts += [f"{version}: cannot replay here: {last_line(Counter(c['reason'] for c in found).most_common(1)[0][0])}"
                  for version, found in missing if found and all("reason" in c for c in found)]
        parts.append("")
    return "\n".join(parts)

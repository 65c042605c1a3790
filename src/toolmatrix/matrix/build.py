"""Merge result directories into one matrix: ``index.html``, ``matrix.md``, ``matrix.json`` and ``cells/*.jsonl``.

Per pair (``run.json`` ``pair``) the newest valid run and the runs of its configuration (``configuration``) on
other machines or slices of the cases are the cell: the newest run of each host and case shard. The newest valid
run not in the cell is its history; older runs are not read at all. Only ``run.json`` files are read before
choosing, so a build costs one pass over the records that are shown. Unusable directories are reported by name
with the reason and skipped. A folder given that holds one engine's replay runs at several releases (a sweep,
``DIR/ENGINE@VERSION``), or a sweep's summary file, gives the page its version axis (``matrix.versions``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import re
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from itertools import repeat
from pathlib import Path
from typing import Iterable, Iterator

import attrs

from toolmatrix.base.atomic import Replacing, write_text
from toolmatrix.matrix.cell import BrokenRun, Cell, history, key_flags, page_history, summarize_runs
from toolmatrix.matrix.page import render_html, render_markdown
from toolmatrix.records import ResultsError, Run, RunInfo, read_outcomes, read_run_info, run_dirs
from toolmatrix.replay.versions import is_sweep, read_versions
from toolmatrix.serving.runinfo import Portable, toolmatrix_version

# Bytes of page data shared by all cells (page <= 1.5 MB). Each cell gets a fair share of what is left (a share
# one cell does not use passes on to the next); its counts, flags, breakdown and newest run take about
# CELL_SUMMARY_BYTES, the rest goes to its failing cases (7/8; of a cell of several runs, 1/8 of that to its other
# runs and its mixed cases) and its history (1/8).
PAGE_DATA_BUDGET = 1_300_000
CELL_SUMMARY_BYTES = 3_000
MIN_CELL_TEXT = 2_000
PAGE_FLIP_RECORDS = 25  # records shown per flip of the version axis
CELLS_DIR = "cells"


@attrs.frozen
class Skipped:
    """An input that is not in the matrix, and why (the reason names the file and the problem)."""

    path: str
    reason: str


@attrs.frozen
class CellReport:
    pair: str
    path: str
    run_id: str
    total: int
    pass_rate: float | None
    previous: str | None  # the run the history compares with
    newly_failing: int
    newly_passing: int
    runs: int  # in the cell: one per machine and slice of the cases
    mixed: int  # case x mode its runs disagree on


@attrs.frozen
class BuildReport:
    """What a build did: the cells, the inputs skipped, older runs not shown, the files written."""

    cells: tuple[CellReport, ...]
    skipped: tuple[Skipped, ...]
    superseded: tuple[str, ...]
    outputs: tuple[Path, ...]


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[Skipped]]:
    """Results directories named or found below the given paths (a directory of runs is searched); a path that
    holds none is skipped with why."""
    found: dict[Path, None] = {}
    skipped = []
    for path in paths:
        try:
            found.update(dict.fromkeys(run_dirs(path)))
        except ResultsError as exc:
            skipped.append(Skipped(str(path), str(exc)))
    return list(found), skipped


def _slug(pair: str) -> str:
    # File names from untrusted ids: no separators, no leading dot, and a hash against collisions.
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", pair).lstrip(".")[:80]
    return f"{safe}-{hashlib.sha256(pair.encode()).hexdigest()[:8]}"


def configuration(run: Run) -> tuple:
    """What makes two runs of a pair comparable: the engine (id, version, launcher, tool-calling flags, image), the
    model (weights, chat template, revision) and toolmatrix's version. Not every flag: ports differ from machine to
    machine, and a path by its folder (the file's hash is compared apart)."""
    engine, model = run.engine, run.model
    return (run.engine_id, engine.version, engine.launcher, tuple(key_flags(engine.flags)),
            engine.image_digest or engine.image, model.weights_sha256, model.chat_template_sha256, model.revision,
            run.toolmatrix_version)


def cell_runs(runs: list[RunInfo]) -> list[RunInfo]:
    """The runs of a pair's cell (``runs`` newest first), all of the newest run's configuration. A run of a
    fan-out (``batch``) is one cell with the other shards of its batch, the newest run of each shard (a retried
    shard replaces its lost attempt); a run of no batch, with the newest run of each other host and case slice
    that ran outside any batch."""
    first = runs[0].run
    wanted = configuration(first), first.batch
    newest: dict[tuple, RunInfo] = {}
    for info in runs:
        run = info.run
        if (configuration(run), run.batch) == wanted:
            key = (run.shard,) if run.batch else (run.hardware.get("host"), run.case_shard)
            newest.setdefault(key, info)
    return list(newest.values())


def _newest_first(infos: list[RunInfo]) -> dict[str, list[RunInfo]]:
    by_pair: dict[str, list[RunInfo]] = defaultdict(list)
    for info in infos:
        by_pair[info.pair].append(info)
    for runs in by_pair.values():
        runs.sort(key=lambda i: (i.started, i.run.finished or "", i.run_id, str(i.path)), reverse=True)
    return by_pair


class _MatrixJson:
    """Writes matrix.json one cell at a time (the failing cases of all cells need not fit in memory), in place
    only once whole."""

    def __init__(self, path: Path):
        self.file = Replacing(path)
        self.file.handle.write('{"format": "toolmatrix-matrix", "format_version": 1, "cells": [')
        self.count = 0

    def add(self, cell: dict) -> None:
        self.file.handle.write(("," if self.count else "") + "\n" + json.dumps(cell, ensure_ascii=False, default=str))
        self.count += 1

    def close(self, tail: dict) -> None:
        self.file.handle.write("\n],\n" + json.dumps(tail, ensure_ascii=False, indent=1)[1:].lstrip())
        self.file.publish()

    def abort(self) -> None:
        self.file.discard()


@attrs.frozen
class _Chosen:
    cell: Cell | None
    unread: list[RunInfo]
    skipped: list[Skipped]


def _choose(runs: list[RunInfo], share: int, out_dir: Path) -> _Chosen:
    """The cell of the valid runs (``cell_runs``), with the history against the next valid one; the runs left
    unread."""
    candidates, skipped = list(runs), []
    budget = max(MIN_CELL_TEXT, share - CELL_SUMMARY_BYTES)
    details_name = f"{CELLS_DIR}/{_slug(runs[0].pair)}.jsonl"
    cell = None
    while candidates and cell is None:
        members = cell_runs(candidates)
        try:
            cell = summarize_runs(members, budget - budget // 8, out_dir, details_name)
        except BrokenRun as exc:  # the cell without it: another run of its machine may fill its place
            skipped.append(Skipped(str(exc.info.path), str(exc)))
            candidates = [c for c in candidates if c is not exc.info]
    if cell is None:
        return _Chosen(None, [], skipped)
    in_cell = {info.path for info in members}
    rest = (info for info in candidates if info.path not in in_cell)
    for info in rest:
        try:
            changes = history(info, read_outcomes(info), cell.outcomes)
        except ResultsError as exc:
            skipped.append(Skipped(str(info.path), str(exc)))
            continue
        cell.full["history"] = changes
        cell.page["history"] = page_history(changes, budget // 8)
        break
    return _Chosen(attrs.evolve(cell, outcomes={}), list(rest), skipped)  # outcomes: not worth pickling back


def _choose_all(by_pair: dict[str, list[RunInfo]], out_dir: Path, jobs: int) -> Iterator[_Chosen]:
    tasks = [by_pair[pair] for pair in sorted(by_pair)]
    if jobs <= 1 or len(tasks) < 2:
        left = PAGE_DATA_BUDGET
        for index, runs in enumerate(tasks):
            chosen = _choose(runs, left // (len(tasks) - index), out_dir)
            left -= _page_bytes(chosen)
            yield chosen
        return
    # Shares fixed up front (the cells are read at once); spawn: fresh workers, nothing inherited from a host
    # process such as pytest and its threads.
    share = PAGE_DATA_BUDGET // len(tasks)
    with ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(_choose, tasks, repeat(share), repeat(out_dir))


def _page_bytes(chosen: _Chosen) -> int:
    return len(json.dumps(chosen.cell.page, ensure_ascii=False, default=str)) if chosen.cell else 0


def build_matrix(result_dirs: list[Path], out_dir: Path, *, title: str = "toolmatrix", jobs: int = 1,
                 triage: Path | None = None, versions: Iterable[Path] = ()) -> BuildReport:
    """Merge ``result_dirs`` (or directories holding them) into ``out_dir``; never raises on bad inputs.
    ``triage``: the file that classifies the replay cells' failures (``TRIAGE.md``), linked from the page.
    ``versions``: sweep summary files (``replay-versions --write``) for the version axis.

    ``jobs`` > 1 reads that many pairs at once in worker processes (for big matrices: about 10 s per 10^6
    records and core).
    """
    given, summaries = [Path(p) for p in result_dirs], [Path(p) for p in versions]
    paths, skipped = discover(given)
    infos = []
    for path in paths:
        try:
            infos.append(read_run_info(path))
        except ResultsError as exc:
            skipped.append(Skipped(str(path), str(exc)))
    by_pair = _newest_first(infos)
    axis = _versions([*(p for p in given if p.is_dir() and is_sweep(p)), *summaries], skipped)
    if not by_pair and not axis:  # nothing to show: an empty page would pass for a result, an older page stays
        return BuildReport((), tuple(skipped), (), ())
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = page_paths([*given, *paths, *summaries], out_dir)
    cells_dir = out_dir / CELLS_DIR
    matrix_json = _MatrixJson(out_dir / "matrix.json")
    page_cells, reports, superseded, details = [], [], [], set()
    try:
        for chosen in _choose_all(by_pair, out_dir, jobs):
            skipped += chosen.skipped
            superseded += [str(i.path) for i in chosen.unread]
            if chosen.cell is None:
                continue
            matrix_json.add(shown.data(chosen.cell.full))
            page_cells.append(shown.data(chosen.cell.page))
            details.add(chosen.cell.full["details_file"])
            reports.append(_report(chosen.cell))
    except BaseException:
        matrix_json.abort()
        raise
    if not page_cells and not axis:  # every run unreadable: as with no run at all, an older page stays
        matrix_json.abort()
        for made in (cells_dir, out_dir):  # and a new output folder is not left behind, empty
            with contextlib.suppress(OSError):
                made.rmdir()
        return BuildReport((), tuple(skipped), tuple(superseded), ())
    for stale in cells_dir.glob("*.jsonl") if cells_dir.is_dir() else ():
        if f"{CELLS_DIR}/{stale.name}" not in details:
            stale.unlink()  # cells/ is ours: a file of a pair no longer shown would mislead
    data = {
        "title": title, "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "toolmatrix_version": toolmatrix_version(), "page_budget_bytes": PAGE_DATA_BUDGET,
        "skipped": shown.data([attrs.asdict(s) for s in skipped]), "superseded": shown.data(superseded),
        "triage": Path(os.path.relpath(triage, out_dir)).as_posix() if triage else None,
        "versions": shown.data(axis),
    }
    matrix_json.close(data)
    outputs = (out_dir / "matrix.json",
               write_text(out_dir / "index.html", render_html({**data, "cells": page_cells,
                                                           "versions": _page_versions(data["versions"])})),
               write_text(out_dir / "matrix.md", render_markdown({**data, "cells": page_cells})))
    return BuildReport(tuple(reports), tuple(skipped), tuple(superseded), outputs)


def _page_versions(entries: list[dict]) -> list[dict]:
    """The version axis as the page holds it: each flip's first ``PAGE_FLIP_RECORDS`` records (a release that
    rewrites a parser flips thousands; matrix.json keeps them all)."""
    return [{**entry, "flips": [{**flip, "records": flip["records"][:PAGE_FLIP_RECORDS]} for flip in entry["flips"]]}
            for entry in entries]


def _versions(sources: list[Path], skipped: list[Skipped]) -> list[dict]:
    """The version axis of each sweep folder or summary file; one that cannot be read is added to ``skipped``."""
    out = []
    for path in sources:
        try:
            out += read_versions(path)
        except ResultsError as exc:
            skipped.append(Skipped(str(path), f"{path}: not a sweep of releases: {exc}"))
    return out


def page_paths(paths: Iterable[Path], out_dir: Path) -> Portable:
    """Results directories as the page's reader finds them: beside the page (relative to its folder, as in a
    snapshot), else as the machine's paths are written anywhere in results (relative to the checkout or the
    working directory, ``~``, ...); never where they lay on the machine that built it."""
    here, machine = out_dir.resolve(), Portable.here()

    def shown(path: Path) -> str:
        relative = os.path.relpath(path.resolve(), here)
        return relative if not relative.startswith(f"..{os.sep}..") else machine.text(str(path.resolve()))

    return Portable.of((form, shown(path)) for path in paths for form in {str(path), str(path.resolve())})


def _report(cell: Cell) -> CellReport:
    changes = cell.full["history"] or {}
    return CellReport(cell.info.pair, str(cell.info.path), cell.info.run_id, cell.full["total"],
                      cell.full["pass_rate"], changes.get("previous_path"),
                      len(changes.get("newly_failing", ())), len(changes.get("newly_passing", ())),
                      cell.full["runs_total"], cell.full["mixed_total"])



"""The version axis of a replay sweep (``toolmatrix replay-versions``): per engine, families x releases, each cell the
family's pass share on that release, and every record whose verdict flipped between two adjacent releases (a
regression where a pass stopped passing, a fix where it started). Reads ``DIR/ENGINE@VERSION`` runs as
``toolmatrix replay-sweep`` writes them; the page can show the same ``Sweep``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import attrs
from packaging.version import InvalidVersion, Version

from toolmatrix.records import RECORDS, RUN, ResultsError, read_run_info

REGRESSION, FIX = "regression", "fix"


@attrs.frozen
class Column:
    """One release of one engine: each record's verdict and family, and the families it skipped, with why."""

    engine: str
    version: str
    verdicts: dict[tuple[str, str], str]  # (case_id, mode) -> verdict
    families: dict[tuple[str, str], str]  # (case_id, mode) -> family
    skipped: dict[str, str]  # family -> why the release replayed none of it

    def share(self, family: str) -> tuple[int, int] | None:
        """(passing, replayed) records of the family; None where the release replayed none of it."""
        verdicts = [v for key, v in self.verdicts.items() if self.families[key] == family]
        return (sum(v == "pass" for v in verdicts), len(verdicts)) if verdicts else None


@attrs.frozen
class Flip:
    """A record whose pass/non-pass verdict changed from ``before`` to ``after``, adjacent replayed releases."""

    engine: str
    family: str
    before: str
    after: str
    case_id: str
    mode: str
    was: str
    now: str

    @property
    def kind(self) -> str:
        return FIX if self.now == "pass" else REGRESSION


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
        if (was == "pass") != (now == "pass"):
            yield Flip(newer.engine, newer.families[key], older.version, newer.version, *key, was, now)


def _version_key(column: Column) -> tuple[int, Version | str]:
    try:
        return 0, Version(column.version)
    except InvalidVersion:
        return 1, column.version  # not a version (a branch build): after the releases


def read_column(directory: Path) -> Column:
    """One sweep run; ResultsError naming the directory where it is not a finished replay run."""
    run = read_run_info(directory).run
    engine, _, at = directory.name.partition("@")
    version = str(run.engine.version or at)
    verdicts, families = {}, {}
    with (directory / RECORDS).open(encoding="utf-8") as handle:  # five fields of each: JSON, not typed records
        for number, line in enumerate(handle, 1):
            record = json.loads(line)
            if record.get("replay") is None:
                raise ResultsError(f"{directory / RECORDS}:{number}: not a replay record")
            key = (record["case_id"], record["mode"])
            verdicts[key], families[key] = record["verdict"], record["replay"]["family"]
    return Column(run.engine.id, version, verdicts, families, dict(run.engine.skipped_families))


def is_sweep(directory: Path) -> bool:
    """Whether ``directory`` holds replay runs of one engine at two releases or more directly under it (its
    ``run.json`` files alone are read: a snapshot of live runs is told apart cheaply)."""
    versions: dict[str, set[str]] = {}
    for run_dir in (p for p in directory.glob("*@*") if (p / RUN).is_file()):
        try:
            engine = read_run_info(run_dir).run.engine
        except ResultsError:
            continue  # read_sweep names it
        if engine.replay:
            versions.setdefault(engine.id, set()).add(str(engine.version))
    return any(len(found) > 1 for found in versions.values())


def read_sweep(directory: Path) -> Sweep:
    """Every ``ENGINE@VERSION`` run directly under ``directory``; ResultsError where there is none."""
    runs = sorted(p for p in directory.glob("*@*") if p.is_dir())
    if not runs:
        raise ResultsError(f"{directory}: no ENGINE@VERSION run in it (toolmatrix replay-sweep writes them)")
    columns: dict[str, list[Column]] = {}
    for column in map(read_column, runs):
        columns.setdefault(column.engine, []).append(column)
    return Sweep({engine: sorted(found, key=_version_key) for engine, found in sorted(columns.items())})


def _last_line(text: str) -> str:
    """A reason's last line, where pip and a dying worker put the error itself."""
    return (text.strip().splitlines() or ["?"])[-1][:200]


def _cell(column: Column, family: str, marks: dict[tuple[str, str], set[str]]) -> str:
    share = column.share(family)
    if share is None:
        return "n/a" if family in column.skipped else ""
    mark = "".join(sorted({REGRESSION: "v", FIX: "^"}[k] for k in marks.get((family, column.version), ())))
    return f"{share[0]}/{share[1]}{' ' + mark if mark else ''}"


def table(sweep: Sweep) -> str:
    """Per engine, families x releases (``passing/replayed``; ``^`` a fix from the release before, ``v`` a
    regression, ``n/a`` skipped), then each flip with its records, the families a release replays first, and the
    releases that could not replay."""
    from tabulate import tabulate

    parts = []
    for engine, columns in sweep.columns.items():
        grouped = sweep.flip_groups(engine)
        marks: dict[tuple[str, str], set[str]] = {}
        for _, after, kind, family in grouped:
            marks.setdefault((family, after), set()).add(kind)
        rows = [[family, *(_cell(c, family, marks) for c in columns)] for family in sweep.families(engine)]
        parts.append(tabulate(rows, headers=[engine, *(c.version for c in columns)]))
        parts += [f"{kind} {before} -> {after} {family}: "
                  + ", ".join(f"{f.case_id} [{f.mode}] {f.was}->{f.now}" for f in found)
                  for (before, after, kind, family), found in grouped.items()]
        parts += [f"first replayed at {version}: {family} (before: {_last_line(why)})"
                  for family, version, why in sweep.arrivals(engine)]
        parts += [f"{c.version}: cannot replay here: {_last_line(next(iter(c.skipped.values())))}"
                  for c in columns if not c.verdicts and c.skipped]
        parts.append("")
    return "\n".join(parts)

"""The one reader of results directories, for the matrix, the gate, ``show``, ``check-results`` and the replay's
triage and version table (``scan_fields``: a few fields of every record, no typed ``Record`` made).

Readers only ever see whole files (see ``writer``), and refuse one that is damaged all the same: a line that is not
strict JSON (see ``jsontext``) or not a record, a case x mode recorded twice, or records that do not add up to
run.json's counts. Version-1 records are migrated line by line (``codec.migrate``).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, NamedTuple

import attrs

from toolmatrix.base import jsontext
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import fast_validator, validate_instance
from toolmatrix.records.codec import RECORDS, RUN, converter, migrate
from toolmatrix.records.record import Blame, CheckOutcome, Outcome, Record, Verdict, conformance
from toolmatrix.records.run import Run

MAX_PROBLEMS = 5
# A record holds engine JSON (at most jsontext.MAX_DEPTH levels) a few levels down: twice that is room enough,
# and keeps every reader of a record (json, jsonschema, the page) well within Python's stack.
RECORD_MAX_DEPTH = 2 * jsontext.MAX_DEPTH
# By value, as a dict: calling the enum is a slow Python-level lookup, and the matrix makes one per record (10^6).
_VERDICTS = {verdict.value: verdict for verdict in Verdict}
_BLAMES = {blame.value: blame for blame in Blame}


class ResultsError(ToolmatrixError):
    """A results directory that cannot be used; the message names the file and what is wrong."""


@attrs.frozen
class RunInfo:
    """A results directory whose ``run.json`` is valid; records not read yet."""

    path: Path
    run: Run
    started: datetime

    @property
    def pair(self) -> str:
        """The matrix cell this run belongs to (the pair, with its surface)."""
        return self.run.cell_key

    @property
    def run_id(self) -> str:
        return self.run.run_id


class Line(NamedTuple):
    """One record as read: its line number, the bytes on disk, and the parsed (migrated, valid) JSON.

    The matrix reads 10^6 of them: it takes ``outcome`` for every record and the JSON of failing ones only, so
    the typed ``Record`` is made on demand (``record``), not for every line."""

    number: int
    raw: bytes
    data: dict[str, Any]

    @property
    def outcome(self) -> Outcome:
        d = self.data
        return Outcome(d["category"], _VERDICTS[d["verdict"]], d["blame"] and _BLAMES[d["blame"]], d["reason"],
                       conformance(d["verdict"], d["checks"]))

    @property
    def record(self) -> Record:
        return record_of(self.data)


def record_of(data: dict[str, Any]) -> Record:
    """A record's parsed (migrated) JSON as the typed ``Record``, for a reader that kept only the JSON."""
    return converter.structure(data, Record)


_MARKS = frozenset({RUN, RECORDS, RECORDS + ".partial"})  # what a results directory, whole or not, holds


def run_dirs(root: Path) -> list[Path]:
    """``root`` if it is a results directory (or the wreck of one, for ``read_run_info`` to name), else every
    results directory below it (a snapshot's pairs, a run over several surfaces), in a stable order; ResultsError
    when there is none."""
    if not root.is_dir():
        raise ResultsError(f"{root}: {'not a directory' if root.exists() else 'does not exist'}")
    if any((root / name).exists() for name in _MARKS):
        return [root]
    # A run that died below (records.partial, no run.json) is found too: its reader names it, none passes it over.
    found = sorted(Path(folder) for folder, _, files in os.walk(root) if _MARKS.intersection(files))
    if not found:
        raise ResultsError(f"{root}: no results directory in it (no {RUN} found)")
    return found


def read_run_info(directory: Path) -> RunInfo:
    """``run.json`` of ``directory``, validated; raises ResultsError saying why the directory is unusable."""
    run_file = directory / RUN
    if not directory.is_dir():
        raise ResultsError(f"{directory}: {'not a directory' if directory.exists() else 'does not exist'}")
    if not (directory / RECORDS).is_file() and (directory / (RECORDS + ".partial")).is_file():
        raise ResultsError(f"{directory}: incomplete run ({RECORDS}.partial only: the run did not finish)")
    if not run_file.is_file():
        raise ResultsError(f"{directory}: not a results directory (no {RUN})")
    if not (directory / RECORDS).is_file():
        raise ResultsError(f"{directory}: no {RECORDS}")
    try:
        data = jsontext.loads(run_file.read_bytes(), max_depth=RECORD_MAX_DEPTH)  # held to what records are
    except (OSError, jsontext.NotJSON) as exc:
        raise ResultsError(f"{run_file}: not readable JSON: {exc}") from None
    problems = validate_instance(data, "run.schema.json")
    if problems:
        raise ResultsError(_summarize([f"{run_file}: {p}" for p in problems]))
    try:
        started = datetime.fromisoformat(data["started"])
    except ValueError:
        raise ResultsError(f"{run_file}: $.started: not an ISO 8601 date-time (got {data['started']!r})") from None
    if started.tzinfo is None:
        raise ResultsError(f"{run_file}: $.started: no time zone (got {data['started']!r})")
    return RunInfo(directory, Run.from_dict(data), started)


def _line_problems(path: Path, number: int, line: bytes, run_id: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The record on one line (migrated), and what is wrong with it."""
    try:
        data = jsontext.loads(line, max_depth=RECORD_MAX_DEPTH)
    except jsontext.NotJSON as exc:
        return None, [f"{path}:{number}: not JSON: {exc}"]
    if isinstance(data, dict):
        data = migrate(data)
    if fast_validator("record.schema.json")(data) and data["run_id"] == run_id:
        return data, []
    found = validate_instance(data, "record.schema.json")
    if found:
        return None, [f"{path}:{number}: {p}" for p in found]
    return None, [f"{path}:{number}: $.run_id: {data.get('run_id')!r} is not this run's id {run_id!r} "
                  f"(records of another run mixed in)"]


class _Tally:
    """What the records of a run add up to: each case x mode once, and as many of each verdict as run.json counts."""

    def __init__(self, info: RunInfo):
        self.info = info
        self.first_lines: dict[tuple[str, str, int | None], int] = {}  # the line of each case x mode (x sample)
        self.counts: dict[str, int] = {}

    def add(self, number: int, data: dict[str, Any]) -> list[str]:
        """The problem with one more valid record: a case x mode (its sample, with --samples) recorded already."""
        key = (data["case_id"], data["mode"], data.get("sample"))
        first = self.first_lines.setdefault(key, number)
        if first != number:
            sample = "" if key[2] is None else f" sample {key[2]}"
            return [f"{self.info.path / RECORDS}:{number}: case {key[0]!r} [{key[1]}{sample}] recorded twice, on lines "
                    f"{first} and {number}"]
        self.counts[data["verdict"]] = self.counts.get(data["verdict"], 0) + 1
        return []

    def problems(self) -> list[str]:
        """Records lost or added since run.json counted them (a run before counts were kept is not compared)."""
        expected = {verdict: n for verdict, n in self.info.run.counts.items() if n}
        if not self.info.run.counts or expected == self.counts:
            return []
        return [f"{self.info.path / RECORDS}: {_counted(self.counts, ' records')}, but {self.info.path / RUN} counts "
                f"{_counted(expected)} (records lost or added since the run wrote them)"]


def _counted(counts: dict[str, int], noun: str = "") -> str:
    each = ", ".join(f"{verdict} {n}" for verdict, n in sorted(counts.items()))
    return f"{sum(counts.values())}{noun} ({each or 'none'})"


def _records(info: RunInfo, problems: list[str] | None = None) -> Iterator[Line]:
    """Every sound record of a run in file order, then whether they add up to run.json's counts. Without
    ``problems``, the first problem raises ResultsError; with it, each is added there and reading goes on."""
    path, tally, sound = info.path / RECORDS, _Tally(info), True
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if raw.isspace():  # a blank line (isspace stops at the first other byte; strip would copy the line)
                continue
            data, found = _line_problems(path, number, raw, info.run_id)
            if data is not None:  # a sound line (never with problems): one more than the run holds?
                found = found or tally.add(number, data)
            if found or data is None:
                _report(found, problems)
                sound = False
            else:
                yield Line(number, raw, data)
    found = tally.problems() if sound else []  # a bad line already explains a count that is off
    if found:
        _report(found, problems)


def _report(found: list[str], problems: list[str] | None) -> None:
    if problems is None:
        # Reading on only to count would double the cost of a broken multi-GB file.
        raise ResultsError(_summarize(found))
    problems += found


def scan_records(info: RunInfo) -> Iterator[Line]:
    """Every record of a run in file order; raises ResultsError at the first bad line, a case x mode recorded
    twice, or, at the end, records that do not add up to run.json's counts."""
    return _records(info)


def read_records(directory: Path) -> Iterator[Record]:
    """Every record of the results directory, typed; raises ResultsError if the directory is unusable."""
    for line in scan_records(read_run_info(directory)):
        yield line.record


# The fields a scan gives as the records' own types rather than as JSON, and the one it derives: the names of the
# checks that failed (what a triage rule matches on).
_FAILED = CheckOutcome.FAIL.value
_READINGS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "verdict": lambda data: _VERDICTS[data["verdict"]],
    "blame": lambda data: data["blame"] and _BLAMES[data["blame"]],
    "failed_checks": lambda data: frozenset(c["name"] for c in data["checks"] if c["outcome"] == _FAILED),
}


def _reading(field: str) -> Callable[[dict[str, Any]], Any]:
    """How to read ``field`` off a record's JSON: one of ``_READINGS``, else a key, or a key of an object the record
    holds (``replay.family``); None where the record has none (a live record has no ``replay``; a compact one omits
    a field left at its default)."""
    if field in _READINGS:
        return _READINGS[field]
    key, _, inner = field.partition(".")
    if not inner:
        return lambda data: data.get(key)

    def read(data: dict[str, Any]) -> Any:
        value = data.get(key)
        return value.get(inner) if isinstance(value, dict) else None

    return read


def scan_fields(info: RunInfo, *fields: str,
                verdicts: Collection[Verdict] | None = None) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """``(line number, values of fields)`` for every record of a run in file order, or for those of ``verdicts``
    only: a few fields of each line without the typed ``Record`` (a replay snapshot is 10^4 lines an engine, and its
    triage needs eight fields of the failing ones). Every line is read, migrated and checked as ``scan_records`` reads
    it, and raises ResultsError as it does. A field is a key or ``key.key`` (``replay.family``), None where absent;
    ``verdict`` and ``blame`` come as Verdict and Blame, and ``failed_checks`` is the frozenset of the names of the
    checks that failed."""
    readings = [_reading(field) for field in fields]
    wanted = None if verdicts is None else {verdict.value for verdict in verdicts}  # as written: no lookup a line
    for line in _records(info):
        if wanted is None or line.data["verdict"] in wanted:
            yield line.number, tuple([read(line.data) for read in readings])  # a list first: faster than a generator


def read_outcomes(info: RunInfo) -> dict[tuple[str, str], Outcome]:
    """Every ``(case_id, mode)`` of a run and its outcome, its repeated samples folded (``fold``); raises
    ResultsError as ``scan_records`` does."""
    return {key: fold(samples) for key, samples in read_samples(info).items()}


def read_samples(info: RunInfo) -> dict[tuple[str, str], list[Outcome]]:
    """Every ``(case_id, mode)`` of a run and the outcome of each of its samples (one without ``--samples``)."""
    samples: dict[tuple[str, str], list[Outcome]] = {}
    for line in scan_records(info):
        samples.setdefault((line.data["case_id"], line.data["mode"]), []).append(line.outcome)
    return samples


def fold(samples: Iterable[Outcome]) -> Outcome:
    """One case x mode over its samples, as a gate reads it: a pass only when every sample passed (pass^k), else
    the first sample that did not; conformant False when any sample's was, None when none was judged."""
    samples = list(samples)
    first = next((o for o in samples if o.verdict is not Verdict.PASS), samples[0])
    judged = [o.conformant for o in samples if o.conformant is not None]
    return first._replace(conformant=all(judged) if judged else None)


def check_results(directory: Path) -> list[str]:
    """Every problem in a results directory (not only the first), as ``file:line: $.path: message`` lines."""
    problems: list[str] = []
    try:
        for _ in _records(read_run_info(directory), problems):
            pass
    except ResultsError as exc:
        return [str(exc)]
    return problems


def _summarize(problems: list[str]) -> str:
    shown = problems[:MAX_PROBLEMS]
    more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    return "\n  ".join(shown) + more

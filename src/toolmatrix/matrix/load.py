"""Read one results directory: ``run.json`` first (cheap), then ``results.jsonl`` in one streaming pass.

Shared by the matrix build and the gate. Every record is checked against ``record.schema.json``; a problem makes
the whole directory unusable (it comes back as text naming file, line and field), never a traceback. Records are
parsed and checked one at a time, so memory does not grow with the file.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import attrs
import jsonschema_rs
import orjson

from toolmatrix.results import RECORDS, RUN
from toolmatrix.specs import load_schema, validate_instance

MAX_PROBLEMS = 5


class ResultsError(Exception):
    """A results directory that cannot be used; the message names the file and what is wrong."""


@attrs.frozen
class RunInfo:
    """A results directory whose ``run.json`` is valid; records not read yet."""

    path: Path
    run: dict
    started: datetime

    @property
    def pair(self) -> str:
        return self.run["pair"]

    @property
    def model(self) -> str:
        return self.run["model"]["id"]

    @property
    def engine(self) -> str:
        return self.run["engine"]["id"]

    @property
    def run_id(self) -> str:
        return self.run["run_id"]


class Outcome(NamedTuple):
    """What one case x mode came to in one run (a tuple: there are millions of them)."""

    category: str
    verdict: str
    blame: str | None
    reason: str


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
        run = json.loads(run_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResultsError(f"{run_file}: not readable JSON: {exc}") from None
    problems = validate_instance(run, "run.schema.json")
    if problems:
        raise ResultsError(_summarize([f"{run_file}: {p}" for p in problems]))
    try:
        started = datetime.fromisoformat(run["started"])
    except ValueError:
        raise ResultsError(f"{run_file}: $.started: not an ISO 8601 date-time (got {run['started']!r})") from None
    if started.tzinfo is None:
        raise ResultsError(f"{run_file}: $.started: no time zone (got {run['started']!r})")
    return RunInfo(directory, run, started)


@cache
def _record_is_valid() -> Callable[[Any], bool]:
    # A fast yes/no first (10^6 records in seconds); jsonschema, the reference and the wording of errors,
    # only for the rare "no".
    return jsonschema_rs.validator_for(load_schema("record.schema.json")).is_valid


def _parse(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)  # orjson is stricter (NaN, huge ints): let json decide


def iter_records(info: RunInfo) -> Iterator[tuple[int, bytes, dict]]:
    """``(line_number, raw_line, record)`` for every record; raises ResultsError on the first bad line(s)."""
    path = info.path / RECORDS
    is_valid = _record_is_valid()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = _parse(line)
            except ValueError as exc:
                raise ResultsError(f"{path}:{number}: not JSON: {exc}") from None
            if not (is_valid(record) and record["run_id"] == info.run_id):
                problems = _record_problems(path, number, record, info.run_id)
                if problems:
                    # Reading on only to count would double the cost of a broken multi-GB file.
                    raise ResultsError(_summarize(problems))
            yield number, line, record


def _record_problems(path: Path, number: int, record: Any, run_id: str) -> list[str]:
    found = validate_instance(record, "record.schema.json")
    if found:
        return [f"{path}:{number}: {p}" for p in found]
    if record["run_id"] != run_id:
        return [f"{path}:{number}: $.run_id: {record.get('run_id')!r} is not this run's id {run_id!r} "
                f"(records of another run mixed in)"]
    return []


def _summarize(problems: list[str]) -> str:
    shown = problems[:MAX_PROBLEMS]
    more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    return "\n  ".join(shown) + more


def read_outcomes(info: RunInfo) -> dict[tuple[str, str], Outcome]:
    """Every ``(case_id, mode)`` of a run and its outcome (a repeated case x mode: the last record wins)."""
    return {(r["case_id"], r["mode"]): outcome_of(r) for _, _, r in iter_records(info)}


def outcome_of(record: dict) -> Outcome:
    return Outcome(record["category"], record["verdict"], record["blame"], record["reason"])

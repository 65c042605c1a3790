"""Result records and run metadata: ``results.jsonl`` and ``run.json`` in a results directory.

One writer per file, always the pytest controller: records arrive in test reports (from xdist workers too) and
are appended one complete line per ``write`` to ``results.jsonl.partial``, which becomes ``results.jsonl`` by
an atomic rename when the run ends. Readers (matrix, gate) only ever see whole files.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import orjson

from toolmatrix.specs import validate_instance

SCHEMA_VERSION = 1
RECORDS = "results.jsonl"
RUN = "run.json"
VERDICTS = ("pass", "fail", "unsupported", "error")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    os.replace(tmp, path)


def encode_record(record: dict) -> str:
    """One JSON line. Encoded once, where the record is made: a string crosses xdist's channel far cheaper
    than the nested dict, and the controller writes it as it comes."""
    try:
        return orjson.dumps(record, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits from some engine: json copes
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


class RecordWriter:
    """Appends records to ``DIR/results.jsonl.partial``; ``close()`` publishes ``DIR/results.jsonl``."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.partial = directory / (RECORDS + ".partial")
        self._handle = self.partial.open("w", encoding="utf-8")
        self.counts = {v: 0 for v in VERDICTS}

    def write_line(self, line: str, verdict: str) -> None:
        """One record, already encoded by ``encode_record`` (on the worker that made it)."""
        self._handle.write(line + "\n")  # one write per complete line: a crash leaves whole lines only
        self._handle.flush()
        self.counts[verdict] = self.counts.get(verdict, 0) + 1

    def close(self) -> Path:
        if not self._handle.closed:
            self._handle.close()
            os.replace(self.partial, self.directory / RECORDS)
        return self.directory / RECORDS


def read_records(directory: Path) -> Iterator[dict]:
    with (directory / RECORDS).open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def validate_results(directory: Path) -> list[str]:
    """Every schema problem in a results directory, as ``file:line: $.path: message`` lines."""
    problems = [f"{directory / RUN}: {p}" for p in validate_instance(json.loads((directory / RUN).read_text()), "run.schema.json")]
    with (directory / RECORDS).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
            except ValueError as exc:
                problems.append(f"{directory / RECORDS}:{number}: not JSON: {exc}")
                continue
            problems += [f"{directory / RECORDS}:{number}: {p}" for p in validate_instance(record, "record.schema.json")]
    return problems

"""The one writer of a run's files, always the pytest controller: records arrive in test reports (from xdist workers
too) as ``Posted`` lines and are appended one complete line per ``write`` to ``results.jsonl.partial``, which becomes
``results.jsonl`` by an atomic rename when the run ends, beside its ``run.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

from toolmatrix.base.atomic import Replacing, write_json
from toolmatrix.records.codec import RECORDS, RUN
from toolmatrix.records.record import Record, Verdict
from toolmatrix.records.run import Run


class Posted(NamedTuple):
    """A record on its way from the worker that ran the case to the controller that writes it: the encoded line
    and what the controller counts, as plain values (xdist's channel carries no custom types; send a tuple)."""

    line: str
    category: str
    mode: str
    verdict: str
    blame: str | None
    conformant: bool | None
    evidence: str | None = None  # its status (and source), where asked
    wire_blame: str | None = None  # where evidence decided the blame: the wire rules' own
    api: str = "chat"  # the surface: which run (results directory) the record belongs to

    @classmethod
    def of(cls, record: Record) -> Posted:
        return cls(record.encode(), record.category, record.mode, record.verdict.value,
                   record.blame.value if record.blame else None, record.outcome.conformant,
                   record.evidence.label if record.evidence else None,
                   record.wire_blame.value if record.wire_blame else None, record.api)


class RecordWriter:
    """Appends records to ``DIR/results.jsonl.partial``; ``close(run)`` publishes ``results.jsonl`` and ``run.json``.
    ``portable`` rewrites each line's machine paths (an engine's error may name its own files) before it is kept."""

    def __init__(self, directory: Path, portable: Callable[[str], str] = str):
        self.directory = directory
        self.portable = portable
        directory.mkdir(parents=True, exist_ok=True)
        self._file = Replacing(directory / RECORDS, directory / (RECORDS + ".partial"))
        self._handle = self._file.handle
        self.counts = {v.value: 0 for v in Verdict}

    def write(self, posted: Posted) -> None:
        """One record, already encoded (on the worker that made it)."""
        self._handle.write(self.portable(posted.line) + "\n")  # one write per line: a crash leaves whole lines
        self._handle.flush()
        self.counts[posted.verdict] += 1

    def close(self, run: Run) -> None:
        if not self._handle.closed:
            self._file.publish()
        write_json(self.directory / RUN, run.to_dict())

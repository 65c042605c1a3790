"""Result records and runs: the one owner of results.jsonl and run.json (record, run, codec, writer, reader, repro)."""

from toolmatrix.records.codec import RECORDS, RUN, SCHEMA_VERSION
from toolmatrix.records.reader import (
    Line,
    ResultsError,
    RunInfo,
    check_results,
    fold,
    read_outcomes,
    read_records,
    read_run_info,
    read_samples,
    record_of,
    run_dirs,
    scan_fields,
    scan_records,
)
from toolmatrix.records.record import (
    LIVE,
    REPLAY,
    Blame,
    BlameSource,
    CheckOutcome,
    CheckResult,
    EngineDeath,
    Evidence,
    EvidenceStatus,
    Followup,
    Outcome,
    Record,
    ReplayInfo,
    TemplateFinding,
    Verdict,
    Word,
    conformance,
    evidence_label,
    kept_exchange,
    transcript,
)
from toolmatrix.records.repro import repro_command, repro_prefix
from toolmatrix.records.run import ExitStatus, Run, RunEngine, RunModel
from toolmatrix.records.writer import Posted, RecordWriter

__all__ = [
    "RECORDS", "RUN", "SCHEMA_VERSION",
    "Line", "ResultsError", "RunInfo", "check_results", "fold", "read_outcomes", "read_records", "read_run_info",
    "read_samples", "record_of", "run_dirs", "scan_fields", "scan_records",
    "repro_command", "repro_prefix",
    "LIVE", "REPLAY", "ExitStatus", "Run", "RunEngine", "RunModel",
    "Blame", "BlameSource", "CheckOutcome", "CheckResult", "EngineDeath", "Evidence", "EvidenceStatus", "Followup",
    "Outcome", "Record", "ReplayInfo", "TemplateFinding", "Verdict", "Word", "conformance", "evidence_label",
    "kept_exchange", "transcript",
    "Posted", "RecordWriter",
]

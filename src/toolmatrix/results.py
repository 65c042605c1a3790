"""Result records and runs: the one owner of ``results.jsonl`` and ``run.json``, their types, writer and reader.

A record is one case in one mode against one pair (``Record``); a run is the ``run.json`` beside the records
(``Run``). Both are typed attrs classes, turned into JSON and back by cattrs; every producer (runner, plugin,
enginewatch) builds them and every consumer (matrix, gate, check-results, the tests) reads them here.

One writer per file, always the pytest controller: records arrive in test reports (from xdist workers too) and
are appended one complete line per ``write`` to ``results.jsonl.partial``, which becomes ``results.jsonl`` by
an atomic rename when the run ends. Readers only ever see whole files, and refuse one that is damaged all the
same: a line that is not strict JSON (see ``jsontext``) or not a record, a case x mode recorded twice, or records
that do not add up to run.json's counts.

Records of format version 1 (before checks had an ``outcome`` and a ``kind``, and when ``status`` was the HTTP
status) still load: the reader migrates them line by line.
"""

from __future__ import annotations

import enum
import json
import os
import shlex
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_unstructure_fn, override

from toolmatrix import jsontext
from toolmatrix.exitcodes import describe_exit
from toolmatrix.specs import fast_validator, validate_instance
from toolmatrix.wire.answer import Cut

SCHEMA_VERSION = 2  # of a record and of run.json; version 1 still loads
RECORDS = "results.jsonl"
RUN = "run.json"
MAX_PROBLEMS = 5
# A record holds engine JSON (at most jsontext.MAX_DEPTH levels) a few levels down: twice that is room enough,
# and keeps every reader of a record (json, jsonschema, the page) well within Python's stack.
RECORD_MAX_DEPTH = 2 * jsontext.MAX_DEPTH


class Word(str, enum.Enum):
    """An enum whose members are the words written in JSON and shown to people (``str()`` and f-strings too)."""

    def __str__(self) -> str:
        return self.value


class Verdict(Word):
    """A case's outcome in one mode."""

    PASS = "pass"
    FAIL = "fail"
    UNSUPPORTED = "unsupported"  # failed on a feature the engine spec declares unsupported
    ERROR = "error"  # the exchange itself failed on a valid request (5xx, timeout, no server)


class Blame(Word):
    """Who caused a failure."""

    MODEL = "model"
    ENGINE = "engine"
    TEMPLATE = "template"
    INFRA = "infra"


# By value, as a dict: calling the enum is a slow Python-level lookup, and the matrix makes one per record (10^6).
_VERDICTS = {verdict.value: verdict for verdict in Verdict}
_BLAMES = {blame.value: blame for blame in Blame}


class CheckOutcome(Word):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


class ResultsError(Exception):
    """A results directory that cannot be used; the message names the file and what is wrong."""


@attrs.frozen
class CheckResult:
    """One check on one exchange. ``kind`` is the failure's structured class (``checks`` names them)."""

    name: str
    outcome: CheckOutcome
    blame: Blame | None  # on a failure
    detail: str
    kind: str | None = None  # on a failure

    @property
    def failed(self) -> bool:
        return self.outcome is CheckOutcome.FAIL


@attrs.frozen
class EngineDeath:
    """When and how the engine died, as run.json and the records it spoiled carry it."""

    exit_code: int | None  # negative: the signal that killed it; None when the launcher cannot tell
    log_tail: str
    records_before: int  # records written before the death was noticed

    @property
    def summary(self) -> str:
        return f"engine died ({describe_exit(self.exit_code)})"


class EvidenceStatus(Word):
    OBTAINED = "obtained"  # the model's own text for this request, comparable with the chat answer
    UNAVAILABLE = "unavailable"  # the engine offers no way to get it (or asking failed): the wire rules decide
    NOT_COMPARABLE = "not_comparable"  # obtained, but the chat request was constrained in a way the raw one was not


class BlameSource(Word):
    EVIDENCE = "evidence"  # the model's own words showed whose fault it was
    WIRE = "wire"  # the wire alone (no evidence, or none comparable)


@attrs.frozen
class TemplateFinding:
    """The engine's render of the request beside the model's reference template rendered as Hugging Face does."""

    reference: str  # where the reference template came from
    same: bool  # after the documented normalisations (evidence.normalise_render)
    diff: str = ""  # unified diff, reference first, when not the same


@attrs.frozen
class Evidence:
    """What the model itself wrote for the request, asked from the same engine (see toolmatrix.evidence)."""

    status: EvidenceStatus
    reason: str = ""  # why unavailable or not comparable
    method: str | None = None  # the engine's render and completion protocols used
    prompt_sha256: str | None = None  # of the engine's rendered prompt
    raw_text: str | None = None  # the raw completion
    calls: list | None = None  # what the family's reference parser read in it: [{name, arguments}]
    template: TemplateFinding | None = None
    # Where the raw text came from: "same_generation" (the chat answer itself told it), "regenerated" (a second,
    # raw generation of the engine's render); None where none was had.
    source: str | None = None

    @property
    def comparable(self) -> bool:
        return self.status is EvidenceStatus.OBTAINED

    @property
    def label(self) -> str:
        return evidence_label(self.status.value, self.source)


def evidence_label(status: str, source: str | None) -> str:
    """Evidence's status, with where the raw text came from when it was had: ``obtained (same generation)``."""
    return f"{status} ({source.replace('_', ' ')})" if source else status


@attrs.frozen
class Followup:
    """The second turn of a round-trip case: what was sent back, the answer and its checks."""

    request: dict
    checks: tuple[CheckResult, ...]
    http_status: int | None = None
    latency_s: float = 0.0
    response: Any = None
    chunks: list | None = None
    error: str | None = None
    raw_text: str | None = None
    cut: Cut | None = None


@attrs.frozen
class ReplayInfo:
    """On a parser-replay record: which engine parser read the fixture, and how its text was fed."""

    engine: str
    engine_version: str
    parser: str
    chunking: str  # none (the non-streamed parse) | whole | token | special | random
    reasoning_parser: str | None = None
    tokenizer: str | None = None
    family: str = ""
    fixture_source: str = ""
    tier: str = "replay"


@attrs.frozen
class Record:
    """One line of results.jsonl. The exchange is kept raw: the request exactly as sent, and the body (non-stream
    or error) or every stream chunk as parsed from the wire."""

    schema_version: int = attrs.field(default=SCHEMA_VERSION, kw_only=True)  # first in the JSON, for readers
    run_id: str
    case_id: str
    category: str
    mode: str  # nonstream | stream
    verdict: Verdict
    blame: Blame | None  # of the first failing check; None on a pass
    reason: str  # the first failing check and its detail; "" on a pass
    checks: tuple[CheckResult, ...]
    request: dict
    latency_s: float = 0.0
    http_status: int | None = None  # None when nothing came back
    response: Any = None
    chunks: list | None = None
    error: str | None = None  # transport problem: timeout, refused connection, broken stream
    raw_text: str | None = None  # the body when it was not JSON
    cut: Cut | None = None  # the answer was longer than the client keeps
    description: str | None = None  # the case's description, for a person reading a failure
    expect: dict | None = None
    followup: Followup | None = None
    engine_death: EngineDeath | None = None
    evidence: Evidence | None = None  # None: not asked for (--evidence off, or a pass under 'failures')
    blamed_by: BlameSource | None = None  # on a failure: what decided the blame
    wire_blame: Blame | None = None  # where evidence decided: the blame the wire rules alone would have given
    replay: ReplayInfo | None = None  # parser-replay tier only; None on a live record
    api: str = "chat"  # the surface the case went over: chat | responses | messages
    sample: int | None = None  # which of --samples K askings (1..K); None: the case x mode was asked once
    fuzz_seed: int | None = None  # a generated case (--fuzz): the seed it was drawn with; None: a case file's

    @property
    def tier(self) -> str:
        return "replay" if self.replay is not None else "live"

    @property
    def outcome(self) -> Outcome:
        return Outcome(self.category, self.verdict, self.blame, self.reason, conformance(self.verdict, self.checks))

    def to_dict(self) -> dict:
        return _converter.unstructure(self)

    @classmethod
    def from_dict(cls, data: dict) -> Record:
        return _converter.structure(_migrate(data), cls)

    def encode(self) -> str:
        """One JSON line. Encoded once, where the record is made: a string crosses xdist's channel far cheaper
        than the nested object, and the controller writes it as it comes."""
        return encode_json_line(self.to_dict())


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


class Outcome(NamedTuple):
    """What one case x mode came to in one run (a tuple: a matrix reads millions of them)."""

    category: str
    verdict: Verdict
    blame: Blame | None
    reason: str
    conformant: bool | None = None  # see ``conformance``


ENGINE_SIDE = frozenset({"engine", "template"})


def conformance(verdict: str, checks: Iterable[Any]) -> bool | None:
    """Did the engine return what the model said, in a valid wire shape, honouring the request's contract?

    False when any failing check is blamed on the engine or its template (after evidence, where there was some),
    a 5xx on a valid request included; None when nothing came back to judge (no server, a timeout). ``checks``
    are CheckResults or their JSON objects."""
    for check in checks:
        outcome, blame = (check["outcome"], check["blame"]) if isinstance(check, dict) else (check.outcome, check.blame)
        if outcome == CheckOutcome.FAIL and blame in ENGINE_SIDE:
            return False
    return None if verdict == Verdict.ERROR else True


class ExitStatus(Word):
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ENGINE_DIED = "engine_died"
    INTERNAL_ERROR = "internal_error"  # toolmatrix itself failed outside any one answer
    LOST = "lost"  # an executor lost the shard with its machine: every record an infra error (--record-lost)


@attrs.frozen
class Run:
    """run.json: what was tested, where and when. ``engine``, ``model`` and ``hardware`` are open mappings
    (their fields are described in run.schema.json) because launchers add what they know."""

    schema_version: int = attrs.field(default=SCHEMA_VERSION, kw_only=True)
    run_id: str
    pair: str  # MODEL@ENGINE, the matrix cell key
    engine: dict
    model: dict
    hardware: dict
    started: str
    finished: str | None
    toolmatrix_version: str
    counts: dict[str, int]
    command: list[str] = attrs.field(factory=list)
    cases: list[str] = attrs.field(factory=list)
    case_shard: str | None = None  # "I/N": the run holds only that slice of the cases (--case-shard)
    batch: str | None = None  # the fan-out (one plan's run on its executor) this run is a shard of (--batch)
    shard: str | None = None  # which shard of that plan (--shard)
    exit_status: ExitStatus | None = None
    engine_death: EngineDeath | None = None
    api: str = "chat"  # the surface every case of the run went over: a cell per model x engine x surface
    fuzz: dict | None = None  # --fuzz: {seed, count, hypothesis}, what draws the generated cases again

    def to_dict(self) -> dict:
        return _converter.unstructure(self)

    @property
    def cell_key(self) -> str:
        """The matrix cell: the pair, and the surface where it is not Chat Completions."""
        return self.pair if self.api == "chat" else f"{self.pair} [{self.api}]"

    @classmethod
    def from_dict(cls, data: dict) -> Run:
        return _converter.structure({**data, "schema_version": SCHEMA_VERSION}, cls)

    @property
    def model_id(self) -> str:
        return self.model["id"]

    @property
    def engine_id(self) -> str:
        return self.engine["id"]

    def option(self, name: str) -> str | None:
        """The value the run's command gave an option (``--name value`` or ``--name=value``), if it did."""
        for index, arg in enumerate(self.command):
            if arg == name and index + 1 < len(self.command):
                return self.command[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

    def repro_prefix(self) -> list[str]:
        """``pytest`` and the target options of this run: the engine spec, or the URL of an external server; for a
        parser-replay run, ``toolmatrix replay`` with the run's fixture file and engine (``ENGINE@VERSION`` where the
        run replayed one release: a sweep's, or one named so)."""
        if self.engine.get("tier") == "replay":
            release = self.command[1:2] == ["replay-sweep"] or "@" in (self.option("--engine") or "")
            engine = self.engine["id"]
            return ["toolmatrix", "replay", "--fixtures", self.option("--fixtures") or "FIXTURES.jsonl", "--engine",
                    f"{engine}@{self.engine['version']}" if release and self.engine.get("version") else engine]
        options = [f"--api={self.api}"] if self.api != "chat" else []
        # Repeated samples ask at their own temperature and seeds: the repro asks the same K.
        options += [f"{name}={self.option(name)}" for name in ("--samples", "--temperature") if self.option(name)]
        if self.engine.get("launcher") == "external" and self.engine.get("base_url"):
            return ["pytest", f"--base-url={self.engine['base_url']}", f"--model={self.model['served_name']}", *options]
        return ["pytest", f"--engine={self.engine['id']}", f"--model={self.model['id']}", *options]


def repro_command(prefix: list[str], case_id: str, mode: str) -> str:
    """The command that runs one case x mode again."""
    if prefix[:2] == ["toolmatrix", "replay"]:  # parser replay: that one fixture, in that chunking
        chunking = mode.split(":", 1)[1] if ":" in mode else "whole"
        needle = '"id": "' + case_id + '"'
        one = f"grep -F {shlex.quote(needle)} {shlex.quote(prefix[3])} > /tmp/one.jsonl"
        return f"{one} && " + shlex.join([*prefix[:2], "--fixtures", "/tmp/one.jsonl", "--results-dir", "/tmp/repro",
                                          *prefix[4:], "--chunking", chunking])
    # -k matches substrings, and "stream" is one of "nonstream".
    selector = f"{case_id} and nonstream" if mode == "nonstream" else f"{case_id} and stream and not nonstream"
    return shlex.join([*prefix, "-k", selector])


# -- JSON <-> types --------------------------------------------------------------------------------------------

_converter = cattrs.Converter()
# A request, an answer, an expectation are JSON values already: written as they are, not walked value by value
# (the walk cost a millisecond a record, most of a replay's own time over tens of thousands of records).
_converter.register_unstructure_hook(dict, lambda value: value)
for _cls in (CheckResult, Evidence, Followup, Record, Run):
    # Optional fields left at their default are not written: a stream record has no "response", and so on.
    _converter.register_unstructure_hook(_cls, make_dict_unstructure_fn(
        _cls, _converter, _cattrs_omit_if_default=True,
        **{name: override(omit_if_default=False) for name in ("blame", "latency_s", "finished", "schema_version")
           if name in attrs.fields_dict(_cls)}))


def _migrate(data: dict) -> dict:
    """A version-1 record as version 2: ``status`` (HTTP) became ``http_status``, a check's ``status`` its
    ``outcome``."""
    if data.get("schema_version") != 1:
        return data
    out = {**data, "schema_version": SCHEMA_VERSION, "checks": [_migrate_check(c) for c in data.get("checks", [])]}
    if "status" in out:
        out["http_status"] = out.pop("status")
    if isinstance(out.get("followup"), dict):
        followup = dict(out["followup"])
        if "status" in followup:
            followup["http_status"] = followup.pop("status")
        followup["checks"] = [_migrate_check(c) for c in followup.get("checks", [])]
        out["followup"] = followup
    return out


def _migrate_check(check: Any) -> Any:
    if not isinstance(check, dict) or "status" not in check:
        return check
    out = {k: v for k, v in check.items() if k != "status"}
    out["outcome"] = check["status"]
    return out


def encode_json_line(data: Any) -> str:
    try:
        return orjson.dumps(data, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        # An integer beyond 64 bits, or a lone surrogate in text an engine sent: json copes, and ASCII escapes
        # keep the line valid UTF-8 whatever the text holds.
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that a reader (the matrix, a CI job, kubectl) sees the old file or the new one, never half
    of one; a failed write leaves no temporary file behind."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# -- the writer ------------------------------------------------------------------------------------------------


class RecordWriter:
    """Appends records to ``DIR/results.jsonl.partial``; ``close(run)`` publishes ``results.jsonl`` and ``run.json``.
    ``portable`` rewrites each line's machine paths (an engine's error may name its own files) before it is kept."""

    def __init__(self, directory: Path, portable: Callable[[str], str] = str):
        self.directory = directory
        self.portable = portable
        directory.mkdir(parents=True, exist_ok=True)
        self.partial = directory / (RECORDS + ".partial")
        self._handle = self.partial.open("w", encoding="utf-8")
        self.counts = {v.value: 0 for v in Verdict}

    def write(self, posted: Posted) -> None:
        """One record, already encoded (on the worker that made it)."""
        self._handle.write(self.portable(posted.line) + "\n")  # one write per line: a crash leaves whole lines
        self._handle.flush()
        self.counts[posted.verdict] += 1

    def close(self, run: Run) -> None:
        if not self._handle.closed:
            self._handle.close()
            os.replace(self.partial, self.directory / RECORDS)
        write_json_atomic(self.directory / RUN, run.to_dict())


# -- the reader ------------------------------------------------------------------------------------------------


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
    data: dict

    @property
    def outcome(self) -> Outcome:
        d = self.data
        return Outcome(d["category"], _VERDICTS[d["verdict"]], d["blame"] and _BLAMES[d["blame"]], d["reason"],
                       conformance(d["verdict"], d["checks"]))

    @property
    def record(self) -> Record:
        return _converter.structure(self.data, Record)


def run_dirs(root: Path) -> list[Path]:
    """``root`` if it is a results directory (or the wreck of one, for ``read_run_info`` to name), else every
    results directory below it (a snapshot's pairs, a run over several surfaces), in a stable order; ResultsError
    when there is none."""
    if not root.is_dir():
        raise ResultsError(f"{root}: {'not a directory' if root.exists() else 'does not exist'}")
    if any((root / name).exists() for name in (RUN, RECORDS, RECORDS + ".partial")):
        return [root]
    found = sorted(p.parent for p in root.rglob(RUN))
    if not found:
        raise ResultsError(f"{root}: no results directory in it (no {RUN})")
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


def _line_problems(path: Path, number: int, line: bytes, run_id: str) -> tuple[dict | None, list[str]]:
    """The record on one line (migrated), and what is wrong with it."""
    try:
        data = jsontext.loads(line, max_depth=RECORD_MAX_DEPTH)
    except jsontext.NotJSON as exc:
        return None, [f"{path}:{number}: not JSON: {exc}"]
    if isinstance(data, dict):
        data = _migrate(data)
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

    def add(self, number: int, data: dict) -> list[str]:
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
            found = found or tally.add(number, data)
            if found:
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

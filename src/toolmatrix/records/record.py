"""The types of a record (one line of ``results.jsonl``): a case in one mode against one pair, its verdict,
blame, checks, evidence and the exchange kept raw; and ``Outcome``, what a reader of many records keeps of one."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

import attrs

from toolmatrix.base.exitcodes import describe_exit
from toolmatrix.records.codec import (
    SCHEMA_VERSION,
    JSONArray,
    JSONObject,
    compact,
    converter,
    encode_json_line,
    migrate,
)
from toolmatrix.wire.answer import Cut

if TYPE_CHECKING:
    from toolmatrix.wire.exchange import Exchange

LIVE, REPLAY = "live", "replay"  # the tiers: a model served by an engine; an engine's parser fed given text

class Word(str, enum.Enum):
    """An enum whose members are the words written in JSON and shown to people (``str()`` and f-strings too)."""

    def __str__(self) -> str:
        return str(self.value)  # the word itself (the checker reads an Enum's value as Any)


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



class CheckOutcome(Word):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"



@compact
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


@compact
@attrs.frozen
class Evidence:
    """What the model itself wrote for the request, asked from the same engine (see toolmatrix.live.evidence)."""

    status: EvidenceStatus
    reason: str = ""  # why unavailable or not comparable
    method: str | None = None  # the engine's render and completion protocols used
    prompt_sha256: str | None = None  # of the engine's rendered prompt
    raw_text: str | None = None  # the raw completion
    calls: JSONArray | None = None  # what the family's reference parser read in it: [{name, arguments}]
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


def transcript(exchange: Exchange) -> dict[str, Any]:
    """The fields of ``exchange`` as ``Record`` and ``Followup`` keep them: the request as sent, the body or every
    stream chunk (a stream cut short keeps its chunks), how long it took and what went wrong. The live runner and
    the parser replay both fill their records through it."""
    kept: dict[str, Any] = {"request": exchange.request, "http_status": exchange.http_status,
                            "latency_s": round(exchange.latency_s, 4), "error": exchange.error,
                            "raw_text": exchange.raw_text, "cut": exchange.cut}
    if exchange.chunks:
        kept["chunks"] = list(exchange.chunks)
    else:
        kept["response"] = exchange.response
    return kept


def kept_exchange(kept: Record | Followup, api: str) -> Exchange:
    """What ``transcript`` kept, read back as the exchange over ``api`` that every check reads: streamed where
    chunks were kept (a replay's mode also names its chunking)."""
    from toolmatrix.wire.exchange import Exchange  # here: reading records needs no API reader (nor openai's client)

    return Exchange("nonstream" if kept.chunks is None else "stream", kept.request, http_status=kept.http_status,
                    response=kept.response, chunks=tuple(kept.chunks or ()), error=kept.error,
                    latency_s=kept.latency_s, raw_text=kept.raw_text, cut=kept.cut, api=api)


@compact
@attrs.frozen
class Followup:
    """The second turn of a round-trip case: what was sent back, the answer and its checks."""

    request: JSONObject
    checks: tuple[CheckResult, ...]
    http_status: int | None = None
    latency_s: float = 0.0
    response: Any = None
    chunks: JSONArray | None = None
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
    parser_choice: str | None = None
    """Why the reasoning parser is the one it is (the fixture's evidence, its registered model, its family)."""


@compact
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
    # On an unsupported record: the declared gaps it rests on, FEATURE -> WHY (its reason words them for people).
    gaps: dict[str, str] = attrs.field(factory=dict, kw_only=True)
    checks: tuple[CheckResult, ...]
    request: JSONObject
    latency_s: float = 0.0
    http_status: int | None = None  # None when nothing came back
    response: Any = None
    chunks: JSONArray | None = None
    error: str | None = None  # transport problem: timeout, refused connection, broken stream
    raw_text: str | None = None  # the body when it was not JSON
    cut: Cut | None = None  # the answer was longer than the client keeps
    description: str | None = None  # the case's description, for a person reading a failure
    expect: JSONObject | None = None
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
        return REPLAY if self.replay is not None else LIVE

    def exchange(self) -> Exchange:
        """The first turn as the exchange the checks read (see ``transcript``)."""
        return kept_exchange(self, self.api)

    @property
    def outcome(self) -> Outcome:
        return Outcome(self.category, self.verdict, self.blame, self.reason, conformance(self.verdict, self.checks))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = converter.unstructure(self)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        return converter.structure(migrate(data), cls)

    def encode(self) -> str:
        """One JSON line. Encoded once, where the record is made: a string crosses xdist's channel far cheaper
        than the nested object, and the controller writes it as it comes."""
        return encode_json_line(self.to_dict())



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


"""Run one case in one mode against a target: build the request, send it, check it, and make the record.

Independent of pytest, so the same path serves the suite, the CLI and the tests of the harness itself.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import attrs

from toolmatrix.base.features import surface_features
from toolmatrix.formats import Family
from toolmatrix.judge.blame import reblame
from toolmatrix.judge.checks import HARNESS, CheckInput, judge, run_checks
from toolmatrix.library.cases import Case
from toolmatrix.live.client import Connection
from toolmatrix.live.evidence import Witness
from toolmatrix.live.sampling import Sampling
from toolmatrix.records import (
    Blame,
    BlameSource,
    CheckOutcome,
    CheckResult,
    Evidence,
    Followup,
    Record,
    Verdict,
    Word,
    transcript,
)
from toolmatrix.wire.answer import Message
from toolmatrix.wire.errors import hide
from toolmatrix.wire.exchange import Exchange, Mode
from toolmatrix.wire.surfaces import CHAT, surface

Asking = tuple[str, int | None]  # (case id, sample): one generation, which both modes of it share


class EvidenceMode(Word):
    """Which exchanges get the model's own words (``--evidence``)."""

    OFF = "off"
    FAILURES = "failures"  # only where blame is in question: an answer that did not pass
    ALL = "all"  # every answer: conformance measured on passes too


@attrs.frozen
class Profile:
    """What the model adds to every request: a few-shot prelude and request defaults (alike on every engine)."""

    prelude: tuple[dict, ...] = ()
    request_defaults: Mapping[str, Any] = attrs.field(factory=dict)


def build_request(case: Case, model: str, profile: Profile, sampled: Mapping[str, Any] | None = None) -> dict:
    """The chat-completions body for a case (``stream`` is added by the client per mode; another surface says
    it in its own words, see ``wire.surfaces``); ``sampled``: what one of repeated samples sets over it (``sampling``)."""
    messages = list(case.messages)
    # The prelude goes after the case's leading system messages, so a system prompt still comes first.
    head = 0
    while head < len(messages) and messages[head].get("role") in ("system", "developer"):
        head += 1
    messages[head:head] = profile.prelude
    body: dict[str, Any] = {"model": model, "messages": messages}
    if case.tools:
        body["tools"] = list(case.tools)
    if case.tool_choice is not None:
        body["tool_choice"] = case.tool_choice
    body.update({k: v for k, v in profile.request_defaults.items() if k not in case.options})
    body.update(case.options)
    body.update(sampled or {})
    return body


def followup_request(first: dict, answer_calls: list[dict], results: Mapping[str, str]) -> dict:
    """Second turn of a round trip: the engine's own calls (ids included) and a result for each, sent back."""
    assistant = {"role": "assistant", "content": None, "tool_calls": answer_calls}
    tool_messages = [
        {"role": "tool", "tool_call_id": call["id"], "content": results.get(call["function"]["name"], '{"ok": true}')}
        for call in answer_calls
    ]
    return {**first, "messages": [*first["messages"], assistant, *tool_messages]}


def lost_record(case: Case, mode: Mode, body: dict, run_id: str, reason: str, *, check: str = "worker",
                kind: str = "WORKER_LOST", api: str = CHAT, sample: int | None = None) -> Record:
    """The record of a case whose answer never came back, because the process (or machine) running it died."""
    return _failed_record(case, mode, body, run_id, CheckResult(check, CheckOutcome.FAIL, Blame.INFRA, reason, kind),
                          api=api, sample=sample)


def _failed_record(case: Case, mode: Mode, body: dict, run_id: str, check: CheckResult,
                   exchange: Exchange | None = None, api: str = CHAT, sample: int | None = None) -> Record:
    """An ``error`` record that one check decides, with the exchange where there was one (else the chat ``body``
    as the surface would have sent it)."""
    fields = transcript(exchange) if exchange is not None else {"request": surface(api).request(body)}
    return Record(run_id, case.id, case.category, mode, Verdict.ERROR, check.blame, f"{check.name}: {check.detail}",
                  (check,), description=case.description or None, api=api, sample=sample, fuzz_seed=case.fuzz_seed,
                  **fields)


def redact(record: Record, secret: str | None) -> Record:
    """``record`` with every occurrence of ``secret`` (a key a server echoed back) replaced, wherever it is."""
    if not secret or secret not in record.encode():
        return record
    return Record.from_dict(_replace_in(record.to_dict(), secret))


def _replace_in(value: Any, secret: str) -> Any:
    if isinstance(value, str):
        return hide(value, secret)
    if isinstance(value, dict):
        return {_replace_in(k, secret): _replace_in(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_in(v, secret) for v in value]
    return value


@attrs.define
class Runner:
    """Sends cases for one pair: each case's non-streamed answer is asked once (per sample) and serves both of its
    modes."""

    client: Connection
    model: str
    family: Family
    profile: Profile = attrs.field(factory=Profile)
    unsupported: Mapping[str, str] = attrs.field(factory=dict)
    run_id: str = ""
    witness: Witness | None = None  # asks the engine for the model's own words; None: evidence off
    evidence_mode: EvidenceMode = EvidenceMode.FAILURES
    paired: frozenset[Asking] = frozenset()  # askings both of whose modes run in this process (``_nonstream``)
    sampling: Sampling = attrs.field(factory=Sampling)
    references: dict[Asking, Exchange] = attrs.field(factory=dict)
    evidence: dict[Asking, Evidence] = attrs.field(factory=dict)  # per asking: both modes share the prompt

    def run(self, case: Case, mode: Mode, sample: int | None = None) -> Record:
        """The record of ``case`` in ``mode`` (``sample``: which of repeated samples); a failure of the harness
        itself on this answer is its ``error`` record (with the exchange, where there was one), never a lost run.
        A key the server echoed is redacted."""
        body = build_request(case, self.model, self.profile, self.sampling.fields(case.id, case.options, sample))
        asking = (case.id, sample)
        exchange = None
        try:
            if mode == "nonstream":
                exchange, reference = self._nonstream(asking, body), None
            else:
                exchange = self.client.send(body, "stream")
                reference = self._nonstream(asking, body)
            record = self._judge(case, mode, body, exchange, reference, sample)
        except Exception as exc:  # noqa: BLE001 - ours, not the engine's: say so on this record and go on
            detail = f"{type(exc).__name__}: {str(exc)[:300]}"
            check = CheckResult("harness", CheckOutcome.FAIL, Blame.INFRA, detail, HARNESS)
            record = _failed_record(case, mode, body, self.run_id, check, exchange, self.api, sample)
        return redact(record, self.client.target.secret)

    def _nonstream(self, asking: Asking, body: dict) -> Exchange:
        """The asking's one non-streamed answer: recorded as its ``nonstream`` record and compared with its stream
        (the same sample's), whichever of the two modes runs first. It is kept only until the other mode takes it,
        and only when that mode is to run in this process (``paired``), so memory does not grow with the cases."""
        kept = self.references.pop(asking, None)
        if kept is not None:
            return kept
        answer = self.client.send({**body, **self._same_generation_fields}, "nonstream")
        if asking in self.paired:
            self.references[asking] = answer
        return answer

    @property
    def api(self) -> str:
        return self.client.surface.id

    @property
    def _same_generation_fields(self) -> Mapping[str, Any]:
        # The engines' same-generation fields are chat fields: over another surface the evidence is regenerated.
        if self.witness is None or self.evidence_mode is EvidenceMode.OFF or self.api != CHAT:
            return {}
        return self.witness.request_fields

    def _judge(self, case: Case, mode: Mode, body: dict, exchange: Exchange, reference: Exchange | None,
               sample: int | None) -> Record:
        inputs = CheckInput(case, exchange, self.family, case.expect, reference)
        checks = run_checks(inputs)
        message = exchange.message()
        followup = None
        # The second turn echoes the engine's calls back; broken ones would only test how it takes garbage.
        if case.followup is not None and message is not None and message.tool_calls and all(
                c.parsed_arguments() is not None for c in message.tool_calls):
            followup = self._followup(case, mode, body, exchange)
            checks += followup.checks
        features = (*case.features, *surface_features(self.api))
        decision = judge(checks, self.unsupported, features)
        evidence, blamed_by, wire_blame = None, None, None
        if self._wants_evidence(decision.verdict):
            # The non-streamed chat answer's body, which a same-generation protocol reads.
            answered = exchange if mode == "nonstream" else reference  # a stream always has its reference
            generated = answered.response if self.api == CHAT and answered is not None else None
            evidence = self._evidence(case, sample, body, message, generated)
            if evidence.comparable:
                checks, decided = reblame(checks, inputs, evidence)
                wire_blame = decision.blame if decided else None
                decision = judge(checks, self.unsupported, features)
                blamed_by = BlameSource.EVIDENCE if decided else None
        if decision.verdict is not Verdict.PASS:
            blamed_by = blamed_by or BlameSource.WIRE
        return Record(
            self.run_id, case.id, case.category, mode, decision.verdict, decision.blame, decision.reason,
            tuple(checks), gaps=decision.gaps, description=case.description or None, followup=followup,
            expect=json.loads(json.dumps(attrs.asdict(case.expect), default=str)),
            evidence=evidence, blamed_by=blamed_by, wire_blame=wire_blame, api=self.api, sample=sample,
            fuzz_seed=case.fuzz_seed, **transcript(exchange))

    def _wants_evidence(self, verdict: Verdict) -> bool:
        # An error has no answer to weigh: there is nothing for the model's words to be compared with.
        if self.witness is None or verdict is Verdict.ERROR or self.evidence_mode is EvidenceMode.OFF:
            return False
        return self.evidence_mode is EvidenceMode.ALL or verdict is not Verdict.PASS

    def _evidence(self, case: Case, sample: int | None, body: dict, answer: Message | None, generated: Any) -> Evidence:
        if (case.id, sample) not in self.evidence:
            assert self.witness is not None  # _wants_evidence: evidence is asked for only with a witness
            self.evidence[case.id, sample] = self.witness.obtain(case, body, answer, generated)
        return self.evidence[case.id, sample]

    def _followup(self, case: Case, mode: Mode, first_body: dict, first: Exchange) -> Followup:
        message, second = first.message(), case.followup
        assert message is not None and second is not None  # _judge asks only for an answer with calls to a followup
        raw_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        body = followup_request(first_body, raw_calls, second.tool_results)
        exchange = self.client.send(body, mode)
        checks = run_checks(CheckInput(case, exchange, self.family, second.expect), "followup.")
        return Followup(checks=tuple(checks), **transcript(exchange))

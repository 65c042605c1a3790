"""Run one case in one mode against a target: build the request, send it, check it, and make the record.

Independent of pytest, so the same path serves the suite, the CLI and the tests of the harness itself.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import attrs
import openai

from toolmatrix import client as http
from toolmatrix.cases import Case
from toolmatrix.checks import CheckResult, Evidence, Verdict, judge, run_checks
from toolmatrix.exchange import Exchange, Mode
from toolmatrix.formats import Family
from toolmatrix.results import SCHEMA_VERSION


@attrs.frozen
class Profile:
    """What the model adds to every request: a few-shot prelude and request defaults (alike on every engine)."""

    prelude: tuple[dict, ...] = ()
    request_defaults: Mapping[str, Any] = attrs.field(factory=dict)


def build_request(case: Case, model: str, profile: Profile) -> dict:
    """The chat-completions body for a case (``stream`` is added by the client per mode)."""
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
    return body


def followup_request(first: dict, answer_calls: list[dict], results: Mapping[str, str]) -> dict:
    """Second turn of a round trip: the engine's own calls (ids included) and a result for each, sent back."""
    assistant = {"role": "assistant", "content": None, "tool_calls": answer_calls}
    tool_messages = [
        {"role": "tool", "tool_call_id": call["id"], "content": results.get(call["function"]["name"], '{"ok": true}')}
        for call in answer_calls
    ]
    return {**first, "messages": [*first["messages"], assistant, *tool_messages]}


def _exchange_fields(ex: Exchange) -> dict:
    fields: dict[str, Any] = {"request": ex.request, "status": ex.status, "latency_s": round(ex.latency_s, 4)}
    if ex.mode == "stream" and ex.ok:
        fields["chunks"] = list(ex.chunks)
    else:
        fields["response"] = ex.response
    if ex.error is not None:
        fields["error"] = ex.error
    if ex.raw_text is not None:
        fields["raw_text"] = ex.raw_text
    return fields


def _record_head(case: Case, mode: Mode, run_id: str) -> dict:
    """The fields that say which run, case and mode a record is of."""
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "case_id": case.id, "category": case.category,
            "mode": mode}


def lost_record(case: Case, mode: Mode, body: dict, run_id: str, reason: str) -> dict:
    """The record of a case whose answer never came back, because the process running it crashed."""
    check = {"name": "worker", "status": "fail", "blame": "infra", "detail": reason}
    return {**_record_head(case, mode, run_id), "verdict": "error", "blame": "infra", "reason": f"worker: {reason}",
            "checks": [check], "request": body, "latency_s": 0}


@attrs.define
class Runner:
    """Sends cases for one pair. Keeps each case's non-streamed answer to compare the stream with."""

    client: openai.OpenAI
    model: str
    family: Family
    profile: Profile = attrs.field(factory=Profile)
    unsupported: Mapping[str, str] = attrs.field(factory=dict)
    run_id: str = ""
    references: dict[str, Exchange] = attrs.field(factory=dict)

    def reference(self, case: Case, body: dict) -> Exchange:
        """The non-streamed answer of ``case``: the one already seen in this process, or a fresh request."""
        if case.id not in self.references:
            self.references[case.id] = http.send(self.client, body, "nonstream")
        return self.references[case.id]

    def run(self, case: Case, mode: Mode) -> tuple[Verdict, dict]:
        body = build_request(case, self.model, self.profile)
        if mode == "nonstream":
            exchange = self.reference(case, body)
            reference = None
        else:
            exchange = http.send(self.client, body, "stream")
            reference = self.reference(case, body)
        checks = run_checks(Evidence(case, exchange, self.family, case.expect, reference))
        record = self._record(case, mode, exchange, checks)
        message = exchange.message()
        # The second turn echoes the engine's calls back; broken ones would only test how it takes garbage.
        if case.followup is not None and message is not None and message.tool_calls and all(
                c.parsed_arguments() is not None for c in message.tool_calls):
            record["followup"], second = self._followup(case, mode, body, exchange)
            checks += second
        verdict = judge(checks, self.unsupported, case.features)
        record.update(verdict=verdict.verdict, blame=verdict.blame, reason=verdict.reason,
                      checks=[c.to_dict() for c in checks])
        return verdict, record

    def _followup(self, case: Case, mode: Mode, first_body: dict, first: Exchange) -> tuple[dict, list[CheckResult]]:
        raw_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in first.message().tool_calls
        ]
        body = followup_request(first_body, raw_calls, case.followup.tool_results)
        exchange = http.send(self.client, body, mode)
        checks = run_checks(Evidence(case, exchange, self.family, case.followup.expect), "followup.")
        return {**_exchange_fields(exchange), "checks": [c.to_dict() for c in checks]}, checks

    def _record(self, case: Case, mode: Mode, exchange: Exchange, checks: list[CheckResult]) -> dict:
        return {
            **_record_head(case, mode, self.run_id),
            **_exchange_fields(exchange),
            "expect": json.loads(json.dumps(attrs.asdict(case.expect), default=str)),
        }

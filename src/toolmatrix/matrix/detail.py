"""What a person needs to read one failing case: the exchange as text, a diff against the expectation, a repro.

Everything here came from a model or an engine and stays plain text; the page shows it with ``textContent``.
Blobs are capped so one huge answer cannot blow up the page.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from toolmatrix.records import record_of

BLOB_CAP = 6_000  # characters per request / response / chunks text on the page (at most)
REASON_CAP = 300


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({len(text) - limit} more characters: full record in the cell's .jsonl file)"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def blob(value: Any, limit: int = BLOB_CAP) -> str:
    return cap(_pretty(value), limit)


def chunks_text(chunks: list, limit: int = BLOB_CAP) -> str:
    """Raw stream chunks, one line each, numbered: the order and the splitting are what a stream bug is about."""
    return cap("\n".join(f"#{n} {json.dumps(c, ensure_ascii=False, default=str)}" for n, c in enumerate(chunks)),
               limit)


def _calls(message: Any) -> list[dict]:
    calls = []
    for call in message.tool_calls:
        parsed = call.parsed_arguments()
        calls.append({"name": call.name, "arguments": parsed if parsed is not None else call.arguments})
    return calls


def _ordered(calls: list[dict], ordered: bool) -> list[dict]:
    return calls if ordered else sorted(calls, key=lambda c: json.dumps(c, sort_keys=True, default=str))


def expectation_diff(record: dict, limit: int = BLOB_CAP) -> str:
    """Unified diff of the expected tool calls against the ones that came back, read through the record's own
    surface (``api``); "" when there is no answer."""
    expect = record.get("expect")
    if not isinstance(expect, dict):
        return ""
    # Read as the record's own surface reads it: a Responses or Messages answer is no Chat Completions body.
    message = record_of(record).exchange().message()
    if message is None:
        return ""
    ordered = bool(expect.get("ordered"))
    # A live case's expectation names them "calls"; a replay fixture's, "tool_calls" (its expected answer).
    expected = expect["calls"] if "calls" in expect else expect.get("tool_calls")
    want: dict[str, Any] = {"tool_calls": _ordered(list(expected or []), ordered)}
    got = {"tool_calls": _ordered(_calls(message), ordered)}
    if expect.get("any_call"):
        want["tool_calls"] = "(any call)"
    if want == got:
        return "(the tool calls match the expectation; see the failing checks)"
    lines = difflib.unified_diff(_pretty(want).splitlines(), _pretty(got).splitlines(), "expected", "got", lineterm="")
    return cap("\n".join(lines), limit)


def failure_detail(record: dict, limit: int = BLOB_CAP) -> dict:
    """The heavy part of a failing case, as text fields of at most ``limit`` characters each."""
    detail: dict[str, Any] = {"http_status": record.get("http_status"), "request": blob(record["request"], limit)}
    if "chunks" in record:
        detail["chunks"] = chunks_text(record["chunks"], limit)
    if "response" in record:
        detail["response"] = blob(record["response"], limit)
    for key in ("error", "raw_text"):
        if record.get(key):
            detail[key] = cap(str(record[key]), limit)
    detail["checks"] = [
        {"name": c["name"], "blame": c["blame"], "detail": cap(c["detail"], REASON_CAP)}
        for c in record["checks"] if c["outcome"] == "fail"
    ]
    detail["diff"] = expectation_diff(record, limit)
    if "expect" in record:
        detail["expect"] = blob(record["expect"], limit)
    if "followup" in record:
        detail["followup"] = blob({k: v for k, v in record["followup"].items() if k != "request"}, limit)
    detail["blamed_by"] = record.get("blamed_by")
    evidence = record.get("evidence")
    if evidence:
        detail["evidence"] = {
            "status": evidence["status"], "reason": cap(evidence.get("reason") or "", REASON_CAP),
            "method": evidence.get("method"), "source": evidence.get("source"),
            "raw_text": cap(evidence.get("raw_text") or "", limit),
            "calls": blob(evidence.get("calls"), limit) if evidence.get("calls") is not None else None,
            "template_diff": cap((evidence.get("template") or {}).get("diff") or "", limit),
        }
    return detail

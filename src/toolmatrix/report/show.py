"""``toolmatrix show``: one record, for a person who disagrees with a red cell.

By default the brief view: the verdict and blame, the reason, the failing checks, what the answer said, the model's
own raw text (capped), then a ``curl`` that sends the request again as a client would (the harness's own evidence
fields left out, the key as ``$VAR``, never its value) and the pytest command that runs the case again. ``--full``
adds every check, the request as sent and the answer as it came.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from toolmatrix.live.evidence import client_request
from toolmatrix.records import (
    LIVE,
    Record,
    Run,
    kept_exchange,
    read_run_info,
    repro_command,
    repro_prefix,
    run_dirs,
    scan_records,
)
from toolmatrix.wire.exchange import Exchange
from toolmatrix.wire.surfaces import MESSAGES, surface

# A gate's failing line: "REGRESSION single.weather [stream]: ..." (gate.GateReport.lines).
GATE_LINE = re.compile(r"^\s*(?:REGRESSION\s+)?(?P<case>\S+)\s+\[(?P<mode>nonstream|stream)\]")
ANSWER_CAP = 4000  # characters of an answer or raw text shown by --full; the record holds all of it
NO_BASE_URL = "set BASE_URL to your server, e.g. http://127.0.0.1:8080/v1"  # bash's word where it is unset
BRIEF_CAP = 600  # characters of the model's raw text, or of one said thing, in the brief view


def parse_selector(text: str, mode: str | None) -> tuple[str, str | None]:
    """(case id, mode or None) from a case id or a gate's failing line."""
    found = GATE_LINE.match(text)
    if found:
        return found.group("case"), mode or found.group("mode")
    return text.strip(), mode


def find_records(root: Path, case_id: str, mode: str | None, pair: str | None) -> list[tuple[Run, Record]]:
    found = []
    for directory in run_dirs(root):
        info = read_run_info(directory)
        if pair and info.pair != pair:
            continue
        for line in scan_records(info):
            if line.data["case_id"] == case_id and (mode is None or line.data["mode"] == mode):
                found.append((info.run, line.record))
    return found


def curl_command(run: Run, request: dict) -> str:
    """A shell command that sends ``request`` again over the run's surface as a client would (without the fields
    the harness adds for evidence), with the run's key variable, never a key. The URL is ``$BASE_URL``: by default
    the server a ``--base-url`` run reached; a server the run started itself is gone, so there it must be set."""
    base = run.engine.base_url if run.engine.launcher == "external" else None
    url = f"${{BASE_URL:-{base}}}" if base else f"${{BASE_URL:?{NO_BASE_URL}}}"
    key_var = run.option("--api-key-env")
    lines = [f'curl -sS{"N" if request.get("stream") else ""} "{url}{surface(run.api).path}"',
             "-H 'Content-Type: application/json'"]
    if run.api == MESSAGES:  # the anthropic client's headers
        lines.append("-H 'anthropic-version: 2023-06-01'")
    if key_var:
        lines.append(f'-H "x-api-key: ${key_var}"' if run.api == MESSAGES else f'-H "Authorization: Bearer ${key_var}"')
    lines.append("--data-binary @- <<'JSON'")
    # One line of JSON starts with "{": never the line that ends the here-document.
    return " \\\n  ".join(lines) + "\n" + json.dumps(client_request(request), ensure_ascii=False) + "\nJSON"


def _capped(text: str, limit: int = ANSWER_CAP) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... (cut: {len(text) - limit} more characters)"


def _answer(exchange: Any) -> str:
    """The answer as it came: the body, the stream's chunks, or what went wrong."""
    if exchange.error:
        return f"(no answer: {exchange.error})"
    if exchange.chunks is not None:
        return _capped("\n".join(json.dumps(c, ensure_ascii=False) for c in exchange.chunks))
    if exchange.response is not None:
        return _capped(json.dumps(exchange.response, indent=2, ensure_ascii=False))
    return _capped(exchange.raw_text or "(empty)")


def _said(answer: Exchange) -> list[str]:
    """What the answer said, read as the surface's client reads it: finish reason, content, reasoning, calls."""
    message = answer.message()
    if message is None:  # an error or a body with no message: the body itself, short
        body = answer.raw_text if answer.response is None else json.dumps(answer.response, ensure_ascii=False)
        return [f"  (no message: {_capped(answer.error or body or 'empty', BRIEF_CAP)})"]
    out = [f"  finish_reason: {message.finish_reason}", f"  content: {_brief(message.content)}"]
    if message.reasoning is not None:
        out.append(f"  reasoning: {_brief(message.reasoning)}")
    out.append(f"  calls: {len(message.tool_calls)}")
    out += [f"    {call.name} {_brief(call.arguments)}" for call in message.tool_calls]
    return out


def _brief(value: Any) -> str:
    text = value if isinstance(value, str) and value else json.dumps(value, ensure_ascii=False)
    return _capped(text, BRIEF_CAP)


def _checks(checks: Any, full: bool) -> list[str]:
    shown = [c for c in checks if full or c.failed]
    out = [f"  {c.outcome.upper():<11} {c.name}" + (f" [{c.blame}]" if c.failed and c.blame else "")
           + (f": {c.detail}" if c.detail else "") for c in shown]
    others = len(checks) - len(shown)
    return out + ([f"  ({others} others passed or were skipped)"] if others else [])


def render(run: Run, record: Record, full: bool = False) -> str:
    """The record as a person reads it: brief, or ``full`` with every check, the request and the answer."""
    blame = f", blamed {record.blame} (decided by {record.blamed_by})" if record.blame else ""
    out = [f"{record.case_id} [{record.mode}] on {run.pair}, run {run.run_id}: {record.verdict.value.upper()}{blame}",
           f"engine: {run.engine.id} {run.engine.version or ''}  flags: {shlex.join(run.engine.flags)}"]
    if record.description:
        out.append(f"case: {record.description}")
    if record.reason:
        out.append(f"reason: {record.reason}")
    out += ["", "checks:" if full else "failing checks:", *_checks(record.checks, full)]
    if full:
        out += ["", "request (as sent):", json.dumps(record.request, indent=2, ensure_ascii=False), "",
                f"answer (HTTP {record.http_status}):", _answer(record)]
    out += ["", "the answer said:", *_said(record.exchange())]
    evidence = record.evidence
    if evidence is not None:
        out += ["", f"the model's own raw text (evidence {evidence.label}"
                + (f": {evidence.reason}" if evidence.reason else "") + "):",
                _capped(evidence.raw_text, ANSWER_CAP if full else BRIEF_CAP)
                if evidence.raw_text is not None else "(none)"]
    if record.followup is not None:
        follow = record.followup
        out += ["", "second turn (tool results sent back):", *_checks(follow.checks, full)]
        if full:
            out += [json.dumps(follow.request, indent=2, ensure_ascii=False),
                    f"answer (HTTP {follow.http_status}):", _answer(follow)]
        out += ["its answer said:", *_said(kept_exchange(follow, record.api))]
    if record.tier == LIVE:  # a replayed fixture was never sent to a server: it is fed to the parser again
        out += ["", "send it again, as a client would:", curl_command(run, record.request)]
    out += ["", "run the case again:", repro_command(repro_prefix(run), record.case_id, record.mode)]
    if not full:
        out += ["", "(--full: every check, the request as sent and the answer as it came)"]
    return "\n".join(out)

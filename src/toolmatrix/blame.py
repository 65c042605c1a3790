"""Blame from evidence: the model's own words decide between the model and the engine.

A check that judges *what was said* (the content checks below) is run again on the model's own answer (its raw
text read by the family's reference parser). It fails there too: the model said it wrong (``model``, or
``template`` when the engine rendered the prompt differently from the model's reference template). It passes
there: the model said it right and the engine lost, renamed, re-typed, dropped, merged or leaked it (``engine``).
Checks on how it was sent (wire shape, ids, stream deltas, tool_choice, ...) are the engine's in any case.
"""

from __future__ import annotations

import json

import attrs

from toolmatrix.checks import CheckInput, leaked_markers, run_checks
from toolmatrix.exchange import Exchange
from toolmatrix.formats import Family, ParseResult
from toolmatrix.results import Blame, CheckResult, Evidence

# The checks that judge what the answer says, and so can be asked of the model's own words.
CONTENT_CHECKS = frozenset({"arguments_json", "no_marker_leak", "ascii_escaping", "arguments_schema", "expected_calls"})
# What a call the model did not finish, or wrote unreadably, fails in an answer: its own words fail these too.
MALFORMED_CALL_CHECKS = frozenset({"arguments_json", "no_marker_leak"})


def model_answer(parsed: ParseResult, family: Family, request: dict) -> Exchange:
    """The model's own words as a non-streamed chat answer: its calls as parsed (an unreadable call keeps its raw
    text as arguments), the rest of its text as content, less the reasoning tags an engine is there to split off."""
    calls = [
        {"id": f"model_{n}", "type": "function",
         "function": {"name": c.name, "arguments": c.raw if c.arguments is None else json.dumps(c.arguments)}}
        for n, c in enumerate(parsed.calls)
    ]
    content = parsed.content
    for marker in family.reasoning_markers:
        content = content.replace(marker, "")
    message: dict = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}
    return Exchange("nonstream", request, 200, body)


def reblame(checks: list[CheckResult], inputs: CheckInput, evidence: Evidence) -> tuple[list[CheckResult], bool]:
    """The checks with their blames decided by the evidence, and whether any content check was decided so."""
    parsed = inputs.family.parse(evidence.raw_text or "", list(inputs.case.tools))
    said = model_answer(parsed, inputs.family, inputs.exchange.request)
    own = CheckInput(inputs.case, said, inputs.family, inputs.expect)
    theirs = {r.name: r for r in run_checks(own)}
    # A marker the engine's answer leaks that the model's own text does not is the engine's, whatever else leaks.
    engine_made = {m for _, m in leaked_markers(inputs)} - {m for _, m in leaked_markers(own)}
    rendered_differently = evidence.template is not None and not evidence.template.same
    out, decided = [], False
    for check in checks:
        if not check.failed or check.name not in CONTENT_CHECKS:
            out.append(check)
            continue
        decided = True
        malformed = bool(parsed.errors) and check.name in MALFORMED_CALL_CHECKS
        made_here = check.name == "no_marker_leak" and bool(engine_made)
        if (theirs[check.name].failed or malformed) and not made_here:
            blame = Blame.TEMPLATE if rendered_differently else Blame.MODEL
            why = ("the model's own text holds a call it did not finish or that cannot be read" if malformed else
                   "the model's own text fails the same way")
            if rendered_differently:
                why += ", and the engine rendered its prompt differently from the reference template"
        elif made_here:
            blame = Blame.ENGINE
            why = f"the model's own text holds none of {sorted(engine_made)} (it wrote {_said(evidence)})"
        else:
            blame = Blame.ENGINE
            why = f"the model's own text passes this check (it wrote {_said(evidence)}); the engine changed it"
        out.append(attrs.evolve(check, blame=blame, detail=f"{check.detail} [evidence: {why}]"))
    return out, decided


def _said(evidence: Evidence) -> str:
    calls = evidence.calls or []
    if not calls:
        text = (evidence.raw_text or "").replace("\n", "\\n")
        return f"no call: {text[:80]!r}"
    return "; ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})" for c in calls)[:160]


"""Blame from evidence: the model's own words decide between the model and the engine.

A check that judges *what was said* (registered as judging ``CALLS`` or ``MARKERS``) is run again on the model's
own answer (its raw text read by the family's reference parser). It fails there too: the model said it wrong
(``model``, or ``template`` when the engine rendered the prompt differently from the model's reference template).
It passes there: the model said it right and the engine lost, renamed, re-typed, dropped, merged or leaked it
(``engine``). Checks on how it was sent (wire shape, ids, stream deltas, tool_choice, ...) are the engine's in any
case.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from toolmatrix.formats import Family, ParseResult
from toolmatrix.judge.checks import CheckInput, Judges, leaked_markers, non_ascii_escape, registered, run_checks
from toolmatrix.records import Blame, CheckResult, Evidence
from toolmatrix.wire.exchange import Exchange

# What checks judge that can be asked of the model's own words: what the answer says, not how it was sent.
SAID = frozenset({Judges.CALLS, Judges.MARKERS})


@attrs.frozen
class ModelWords:
    """The model's raw text read as an engine should read it: its reasoning block split off first (a call
    written inside the thinking is no call), then the calls parsed from the rest."""

    reasoning: str | None
    parsed: ParseResult

    @classmethod
    def read(cls, raw: str, family: Family, tools: list[dict[str, Any]]) -> ModelWords:
        reasoning, rest = split_reasoning(raw, family.reasoning_markers)
        return cls(reasoning, family.parse(rest, tools))


def split_reasoning(text: str, markers: tuple[str, ...]) -> tuple[str | None, str]:
    """(reasoning, the rest) for a family whose reasoning is one ``open ... close`` block. A text with the close
    but no open (the template opened it in the prompt, as Qwen3's and DeepSeek R1's do) reasons up to the close;
    an open never closed reasons to the end."""
    if len(markers) != 2:
        return None, text
    opener, closer = markers
    before, opened, after = text.partition(opener)
    if not opened:
        if closer not in text:
            return None, text
        before, after = "", text
    thought, closed, rest = after.partition(closer)
    if not closed:
        return thought, before
    return thought, before + rest


def model_answer(words: ModelWords, request: dict[str, Any]) -> Exchange:
    """The model's own words as a non-streamed chat answer: its calls as parsed (an unreadable call keeps its raw
    text as arguments), the rest of its text as content, its reasoning as ``reasoning_content``. Arguments are
    written in UTF-8, as the model wrote them, unless the model itself escaped non-ASCII text: an engine's \\u
    re-escaping must not be found in the model's words."""
    calls = [
        {"id": f"model_{n}", "type": "function",
         "function": {"name": c.name, "arguments": c.raw if c.arguments is None else json.dumps(
             c.arguments, ensure_ascii=non_ascii_escape(c.raw) is not None)}}
        for n, c in enumerate(words.parsed.calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": words.parsed.content or None}
    if words.reasoning is not None:
        message["reasoning_content"] = words.reasoning
    if calls:
        message["tool_calls"] = calls
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}
    return Exchange("nonstream", request, 200, body)


def reblame(checks: list[CheckResult], inputs: CheckInput, evidence: Evidence) -> tuple[list[CheckResult], bool]:
    """The checks with their blames decided by the evidence, and whether the first failing one (whose blame is
    the record's) was decided so.

    The raw text rules: a marker the engine's answer shows is the engine's only where the raw text does not hold
    it, and a call the model did not finish or wrote unreadably is the model's whatever the reference parser's
    reconstruction (which leaves such a call out) would pass."""
    raw = evidence.raw_text or ""
    words = ModelWords.read(raw, inputs.family, list(inputs.case.tools))
    own = CheckInput(inputs.case, model_answer(words, inputs.exchange.request), inputs.family, inputs.expect)
    theirs = {r.name: r for r in run_checks(own)}
    # A marker the engine's answer leaks that the model's own text does not hold is the engine's doing.
    engine_made = {m for _, m in leaked_markers(inputs) if m not in raw}
    rendered_differently = evidence.template is not None and not evidence.template.same
    unreadable = words.parsed.errors
    out, decided = [], False
    first = next((c for c in checks if c.failed), None)
    for check in checks:
        judged = registered(check.name)  # a result named after no registered check raises, never passes as one
        # A second turn's check (followup.NAME) stays as it is: the model's words answer the first turn only.
        if not check.failed or judged.judges not in SAID or check.name not in theirs:
            out.append(check)
            continue
        decided = decided or check is first
        # A call the model did not finish or wrote unreadably fails such a check: its own words fail it too.
        malformed = bool(unreadable) and judged.unreadable_call_fails
        made_here = judged.judges is Judges.MARKERS and bool(engine_made)
        if (theirs[check.name].failed or malformed) and not made_here:
            blame = Blame.TEMPLATE if rendered_differently else Blame.MODEL
            why = (f"the model's own text holds a call it did not finish or that cannot be read: {unreadable[0]}"
                   if malformed else "the model's own text fails the same way")
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


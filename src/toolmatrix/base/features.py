"""The feature vocabulary: what a case exercises, and what an engine or a model may declare it does not support.

One list, here: ``Case.features`` derives these names, and the JSON Schemas of engine specs, the model registry
and case files take their enum from ``FEATURES`` when they load (``"x-vocabulary": "features"``).
"""

from __future__ import annotations

TOOL_CHOICE = ("tool_choice.none", "tool_choice.required", "tool_choice.named", "tool_choice.invalid")
PARALLEL_CALLS = "parallel_calls"  # more than one call expected
PARALLEL_TOOL_CALLS_FALSE = "parallel_tool_calls.false"  # the request forbids parallel calls
MULTI_TURN = "multi_turn"  # a tool result is sent back
# What the model itself must do for a case to test anything, declared by a case's ``requires``. A model that lacks
# it can neither pass nor fail such a case: ``checks.judge`` makes it ``unsupported`` whatever the answer.
REASONING = "reasoning"  # the model writes a thinking block before it answers
PRECONDITIONS = (REASONING,)
NOT_THINKING = "the model does not think"  # the gap of every registry model without a ``reasoning:`` style
CASE_FEATURES = (*TOOL_CHOICE, PARALLEL_CALLS, PARALLEL_TOOL_CALLS_FALSE, MULTI_TURN, *PRECONDITIONS)
# Checks an engine may declare it fails by design (a response shape it is known to differ in): a gap, not a bug.
CHECK_GAPS = ("call_ids", "finish_reason")
# A surface other than Chat Completions (see ``wire.surfaces``), which an engine may declare it does not serve.
SURFACE_FEATURES = ("api.responses", "api.messages")
FEATURES = CASE_FEATURES + CHECK_GAPS + SURFACE_FEATURES


def surface_features(api: str) -> tuple[str, ...]:
    """What sending over ``api`` exercises: nothing for chat, ``api.NAME`` for the others."""
    return () if api == "chat" else (f"api.{api}",)


def fill_vocabulary(schema: object) -> object:
    """A schema with every ``{"x-vocabulary": "features"}`` given the enum of FEATURES."""
    if isinstance(schema, dict):
        filled = {key: fill_vocabulary(value) for key, value in schema.items()}
        if filled.pop("x-vocabulary", None) == "features":
            filled["enum"] = list(FEATURES)
        return filled
    if isinstance(schema, list):
        return [fill_vocabulary(item) for item in schema]
    return schema

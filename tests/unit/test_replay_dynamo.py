"""Dynamo's replay: which of its Rust parsers each family gets (the live spec's --dyn-tool-call-parser and
--dyn-reasoning-parser values), why the others are skipped, and that the in-process frontend with its stand-in
worker answers a parse with Dynamo's own parsing (dynamo_worker.py), whole and streamed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from toolmatrix.formats import get_family
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.serving.registry import load_engines

DYNAMO = adapter_for(load_engines()["dynamo"])


@pytest.mark.parametrize(("family", "style", "tool", "reasoning"), [
    ("hermes", "qwen3", "hermes", "qwen3"),                 # --dyn-tool-call-parser hermes, --dyn-reasoning-parser
    ("glm47", None, "glm47", None),
    ("deepseek_v31", "deepseek_v3", "deepseek_v3_1", "deepseek_r1"),
    ("harmony", "harmony", "harmony", "gpt_oss"),
    ("kimi_k2", None, "kimi_k2", None),
])
def test_each_family_gets_the_parser_the_live_spec_starts_the_worker_with(family, style, tool, reasoning) -> None:
    support = DYNAMO.supports(family, style)
    assert (support.tool_parser, support.reasoning_parser) == (tool, reasoning) and support


def test_a_family_without_a_parser_is_skipped_with_the_specs_reason() -> None:
    support = DYNAMO.supports("granite", None)
    assert not support and "Dynamo has no --dyn-tool-call-parser for this format (granite)" in support.reason


def test_glm45_is_a_cell_without_a_parser_not_glm47s_failures() -> None:
    """Dynamo has no GLM-4.5 tool parser; the spec sent GLM-4.5 to its GLM-4.7 one, and the format gap counted as
    184 replay failures. Live and replay read the same spec lines: neither serves it, both say why."""
    support = DYNAMO.supports("glm45", "glm45")
    assert not support and "no GLM-4.5 --dyn-tool-call-parser" in support.reason
    assert "glm45" not in DYNAMO.spec.family_args and "GLM-4.5" in DYNAMO.spec.cannot_serve["glm45"]


TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}]


def _parse(text: str, pieces: list[str], tool: str, reasoning: str | None, family: str,
           template_kwargs: dict | None = None, tools: list = TOOLS, home: Path | None = None) -> dict:
    if DYNAMO.ready() or tokenizer_path(family) is None:
        pytest.skip(f"{DYNAMO.ready() or 'no tokenizer'} (toolmatrix replay-install dynamo / tokenizers)")
    req = {"op": "parse", "text": text, "tools": tools, "tool_parser": tool, "reasoning_parser": reasoning,
           "tokenizer": str(tokenizer_path(family)), "family": family,
           "streams": {"pieces": [[p, None] for p in pieces]},
           "chat_template_kwargs": template_kwargs or {}}
    done = subprocess.run([str(DYNAMO.python), str(DYNAMO.worker)], input=json.dumps(req) + "\n", text=True,
                          capture_output=True, env={**DYNAMO.env(), **({"HOME": str(home)} if home else {})},
                          timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_frontend_parses_a_hermes_call_and_its_reasoning_whole_and_streamed(tmp_path: Path) -> None:
    text = '<think>UTC?</think>Checking.\n<tool_call>\n{"name": "get_time", "arguments": {"timezone": "UTC"}}\n' \
           '</tool_call>'
    cuts = [0, len("<think>UTC"), text.index("ing."), text.index('"get_time"'), len(text)]
    answer = _parse(text, [text[a:b] for a, b in zip(cuts, cuts[1:])], "hermes", "qwen3", "hermes", home=tmp_path)
    # Dynamo's copies of the stand-in's model folder stay in the worker's own temporary home, not the user's (two
    # workers wrote the same files there at once).
    assert not (tmp_path / ".cache" / "dynamo").exists()
    whole = answer["nonstream"]
    assert (whole["reasoning"], whole["content"].strip()) == ("UTC?", "Checking.")
    assert [(c["name"], json.loads(c["arguments"])) for c in whole["tool_calls"]] == [("get_time", {"timezone": "UTC"})]
    deltas = answer["streams"]["pieces"]["deltas"]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "UTC?"
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_time"
    assert json.loads("".join(c["function"].get("arguments", "") for c in calls)) == {"timezone": "UTC"}


def test_harmony_parses_with_the_offline_vocabulary() -> None:
    """Without o200k at $TIKTOKEN_ENCODINGS_BASE Dynamo strips a Harmony answer to nothing (measured)."""
    text = '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"timezone": "UTC"}<|call|>'
    whole = _parse(text, [text], "harmony", "gpt_oss", "harmony")["nonstream"]
    assert [(c["name"], json.loads(c["arguments"])) for c in whole["tool_calls"]] == [("get_time", {"timezone": "UTC"})]


def test_the_fixtures_thinking_switch_reaches_the_force_reasoning_parser() -> None:
    """Dynamo's ``deepseek_r1`` parser reads an answer without ``</think>`` as reasoning unless the request turns
    thinking off; replay asks as the fixture shows, under V3.1's own key, so a DeepSeek-V3.1 call without reasoning
    is a call."""
    key = get_family("deepseek_v31").thinking_key
    text = ("<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>get_time"
            "<\uff5ctool\u2581sep\uff5c>{\"timezone\": \"UTC\"}<\uff5ctool\u2581call\u2581end\uff5c>"
            "<\uff5ctool\u2581calls\u2581end\uff5c>")
    off = _parse(text, [text], "deepseek_v3_1", "deepseek_r1", "deepseek_v31", {key: False})
    assert [(c["name"], json.loads(c["arguments"])) for c in off["nonstream"]["tool_calls"]] == [
        ("get_time", {"timezone": "UTC"})]
    assert [c["function"]["name"] for d in off["streams"]["pieces"]["deltas"] for c in d.get("tool_calls", [])] == [
        "get_time"]
    on = _parse(text, [text], "deepseek_v3_1", "deepseek_r1", "deepseek_v31", {key: True})["nonstream"]
    assert on["tool_calls"] == [] and "get_time" in on["reasoning"]


def test_the_frontends_own_refusal_is_its_status_streamed_or_not() -> None:
    """Dynamo's frontend refuses a dotted tool name with HTTP 400 before any parsing; the stream's record is that
    400 as the non-streamed one's is, not a worker crash's 500."""
    dotted = [{"type": "function", "function": {"name": "weather.get", "parameters": {"type": "object"}}}]
    answer = _parse("<tool_call>\n{\"name\": \"weather.get\", \"arguments\": {}}\n</tool_call>",
                    ["<tool_call>", "\n{}"], "hermes", None, "hermes", tools=dotted)
    assert answer["nonstream"]["status"] == 400 and answer["streams"]["pieces"]["status"] == 400
    assert "invalid name" in answer["streams"]["pieces"]["error"]

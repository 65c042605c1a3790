"""Thinking models of families whose registered models do not think, replayed as their servers run them: through
the real SGLang and vLLM parser workers, each fixture written as an outside set writes it (the model named as the
hub names it, no reasoning style, a generation prompt where the model's template opens its thinking).

Skipped where an engine's parser env is missing, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import load_engines

TOOL = {"type": "function", "function": {"name": "run_in_terminal", "description": "Run a shell command.", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
THOUGHT = "I should inspect the directory."
CALL = {"name": "run_in_terminal", "arguments": {"command": "pwd"}}
QWEN_CALL = "<tool_call>\n<function=run_in_terminal>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>"

# fixture id -> (family, model, generation prompt or None, text, expected reasoning, reasoning parser on SGLang)
FIXTURES = {
    "qwen3.6.think": ("qwen3_coder", "Qwen/Qwen3.6-27B", "<|im_start|>assistant\n<think>\n",
                      f"{THOUGHT}\n</think>\n\n{QWEN_CALL}", THOUGHT, "qwen3"),
    "qwen3.6.nothink": ("qwen3_coder", "Qwen/Qwen3.6-27B", "<|im_start|>assistant\n<think>\n\n</think>\n\n",
                        QWEN_CALL, None, "qwen3"),
    "glm4.7.think": ("glm47", "zai-org/GLM-4.7", "<|assistant|><think>",
                     f"{THOUGHT}</think><tool_call>run_in_terminal<arg_key>command</arg_key><arg_value>pwd</arg_value>"
                     "</tool_call>", THOUGHT, "glm45"),
    "kimi-k2.6.think": ("kimi_k2", "moonshotai/Kimi-K2.6", "<|im_assistant|>assistant<|im_middle|><think>",
                        f"{THOUGHT}</think><|tool_calls_section_begin|><|tool_call_begin|>functions.run_in_terminal:0"
                        '<|tool_call_argument_begin|>{"command": "pwd"}<|tool_call_end|><|tool_calls_section_end|>',
                        THOUGHT, "kimi_k2"),
    "magistral.think": ("mistral_v11", "mistralai/Magistral-Small-2509", "[/INST]",
                        f'[THINK]{THOUGHT}[/THINK][TOOL_CALLS]run_in_terminal[ARGS]{{"command": "pwd"}}', THOUGHT,
                        "mistral"),
    "deepseek-v3.2.think": ("deepseek_v32", "deepseek-ai/DeepSeek-V3.2", None,
                            f'{THOUGHT}</think>\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="run_in_terminal">\n'
                            '<｜DSML｜parameter name="command" string="true">pwd</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                            "</｜DSML｜function_calls>", THOUGHT, "deepseek-v3"),
}


def fixtures() -> list[Fixture]:
    made = []
    for fid, (family, model, prompt, text, reasoning, _) in FIXTURES.items():
        data = {"id": fid, "family": family, "model": model, "text": text, "tools": [TOOL],
                "expected": {"tool_calls": [CALL], "content": None, "reasoning": reasoning}}
        made.append(Fixture.from_dict({**data, **({"generation_prompt": prompt} if prompt else {})}))
    return made


def adapter_or_skip(engine: str):
    adapter = adapter_for(load_engines()[engine])
    why = adapter.ready()
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return adapter


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_thinking_models_pass_with_the_reasoning_parser_their_servers_run(engine: str, tmp_path: Path) -> None:
    """Before, each got no reasoning parser: ``</think>`` (or ``[/THINK]``) stayed in content and the reasoning
    was empty, a failure its authors never saw on a real server. Every mode passes now, and each record says why
    its reasoning parser is the one it is."""
    counts = replay_engine(adapter_or_skip(engine), fixtures(), tmp_path, ["whole", "token"])
    records = list(read_records(tmp_path))
    assert records and counts["fail"] == counts["error"] == 0, [(r.case_id, r.reason) for r in records]
    for record in records:
        assert record.replay.parser_choice.startswith(f"reasoning parser {record.replay.reasoning_parser}: ")
    if engine == "sglang":  # every family has its tokenizer-free parsers there
        assert {r.case_id: r.replay.reasoning_parser for r in records} == {k: v[-1] for k, v in FIXTURES.items()}
    replayed = {r.case_id for r in records}
    skipped = json.loads((tmp_path / "run.json").read_text())["engine"].get("skipped_families", {})
    assert {"qwen3.6.think", "qwen3.6.nothink"} <= replayed and set(skipped) <= {"glm47", "kimi_k2", "mistral_v11",
                                                                                    "deepseek_v32"}

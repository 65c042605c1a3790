"""MLX-LM's spec and replay mapping: mlx_lm.server takes no parser flag, so engines/mlxlm.yaml serves its families
without flags and names for replay the parser module each family's template selects; every other family is an
empty cell with the spec's measured reason. The live command line is the one MLX-LM 0.32.2's server parses, and the
replay env pins the same mlx-lm and mlx as the live env, so a replay cell speaks for the live version.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from toolmatrix.formats import all_families
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.serving.launchers.process import ProcessLauncher
from toolmatrix.serving.registry import ModelSpec, load_engines

SPEC = load_engines()["mlxlm"]
MLXLM = adapter_for(SPEC)


@pytest.mark.parametrize(("family", "parser"), [
    ("hermes", "json_tools"),       # Qwen3's template: <tool_call> and tool_call.name
    ("qwen3_coder", "qwen3_coder"),
    ("glm45", "glm47"),             # GLM-4.5/4.6's template has <arg_key>, which selects glm47
    ("mistral_v11", "mistral"),
])
def test_each_served_family_replays_with_the_parser_its_template_selects(family: str, parser: str) -> None:
    support = MLXLM.supports(family, "qwen3")
    assert support and support.tool_parser == parser
    assert support.reasoning_parser is None  # no flag: the server reads the thinking markers from the vocabulary
    assert SPEC.family_args[family] == ()  # and the live tier serves it without flags


@pytest.mark.parametrize(("family", "reason"), [
    ("harmony", "MLX-LM 0.32.2 has no Harmony parser"),          # its own cannot_serve line
    ("llama3_json", "infers no tool parser from Llama 3.1's template"),
    ("json_lines", "has no parser for bare JSON call objects"),  # measured live (results/cpu-qwen2.5-coder)
    ("gemma3", "MLX-LM 0.32.2 has no tool parser for this format"),  # the "*" line
])
def test_a_family_without_a_parser_is_skipped_with_the_specs_reason(family: str, reason: str) -> None:
    support = MLXLM.supports(family, None)
    assert not support and reason in support.reason and family in support.reason


def test_every_family_either_replays_or_says_why_not() -> None:
    for family in (f.id for f in all_families()):
        support = MLXLM.supports(family, None)
        assert support or support.reason.strip(), family


def test_the_live_command_line_is_mlx_lm_servers_own(tmp_path: Path) -> None:
    model = ModelSpec.from_source(f"hf:{tmp_path}", "hermes")
    launcher = ProcessLauncher(SPEC, model, slots=3)
    assert launcher.command(8123, fetch=False) == ["--model", str(tmp_path), "--host", "127.0.0.1", "--port", "8123",
                                                  "--decode-concurrency", "3"]
    assert SPEC.process is not None and SPEC.process.binary == "mlx_lm.server"
    # Any other model name is loaded as a path or a hub repository (server.py ModelProvider.load).
    assert launcher.served_model() == "default_model"


def test_the_replay_env_pins_the_live_envs_mlx_and_mlx_lm() -> None:
    assert SPEC.process is not None and SPEC.process.venv is not None
    live = {pin for step in SPEC.process.venv.steps for pin in step}
    replay = {pin for step in MLXLM.replay.pip for pin in step}
    assert {"mlx[cpu]==0.32.4", "mlx-lm==0.32.2"} <= live & replay


def test_the_live_env_can_convert_the_embedded_gguf_as_the_other_engines_do() -> None:
    # gguf-to-hf.py runs in the engine's own env when no engine converted the model yet: transformers (pinned as the
    # transformers engine's, which may have written the shared folder) loads the GGUF with gguf, accelerate, torch.
    assert SPEC.process is not None and SPEC.process.venv is not None
    pins = {pin for step in SPEC.process.venv.steps for pin in step}
    assert {"torch==2.13.0", "gguf==0.19.0", "accelerate==1.15.0", "transformers==5.23.0"} <= pins
    served = load_engines()["transformers"].process
    assert served is not None and served.venv is not None
    assert "transformers[serving]==5.23.0" in {pin for step in served.venv.steps for pin in step}


PROMPTS = r"""
import json, runpy, sys
worker = runpy.run_path(sys.argv[1], run_name="probe")
generator = worker["_generator_class"]()
prompts, tokenize = [], generator._tokenize
def spy(self, tokenizer, request, args):
    found = tokenize(self, tokenizer, request, args)
    prompts.append([tokenizer.decode(found[0]), found[3]])
    return found
generator._tokenize = spy
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}}}}]
for kwargs in json.loads(sys.argv[3]):
    worker["parse"]({"text": "Sunny.", "tools": tools, "tool_parser": "json_tools", "tokenizer": sys.argv[2],
                     "chat_template_kwargs": kwargs})
print(json.dumps(prompts))
"""


@pytest.mark.skipif(MLXLM.ready() is not None or tokenizer_path("hermes") is None,
                    reason=str(MLXLM.ready() or "toolmatrix replay-install tokenizers"))
def test_the_request_asks_thinking_as_a_client_does_and_the_template_renders_it() -> None:
    """mlx_lm.server renders the chat template with the request's chat_template_kwargs and takes its initial
    state from the prompt's last think marker: the worker sent none, so every fixture was answered as if the
    client had left the model's default. Qwen3's template closes an empty think block only when thinking is off."""
    done = subprocess.run([str(MLXLM.python), "-c", PROMPTS, str(MLXLM.worker), str(tokenizer_path("hermes")),
                           json.dumps([{"enable_thinking": False}, {"enable_thinking": True}])],
                          capture_output=True, text=True, env=dict(MLXLM.env()), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    (off, off_state), (on, on_state) = json.loads(done.stdout.strip().splitlines()[-1])
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") and off_state == "normal"
    assert on.endswith("<|im_start|>assistant\n") and on_state == "normal"

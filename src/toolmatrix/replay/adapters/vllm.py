"""vLLM: its unified ``vllm.parser.Parser`` (tool + reasoning), in the live tier's vLLM-CPU env (its parsers'
base class imports torch, so a torch-free env is not possible: reference/replay.md)."""

from __future__ import annotations

import attrs

from ..detok import Detok
from ..feeder import TOKENIZERS, tokenizer_path
from .base import Adapter, Support


@attrs.define
class VLLMAdapter(Adapter):
    engine: str = "vllm"
    worker_name: str = "vllm_worker.py"
    cost: float = 7.5
    env_name: str = "vllm"  # installed by `toolmatrix install vllm` (engines/vllm.yaml process.venv)
    package: str = "vllm-cpu"
    # v1/engine/detokenizer.py: DecodeStream primed with the whole prompt (:59-66,195), the stop token left out of
    # the text and kept in token_ids (:107-119). skip_special_tokens defaults True (chat_completion/protocol.py:283);
    # with tool_choice auto the server calls the parser's adjust_request (renderers/online_renderer.py:833-854),
    # and these tool and reasoning parsers' turn it off (at 0.32.0; tests/unit/test_replay_detok_engines.py asks
    # vLLM itself for every parser engines/vllm.yaml maps where a tokenizer is here).
    detok: Detok = Detok("vllm", "prompt", kept_by=frozenset({
        "hermes", "qwen3_xml", "hf", "mistral", "deepseek_v32", "kimi_k2", "glm45", "glm47", "granite", "gemma4",
        "functiongemma", "minimax_m2",  # tool parsers
        "qwen3"}))  # reasoning parsers (glm45 and gemma4 are named as tool parsers too)

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        support = super().supports(family, reasoning_style)
        # A family with no offline tokenizer of its own replays with its fixture's model's (harvested fixtures):
        # the worker refuses a fixture that has neither.
        if not support or tokenizer_path(family) is not None or family not in TOKENIZERS:
            return support
        # vLLM's parsers take the model's tokenizer and look their special tokens up in its vocabulary
        # (ToolParser.vocab, delta_token_ids): without the family's real one the parse would be made up.
        return Support(None, None, f"vllm {support.tool_parser}: tokenizer not fetched "
                                   "(toolmatrix replay-install tokenizers)")

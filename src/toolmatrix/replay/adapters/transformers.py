"""transformers: the response templates ``transformers serve`` parses with (cli/serving/utils.py), chosen there by
the model's ``model_type``, not by a flag; the family -> model_type table below is this adapter's spec line."""

from __future__ import annotations

import attrs

from .base import Adapter, Support

# transformers 5.23 _RESPONSE_TEMPLATE_FALLBACKS: Qwen 2/3 (Hermes blocks), Qwen 3.5 (Qwen3-Coder XML), Gemma 4.
MODEL_TYPES = {"hermes": "qwen3", "qwen3_coder": "qwen3_5", "gemma4": "gemma4"}


@attrs.define
class TransformersAdapter(Adapter):
    """The spec's adapter, choosing a response template by ``model_type`` where others read a parser flag."""

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        model_type = MODEL_TYPES.get(family)
        if model_type is None:
            return Support(None, None, f"transformers serve has no response template for {family} "
                                       f"(its fallbacks: {', '.join(sorted(set(MODEL_TYPES.values())))})")
        # The template parses reasoning itself: one parser for both.
        return Support(model_type, model_type if reasoning_style else None)

"""transformers: the response templates ``transformers serve`` parses with (cli/serving/utils.py), chosen there by
the model's ``model_type``, not by a flag; the family -> model_type table below is this adapter's spec line."""

from __future__ import annotations

import attrs

from ..detok import Detok
from .base import Adapter, Support

# transformers 5.23 _RESPONSE_TEMPLATE_FALLBACKS: Qwen 2/3 (Hermes blocks), Qwen 3.5 (Qwen3-Coder XML), Gemma 4.
MODEL_TYPES = {"hermes": "qwen3", "qwen3_coder": "qwen3_5", "gemma4": "gemma4"}


@attrs.define
class TransformersAdapter(Adapter):
    engine: str = "transformers"
    worker_name: str = "transformers_worker.py"
    cost: float = 3.0
    env_name: str = "transformers"  # installed by `toolmatrix install transformers`
    package: str = "transformers"
    # DecodeStream([]) per token, unprimed (cli/serving/utils.py:508-531); with a response template (every family
    # here has one) special tokens and EOS are kept (utils.py:109-233).
    detok: Detok = Detok("transformers", "none", skip_special=False, stop_dropped=False)

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        model_type = MODEL_TYPES.get(family)
        if model_type is None:
            return Support(None, None, f"transformers serve has no response template for {family} "
                                       f"(its fallbacks: {', '.join(sorted(set(MODEL_TYPES.values())))})")
        # The template parses reasoning itself: one parser for both.
        return Support(model_type, model_type if reasoning_style else None)

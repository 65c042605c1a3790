"""MLX-LM: ``mlx_lm.server``'s own request handler, text state machine and tool parsers (mlx_lm/server.py,
tool_parsers/) at the version engines/mlxlm.yaml pins, on the CPU build of mlx, in an env of their own."""

from __future__ import annotations

import attrs

from ..detok import Detok
from .base import Adapter


@attrs.define
class MLXLMAdapter(Adapter):
    engine: str = "mlxlm"
    worker_name: str = "mlxlm_worker.py"
    cost: float = 6.5
    env_name: str = "mlxlm-replay"
    package: str = "mlx-lm"
    # Its streaming detokenizer per token, unprimed, never skipping specials; the EOS token not decoded
    # (tokenizer_utils.py:689-708, server.py:975). The worker runs that detokenizer itself on the ids.
    detok: Detok = Detok("mlxlm", "none", skip_special=False)
    # mlx's CPU wheel (mlx-lm requires mlx only on macOS), mlx-lm without its dependencies (sentencepiece and
    # protobuf serve only SentencePiece tokenizers, which no replayed family has), then what its server imports:
    # numpy comes with transformers (the tokenizer and chat template), jinja2 renders the template.
    pip_steps: tuple[tuple[str, ...], ...] = (
        ("mlx[cpu]==0.32.4", "transformers==5.23.0", "jinja2==3.1.6"),
        ("--no-deps", "mlx-lm==0.32.2"),
    )

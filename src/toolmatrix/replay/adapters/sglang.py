"""SGLang: function-call and reasoning parsers at a pinned version, in a torch-free env of their own."""

from __future__ import annotations

import attrs

from ..detok import Detok
from .base import Adapter


@attrs.define
class SGLangAdapter(Adapter):
    engine: str = "sglang"
    worker_name: str = "sglang_worker.py"
    cost: float = 1.5
    env_name: str = "sglang-replay"
    package: str = "sglang"
    # batch_decode over surrounding/read windows seeded with the last 5 prompt ids (srt/managers/schedule_batch.py);
    # skip_special_tokens False whenever tools are offered and tool_choice is not none (serving_chat.py:1861); the
    # matched stop token trimmed, except gpt-oss <|call|> under the gpt-oss tool parser
    # (detokenizer_manager.py:194-226); on an incomplete character the whole words before it are sent (:395-414).
    detok: Detok = Detok("sglang", "last5", skip_special=False, stop_kept={"gpt-oss": ("<|call|>",)},
                         whole_words=True)
    # reference/replay.md: sglang and xgrammar without their dependencies (a plain xgrammar pulls torch and CUDA,
    # ~6 GB), then only what the parser modules import; transformers and tokenizers at sglang's own pins.
    pip_steps: tuple[tuple[str, ...], ...] = (
        ("--no-deps", "sglang==0.5.23"),
        ("--no-deps", "xgrammar==0.2.7"),
        ("msgspec", "openai", "numpy", "pybase64", "requests", "ipython", "tqdm", "orjson", "partial-json-parser",
         "regex", "pydantic", "transformers==5.19.0", "tokenizers==0.23.2"),
    )

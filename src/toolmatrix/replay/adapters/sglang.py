"""SGLang: function-call and reasoning parsers at a pinned version, in a torch-free env of their own."""

from __future__ import annotations

import attrs

from .base import Adapter


@attrs.define
class SGLangAdapter(Adapter):
    engine: str = "sglang"
    worker_name: str = "sglang_worker.py"
    cost: float = 1.5
    env_name: str = "sglang-replay"
    package: str = "sglang"
    # reference/replay.md: sglang and xgrammar without their dependencies (a plain xgrammar pulls torch and CUDA,
    # ~6 GB), then only what the parser modules import; transformers and tokenizers at sglang's own pins.
    pip_steps: tuple[tuple[str, ...], ...] = (
        ("--no-deps", "sglang==0.5.23"),
        ("--no-deps", "xgrammar==0.2.7"),
        ("msgspec", "openai", "numpy", "pybase64", "requests", "ipython", "tqdm", "orjson", "partial-json-parser",
         "regex", "pydantic", "transformers==5.19.0", "tokenizers==0.23.2"),
    )

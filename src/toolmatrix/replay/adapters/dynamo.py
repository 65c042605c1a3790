"""NVIDIA Dynamo: its Rust tool-call and reasoning parsers, run in its own OpenAI frontend in-process (the worker
registers a stand-in model with the parsers engines/dynamo.yaml's live flags name), at the version the image pins."""

from __future__ import annotations

from typing import Mapping

import attrs

from .. import feeder
from .base import Adapter


@attrs.define
class DynamoAdapter(Adapter):
    engine: str = "dynamo"
    worker_name: str = "dynamo_worker.py"
    cost: float = 6.5
    env_name: str = "dynamo-replay"
    package: str = "ai-dynamo-runtime"
    # Its frontend is most of a replay's time and answers one request at a time well (several in flight stall it
    # ~40 ms each, measured): two frontends, one per worker process, halve its part on 2 cores.
    processes: int = 2
    tool_flag: str = "--dyn-tool-call-parser"
    reasoning_flag: str = "--dyn-reasoning-parser"
    # nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0 -> ai-dynamo-runtime 1.3.0.post1 (1.3.0 itself is not on PyPI; the
    # post release is its packaging fix), without its dependencies; the frontend and runtime need only pydantic (at
    # the wheel's own bound) and uvloop, the stand-in worker the tokenizers package.
    pip_steps: tuple[tuple[str, ...], ...] = (
        ("--no-deps", "ai-dynamo-runtime==1.3.0.post1"),
        ("pydantic==2.13.0", "uvloop==0.23.0", "tokenizers==0.23.3"),
    )

    def env(self) -> Mapping[str, str]:
        # Families with no offline tokenizer are encoded with Qwen3's (the worker's fallback); Dynamo's Harmony
        # parsers load the o200k vocabulary from TIKTOKEN_ENCODINGS_BASE (offline, else they strip every Harmony
        # answer to nothing), which the worker writes there from gpt-oss's tokenizer; Dynamo's own logs stay at
        # warnings (stderr).
        return {**super().env(), "TOOLMATRIX_DYNAMO_TOKENIZER": str(feeder.tokenizer_dir("qwen3") / "tokenizer.json"),
                "TOOLMATRIX_DYNAMO_HARMONY_TOKENIZER": str(feeder.tokenizer_dir("gptoss") / "tokenizer.json"),
                "TIKTOKEN_ENCODINGS_BASE": str(self.env_dir / "tiktoken"), "DYN_LOG": "warn"}

"""NVIDIA Dynamo: its Rust tool-call and reasoning parsers, run in its own OpenAI frontend in-process (the worker
registers a stand-in model with the parsers engines/dynamo.yaml's live flags name), at the version the image pins."""

from __future__ import annotations

from typing import Mapping

import attrs

from .. import feeder
from ..detok import Detok
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
    # DecodeStream seeded with the last 5 prompt ids, hidden stop ids giving no text (lib/llm/src/tokenizers.rs,
    # backend.rs); skip_special_tokens True unless a parser needs the specials (preprocessor.rs
    # parser_requires_special_tokens: harmony, gemma4, kimi_k2 tool parsers; gpt_oss, gemma4, kimi_k25 reasoning);
    # with tools harmony's <|call|> is a visible stop. The worker's frontend decodes the ids itself.
    detok: Detok = Detok("dynamo", "last5", kept_by=frozenset({"harmony", "gemma4", "kimi_k2", "gpt_oss", "kimi_k25"}),
                         stop_kept={"harmony": ("<|call|>",)})
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

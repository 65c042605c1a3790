"""LMDeploy: its tool and reasoning parsers (lmdeploy/serve/openai/) at the version engines/lmdeploy.yaml's image
pins, in a torch-free env of their own."""

from __future__ import annotations

from typing import Mapping

import attrs

from ..detok import Detok
from .base import Adapter


@attrs.define
class LMDeployAdapter(Adapter):
    engine: str = "lmdeploy"
    worker_name: str = "lmdeploy_worker.py"
    cost: float = 4.0
    env_name: str = "lmdeploy-replay"
    package: str = "lmdeploy"
    # Prefix/read-offset decoding seeded with the whole prompt (serve/core/async_engine.py:411,451; tokenizer.py);
    # skip_special_tokens False when tools are offered and tool_choice is not none (api_server.py:443-444); the stop
    # token cut from the ids before decoding (async_engine.py:444-447).
    detok: Detok = Detok("lmdeploy", "prompt", skip_special=False)
    # openmmlab/lmdeploy:v0.12.2 -> lmdeploy 0.12.2, without its dependencies (torch, triton, CUDA wheels), then only
    # what the parser modules import: mmengine-lite (their registries), pydantic, shortuuid, partial-json-parser,
    # openai-harmony (gpt-oss), and transformers for lmdeploy/utils.py and the tokenizer the parsers are built with.
    pip_steps: tuple[tuple[str, ...], ...] = (
        ("--no-deps", "lmdeploy==0.12.2"),
        ("mmengine-lite==0.10.7", "pydantic==2.14.4", "shortuuid==1.0.13", "partial-json-parser==0.2.1.1.post7",
         "openai-harmony==0.0.8", "transformers==4.57.6"),
    )

    def env(self) -> Mapping[str, str]:
        # openai-harmony reads its o200k vocabulary from here instead of downloading it (the worker writes it).
        return {**super().env(), "TIKTOKEN_ENCODINGS_BASE": str(self.env_dir / "tiktoken")}

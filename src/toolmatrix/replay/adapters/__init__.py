"""Replay adapters, one file per engine; a new engine is one adapter here plus its spec's family_args."""

from __future__ import annotations

from toolmatrix.serving.registry import EngineSpec

from .base import Adapter, Support
from .dynamo import DynamoAdapter
from .llamacpp import LlamaCppAdapter
from .lmdeploy import LMDeployAdapter
from .mlxlm import MLXLMAdapter
from .sglang import SGLangAdapter
from .transformers import TransformersAdapter
from .vllm import VLLMAdapter

ADAPTERS: dict[str, type[Adapter]] = {"sglang": SGLangAdapter, "vllm": VLLMAdapter, "transformers": TransformersAdapter,
                                      "lmdeploy": LMDeployAdapter, "llamacpp": LlamaCppAdapter,
                                      "mlxlm": MLXLMAdapter, "dynamo": DynamoAdapter}


def adapter_for(spec: EngineSpec, at: str | None = None) -> Adapter:
    """The engine's adapter; ``at``: a version of its parser package laid over its pinned env (ENGINE@VERSION)."""
    return ADAPTERS[spec.id](spec, at=at)


__all__ = ["ADAPTERS", "Adapter", "Support", "adapter_for"]

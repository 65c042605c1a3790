"""Replay adapters, built from the engine specs: an engine replays when its spec's ``replay`` section states its
ids-to-text rule (``detok``), with a worker file ``ENGINE_worker.py`` here; an engine whose replay needs behaviour
beyond that data has a subclass in its own file."""

from __future__ import annotations

from toolmatrix.serving.registry import EngineSpec, registry

from .base import Adapter, Support
from .dynamo import DynamoAdapter
from .llamacpp import LlamaCppAdapter
from .lmdeploy import LMDeployAdapter
from .transformers import TransformersAdapter
from .vllm import VLLMAdapter

BEHAVIOUR: dict[str, type[Adapter]] = {"dynamo": DynamoAdapter, "llamacpp": LlamaCppAdapter,
                                       "lmdeploy": LMDeployAdapter, "transformers": TransformersAdapter,
                                       "vllm": VLLMAdapter}



def replay_engines() -> list[str]:
    """The engines with an adapter, in the registry's order, read on first use (importing this package reads no
    spec file)."""
    return [engine for engine, spec in registry().engines.items() if spec.replay is not None]


def adapter_for(spec: EngineSpec, at: str | None = None) -> Adapter:
    """The engine's adapter; ``at``: a version of its parser package laid over its pinned env (ENGINE@VERSION)."""
    if spec.replay is None:
        raise KeyError(spec.id)
    return BEHAVIOUR.get(spec.id, Adapter)(spec, at=at)


__all__ = ["Adapter", "Support", "adapter_for", "replay_engines"]

"""NVIDIA Dynamo: its Rust tool-call and reasoning parsers, run in its own OpenAI frontend in-process (the worker
registers a stand-in model with the parsers engines/dynamo.yaml's live flags name), at the version the image pins."""

from __future__ import annotations

from typing import Mapping

import attrs

from .. import feeder
from .base import Adapter


@attrs.define
class DynamoAdapter(Adapter):
    """The spec's adapter, with the tokenizers and vocabulary its in-process frontend reads offline."""

    def env(self) -> Mapping[str, str]:
        # Families with no offline tokenizer are encoded with Qwen3's (the worker's fallback: the stand-in model needs
        # a vocabulary), and their records are marked (names.own_vocabulary: a splitter label); Dynamo's Harmony
        # parsers load the o200k vocabulary from TIKTOKEN_ENCODINGS_BASE (offline, else they strip every Harmony
        # answer to nothing), which the worker writes there from gpt-oss's tokenizer; Dynamo's own logs stay at
        # warnings (stderr).
        return {**super().env(), "TOOLMATRIX_DYNAMO_TOKENIZER": str(feeder.tokenizer_dir("qwen3") / "tokenizer.json"),
                "TOOLMATRIX_DYNAMO_HARMONY_TOKENIZER": str(feeder.tokenizer_dir("gptoss") / "tokenizer.json"),
                "TIKTOKEN_ENCODINGS_BASE": str(self.env_dir / "tiktoken"), "DYN_LOG": "warn"}

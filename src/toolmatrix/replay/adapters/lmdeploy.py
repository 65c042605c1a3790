"""LMDeploy: its tool and reasoning parsers (lmdeploy/serve/openai/) at the version engines/lmdeploy.yaml's image
pins, in a torch-free env of their own."""

from __future__ import annotations

from typing import Mapping

import attrs

from .base import Adapter


@attrs.define
class LMDeployAdapter(Adapter):
    """The spec's adapter, with openai-harmony's vocabulary folder in the worker's environment."""

    def env(self) -> Mapping[str, str]:
        # openai-harmony reads its o200k vocabulary from here instead of downloading it (the worker writes it).
        return {**super().env(), "TIKTOKEN_ENCODINGS_BASE": str(self.env_dir / "tiktoken")}

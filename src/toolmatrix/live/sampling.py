"""Repeated samples (``--samples K``): which askings a case x mode gets, and what each adds to its request.

One asking (K = 1) is the suite as it always was: greedy (the library's ``temperature: 0``), no sample index on
ids or records. K askings at temperature 0 would be one answer K times on a deterministic engine, so with K > 1 a
case that leaves the library's greedy default samples at ``SAMPLED_TEMPERATURE`` (the model's own distribution,
unscaled: needs no per-model knowledge), a case with its own non-zero temperature keeps it, and ``--temperature``
sets every case. Each sample carries a ``seed`` of its own, drawn from the case id and the sample index: both modes
of one sample ask the same generation (its stream is compared with its own non-streamed answer), a rerun asks the
same draws, and no two cases share a seed (with the index alone, sample 4 of every case drew the same random
numbers: on qwen2.5-coder-0.5b@llamacpp it failed all 16 case x mode of a run, the other samples 2 to 8).
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

import attrs

SAMPLED_TEMPERATURE = 1.0


@attrs.frozen
class Sampling:
    """``--samples`` and ``--temperature`` of a run."""

    samples: int = 1
    temperature: float | None = None  # --temperature: every case's, whatever it says

    @property
    def indexes(self) -> tuple[int | None, ...]:
        """The sample index of each asking: ``(None,)`` for one (ids and records as without samples), else 1..K."""
        return (None,) if self.samples == 1 else tuple(range(1, self.samples + 1))

    def fields(self, case_id: str, case_options: Mapping[str, Any], sample: int | None) -> dict[str, Any]:
        """What one asking sets over the case's request (see the module's docstring)."""
        fields: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        if sample is None:
            return fields
        return {"temperature": case_options.get("temperature") or SAMPLED_TEMPERATURE, **fields,
                "seed": sample_seed(case_id, sample)}


def sample_seed(case_id: str, sample: int) -> int:
    """The seed of one sample of one case: stable across runs and machines, below 2^31 (every engine's seed type)."""
    return int.from_bytes(hashlib.sha256(f"{case_id}#{sample}".encode()).digest()[:4], "big") >> 1


def sample_suffix(sample: int | None) -> str:
    """The part of a test id that names the sample (``-s2``); nothing for the one asking."""
    return "" if sample is None else f"-s{sample}"

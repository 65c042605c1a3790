"""Statistics of repeated samples (``--samples K``): pass@1 with its Wilson interval, pass^k, disagreement.

Samples of one case x mode are not independent draws of a pair's pass rate: a case the model cannot do fails all K
times. So an interval counts case x mode, not samples (K askings sharpen each case's own rate, never the number of
cases), and pass@1 is the mean over case x mode of each one's share of passing samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Hashable, TypeVar

from toolmatrix.records import Outcome, Verdict

K = TypeVar("K", bound=Hashable)  # what the samples are grouped by (a case x mode)

Z95 = 1.959964  # the standard normal's 97.5th percentile: a two-sided 95 % interval


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (E. B. Wilson, JASA 22, 1927; recommended over
    the normal interval by Brown, Cai & DasGupta, Statistical Science 16, 2001):

        centre = (p + z^2 / 2n) / (1 + z^2 / n),  half = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    with ``p = successes / n``. ``successes`` may be fractional (a mean of per-case shares times n)."""
    if n <= 0:
        raise ValueError("wilson: n must be above 0")
    p = successes / n
    shrink = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean_interval(shares: list[float]) -> dict[str, Any]:
    if not shares:
        return {"mean": None, "interval": None, "n": 0}
    mean = sum(shares) / len(shares)
    low, high = wilson(mean * len(shares), len(shares))
    return {"mean": round(mean, 4), "interval": [round(low, 4), round(high, 4)], "n": len(shares)}


def sample_stats(groups: Mapping[K, list[Outcome]]) -> dict[str, Any]:
    """What the samples of each case x mode (``groups``) come to: ``pass_at_1`` (mean, 95 % Wilson interval, n case x
    mode), ``pass_hat_k`` (the share whose samples all passed) and ``all_passed``, ``disagreeing`` (case x mode
    with a passing and a not passing sample), ``conformance`` (mean of each case x mode's share of conformant judged
    samples, with its interval), and ``samples`` (the fewest and most per case x mode)."""
    passes = [[o.verdict is Verdict.PASS for o in outcomes] for outcomes in groups.values() if outcomes]
    judged = [[o.conformant for o in outcomes if o.conformant is not None] for outcomes in groups.values()]
    all_passed = sum(all(p) for p in passes)
    sizes = [len(p) for p in passes]
    return {
        "samples": [min(sizes), max(sizes)] if sizes else None,
        "pass_at_1": _mean_interval([sum(p) / len(p) for p in passes]),
        "pass_hat_k": round(all_passed / len(passes), 4) if passes else None,
        "all_passed": all_passed,
        "disagreeing": sum(any(p) and not all(p) for p in passes),
        "conformance": _mean_interval([sum(j) / len(j) for j in judged if j]),
    }

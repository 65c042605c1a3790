"""How the matrix prints a share and what colour it gives it: one rounding and one set of thresholds for matrix.md,
``matrix build``'s lines and the page (whose script reads ``LEVELS`` from its data and draws its legends from them).

The colour is the printed figure's: 205 of 414 (49.5 %) prints "50%" and is amber, as the legend says of >= 50 %,
never a red "50%". What could not be judged at all (every record unsupported) is grey and reads "unsupported",
never a red 0 %.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

# (level, the least whole percent printed that has it), best first; the page's CSS has a ``lv-LEVEL`` per level.
LEVELS: tuple[tuple[str, int], ...] = (("good", 95), ("ok", 80), ("warn", 50), ("bad", 0))
NONE = "none"  # no figure: nothing to judge, or every record unsupported (grey)
UNSUPPORTED = "unsupported"


@attrs.frozen
class Figure:
    """A share as printed (``text``) and the colour of that printed figure (``level``)."""

    text: str
    level: str


def whole_percent(rate: float) -> int:
    """``rate`` (0..1) as the whole percent printed: JavaScript's ``Math.round(rate * 100)``, a half rounding up
    (Python's ``f"{x:.0f}"`` rounds a half to even: 12.5 would print 12 here and 13 on the page)."""
    scaled = rate * 100
    whole = math.floor(scaled)
    return whole + (scaled - whole >= 0.5)


def figure(rate: float | None, *, unsupported: bool = False) -> Figure:
    """The printed share and its colour, both from the one rounded figure; ``unsupported``: nothing of it could be
    judged (grey "unsupported", whatever ``rate`` says); no rate: "-", grey."""
    if unsupported:
        return Figure(UNSUPPORTED, NONE)
    if rate is None:
        return Figure("-", NONE)
    shown = whole_percent(rate)
    return Figure(f"{shown}%", next(name for name, least in LEVELS if shown >= least))


def percent(rate: float | None) -> str:
    """``rate`` as printed: ``50%`` (``-`` for none)."""
    return figure(rate).text


def all_unsupported(counts: Mapping[str, int]) -> bool:
    """Verdict counts of which every one is ``unsupported``: nothing was judged, so no pass rate (not a 0 %)."""
    total = sum(counts.values())
    return bool(total) and counts.get(UNSUPPORTED, 0) == total

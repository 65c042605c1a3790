"""``toolmatrix replay-bisect``'s search (toolmatrix.replay.bisect.bisect): the first release whose verdict differs
from the oldest one's, found in about log2 of the range, around releases that cannot replay."""

from __future__ import annotations

import pytest

from toolmatrix.replay.bisect import BisectError, Probe, bisect, describe

VERSIONS = [f"0.5.{n}" for n in range(1, 17)]  # 16 releases


def _probe(first_fixed: int, cannot: frozenset[int] = frozenset(), asked: list[str] | None = None):
    def probe(version: str) -> Probe:
        n = int(version.rsplit(".", 1)[1])
        if asked is not None:
            asked.append(version)
        if n in cannot:
            return Probe(version, None, "ERROR: No matching distribution found")
        return Probe(version, "pass" if n >= first_fixed else "fail", "" if n >= first_fixed else "whole: bad")
    return probe


@pytest.mark.parametrize("first_fixed", [2, 7, 16])
def test_finds_the_first_release_that_changes_in_log2_replays(first_fixed: int) -> None:
    asked: list[str] = []
    found = bisect(VERSIONS, _probe(first_fixed, asked=asked))
    assert (found.before.version, found.after.version) == (f"0.5.{first_fixed - 1}", f"0.5.{first_fixed}")
    assert (found.before.verdict, found.after.verdict) == ("fail", "pass") and found.adjacent
    assert len(asked) == len(set(asked)) <= 2 + 4  # both ends, then log2(14 between) rounded up


def test_a_release_that_cannot_replay_is_skipped_and_named_where_it_hides_the_boundary() -> None:
    found = bisect(VERSIONS, _probe(9, cannot=frozenset({8, 9})))
    assert (found.before.version, found.after.version) == ("0.5.7", "0.5.10")
    assert found.skipped == ("0.5.8", "0.5.9") and not found.adjacent
    assert "could not replay between them: 0.5.8, 0.5.9" in describe("f.1", found)


def test_a_range_that_cannot_be_bisected_says_why() -> None:
    with pytest.raises(BisectError, match="the same verdict at both ends: pass at 0.5.1 and at 0.5.16"):
        bisect(VERSIONS, _probe(1))
    with pytest.raises(BisectError, match="0.5.1 cannot replay here: ERROR: No matching"):
        bisect(VERSIONS, _probe(5, cannot=frozenset({1})))
    with pytest.raises(BisectError, match="two releases at least"):
        bisect(VERSIONS[:1], _probe(1))

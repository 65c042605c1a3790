"""The first release where a fixture's verdict changes (``toolmatrix replay-bisect``): a binary search over an
ordered release list that installs only the releases it replays (about log2 of the range). A release that will not
install or start here is skipped, as ``git bisect skip`` does, and the search goes on around it. ``span`` says when a
triage cluster's repro starts failing and when it passes again (``--cluster``)."""

from __future__ import annotations

from functools import cache
from typing import Callable, Iterable

import attrs

from .bugs import MODES, fixture_verdict
from .fixtures import Fixture
from .protocol import WorkerClient, WorkerError
from .sweep import adapter_at, install_at


class BisectError(Exception):
    """The range cannot be bisected: too short, an end that cannot replay, or the same verdict at both ends."""


@attrs.frozen
class Probe:
    """A fixture replayed at one release: ``verdict`` pass | fail | unsupported, or None where the release cannot
    replay here; ``why`` the first failure or the reason it cannot replay."""

    version: str
    verdict: str | None
    why: str = ""


@attrs.frozen
class Bisection:
    before: Probe  # the last release with the oldest release's verdict
    after: Probe  # the next release that could replay: the first with another verdict
    probes: tuple[Probe, ...]  # every release replayed, in the order asked
    skipped: tuple[str, ...] = ()  # releases between ``before`` and ``after`` that could not replay

    @property
    def adjacent(self) -> bool:
        """True where nothing untested lies between the two: ``after`` is the first changed release."""
        return not self.skipped


def bisect(versions: list[str], probe: Callable[[str], Probe]) -> Bisection:
    """Binary search of ``versions`` (oldest first) for the first release whose verdict differs from the oldest
    one's; ``probe`` replays one release and is asked at most once per release."""
    if len(versions) < 2:
        raise BisectError(f"needs two releases at least, got {versions}")
    asked: dict[int, Probe] = {}

    def at(index: int) -> Probe:
        if index not in asked:
            asked[index] = probe(versions[index])
        return asked[index]

    low, high = 0, len(versions) - 1
    for end in (low, high):
        if at(end).verdict is None:
            raise BisectError(f"{versions[end]} cannot replay here: {at(end).why}")
    if at(low).verdict == at(high).verdict:
        raise BisectError(f"the same verdict at both ends: {at(low).verdict} at {versions[low]} and at "
                          f"{versions[high]}")
    while True:
        untried = [i for i in range(low + 1, high) if i not in asked]
        if not untried:
            break
        middle = min(untried, key=lambda i: abs(i - (low + high) / 2))
        if at(middle).verdict is None:
            continue
        if at(middle).verdict == at(low).verdict:
            low = middle
        else:
            high = middle
    skipped = tuple(versions[i] for i in range(low + 1, high))
    return Bisection(at(low), at(high), tuple(asked.values()), skipped)


@attrs.frozen
class Span:
    """When a failure appears and when it is fixed, as triage.schema.json's ``first_broken``/``first_fixed`` say
    it: a release, ``<=V`` where V fails or passes and what lies before it was not replayed, ``open at V`` where
    the newest release tried still fails."""

    first_broken: str
    first_fixed: str
    found: Bisection | None  # the search; None where both ends fail (nothing between them was replayed)


def span(versions: list[str], probe: Callable[[str], Probe]) -> Span:
    """The releases (oldest first) where the repro starts failing and where it passes again: both ends replayed,
    then a bisection of the one change between them. A repro that fails at neither end is a BisectError (broken
    and fixed inside the range, or not reproduced: a search of one change cannot tell)."""
    if len(versions) < 2:
        raise BisectError(f"needs two releases at least, got {versions}")
    probe = cache(probe)  # bisect asks the ends again
    oldest, newest = probe(versions[0]), probe(versions[-1])
    for end in (oldest, newest):
        if end.verdict is None:
            raise BisectError(f"{end.version} cannot replay here: {end.why}")
    if "fail" not in (oldest.verdict, newest.verdict):
        raise BisectError(f"the repro fails at neither end: {oldest.verdict} at {oldest.version}, {newest.verdict} "
                          f"at {newest.version}")
    open_at = f"open at {newest.version}"
    if oldest.verdict == newest.verdict:
        return Span(f"<={oldest.version}", open_at, None)
    found = bisect(versions, probe)
    change = found.after.version if found.adjacent else f"<={found.after.version}"
    return Span(change, open_at, found) if newest.verdict == "fail" else Span(f"<={oldest.version}", change, found)


def replay_at(engine: str, pinned: str | None, fixture: Fixture,
              modes: Iterable[str] = MODES) -> Callable[[str], Probe]:
    """A ``probe`` for ``bisect``: the fixture's verdict at a release, its overlay installed first if not cached."""
    modes = tuple(modes)

    def probe(version: str) -> Probe:
        adapter = adapter_at(engine, version, pinned)
        reason = install_at(adapter)
        if reason:
            return Probe(version, None, reason)
        try:
            with WorkerClient(adapter.python, adapter.worker, dict(adapter.env())) as client:
                return Probe(version, *fixture_verdict(adapter, client, fixture, modes))
        except WorkerError as exc:
            return Probe(version, None, f"{adapter.name} does not start here: {exc}")

    return probe


def describe(fixture_id: str, found: Bisection) -> str:
    """What a person reads: the two releases, their verdicts, and how many releases it took."""
    before, after = found.before, found.after
    lines = [f"{fixture_id}: {before.verdict} at {before.version}, {after.verdict} at {after.version}"
             + ("" if found.adjacent else f" (could not replay between them: {', '.join(found.skipped)})")]
    lines += [f"  {p.version}: {p.verdict or 'cannot replay'}"
              + (f": {p.why.strip().splitlines()[-1][:160]}" if p.why.strip() else "") for p in found.probes]
    lines.append(f"  {len(found.probes)} releases replayed")
    return "\n".join(lines)

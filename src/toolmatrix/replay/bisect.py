"""The first release where a fixture's verdict changes (``toolmatrix replay-bisect``): a binary search over an
ordered release list that installs only the releases it replays (about log2 of the range). Only ``pass`` and
``fail`` are verdicts: a release that gives none here (it will not install or start, or the harness cannot drive
it for the fixture: ``unsupported``, e.g. an older API, a tokenizer not fetched) is stepped over, as ``git bisect
skip`` does: at an end of the range the search moves inward to the nearest release that gives a verdict, inside it
goes on around it. Several fixtures are searched in one run (``bisect_each``), each release installed and started
once for all of them. ``span`` says when a triage cluster's repro starts failing and when it passes again
(``--cluster``)."""

from __future__ import annotations

from functools import cache
from typing import Callable, Iterable, Mapping, Sequence

import attrs

from toolmatrix.base.errors import ToolmatrixError

from .bugs import fixture_verdict
from .feeder import TOKENIZERS, tokenizer_path
from .fixtures import Fixture
from .protocol import WorkerClient, WorkerError
from .sweep import adapter_at, install_at

VERDICTS = ("pass", "fail")  # what the search compares; anything else is a release that gave no verdict


class BisectError(ToolmatrixError):
    """The range cannot be bisected: too short, or the same verdict at both ends."""


class CannotReplay(BisectError):
    """Fewer than two releases of the range give the fixture a verdict here: ``probes`` holds each release tried,
    with why it gave none and the command that would let it replay, where one would."""

    def __init__(self, versions: Sequence[str], probes: Iterable[Probe]) -> None:
        self.probes = tuple(sorted(probes, key=lambda p: versions.index(p.version)))
        judged = [p for p in self.probes if p.judged]
        head = (f"only {judged[0].version} gives it a verdict here ({judged[0].verdict}), a search needs two"
                if judged else "no release gives it a verdict here" if len(self.probes) == len(versions)
                else "no two releases give it a verdict here")
        lines = [f"{head}; {len(self.probes)} of the {len(versions)} releases replayed:"]
        reasons: dict[tuple[str | None, str], list[str]] = {}
        for p in self.probes:
            if not p.judged:
                reasons.setdefault((p.verdict, last_line(p.why)), []).append(p.version)
        lines += [f"  {', '.join(found)}: {verdict or 'cannot replay'}: {why}" for (verdict, why), found in
                  reasons.items()]
        fixes = list(dict.fromkeys(p.fix for p in self.probes if p.fix))
        lines += [f"  to replay it: {fix}" for fix in fixes]
        super().__init__("\n".join(lines))


@attrs.frozen
class Probe:
    """A fixture replayed at one release: ``verdict`` pass | fail | unsupported, or None where the release cannot
    replay here; ``why`` the first failure or the reason it gave no verdict; ``fix`` the command that would let it
    replay here (``toolmatrix replay-install tokenizers``), "" where none would."""

    version: str
    verdict: str | None
    why: str = ""
    fix: str = ""

    @property
    def judged(self) -> bool:
        """True where the release gave a verdict (pass or fail): only those are compared."""
        return self.verdict in VERDICTS


def last_line(text: str) -> str:
    """The last line of a reason (pip's error and a worker's traceback end with what went wrong)."""
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


@attrs.frozen
class Bisection:
    before: Probe  # the last release with the oldest verdict
    after: Probe  # the next release that gave a verdict: the first with another one
    probes: tuple[Probe, ...]  # every release replayed, in the order asked
    skipped: tuple[str, ...] = ()  # releases between ``before`` and ``after`` that gave no verdict
    stepped: tuple[Probe, ...] = ()  # releases at the ends of the range that gave no verdict, stepped over

    @property
    def adjacent(self) -> bool:
        """True where nothing untested lies between the two: ``after`` is the first changed release."""
        return not self.skipped


def _ends(versions: Sequence[str], at: Callable[[int], Probe], asked: Mapping[int, Probe]) -> tuple[int, int]:
    """The oldest and newest releases that give a verdict, each end stepping inward over releases that give none;
    CannotReplay where fewer than two do. Where the harness cannot drive both ends for the same reason, that reason
    is none of a release's own (a tokenizer not fetched here): the search stops there rather than install every
    release to hear it again."""
    low, high = 0, len(versions) - 1
    while low < high:
        oldest, newest = at(low), at(high)
        if oldest.judged and newest.judged:
            return low, high
        if oldest.verdict == newest.verdict == "unsupported" and oldest.why == newest.why:
            break
        low += not oldest.judged
        high -= not newest.judged
    raise CannotReplay(versions, asked.values())


def _stepped(asked: Mapping[int, Probe], low: int, high: int) -> str:
    """The releases outside [low, high] that gave no verdict, for a message: `` (stepped over 0.31.3: ...)``."""
    outside = [p for i, p in sorted(asked.items()) if not low <= i <= high]
    return "".join(f" (stepped over {p.version}: {p.verdict or 'cannot replay'}: {last_line(p.why)})"
                   for p in outside)


def bisect(versions: list[str], probe: Callable[[str], Probe]) -> Bisection:
    """Binary search of ``versions`` (oldest first) for the first release whose verdict differs from that of the
    oldest release that gives one; ``probe`` replays one release and is asked at most once per release."""
    if len(versions) < 2:
        raise BisectError(f"needs two releases at least, got {versions}")
    asked: dict[int, Probe] = {}

    def at(index: int) -> Probe:
        if index not in asked:
            asked[index] = probe(versions[index])
        return asked[index]

    low, high = first, last = _ends(versions, at, asked)
    if at(low).verdict == at(high).verdict:
        raise BisectError(f"the same verdict at both ends: {at(low).verdict} at {versions[low]} and at "
                          f"{versions[high]}{_stepped(asked, low, high)}")
    while True:
        untried = [i for i in range(low + 1, high) if i not in asked]
        if not untried:
            break
        middle = min(untried, key=lambda i: abs(i - (low + high) / 2))
        if not at(middle).judged:
            continue
        if at(middle).verdict == at(low).verdict:
            low = middle
        else:
            high = middle
    skipped = tuple(versions[i] for i in range(low + 1, high))
    stepped = tuple(p for i, p in sorted(asked.items()) if not first <= i <= last)
    return Bisection(at(low), at(high), tuple(asked.values()), skipped, stepped)


def bisect_each(versions: list[str], fixture_ids: Iterable[str], probe: Callable[[str], Mapping[str, Probe]]
                ) -> tuple[dict[str, Bisection | BisectError], list[str]]:
    """``bisect`` of each fixture over ``versions``, ``probe`` replaying every fixture at a release at once and
    asked at most once per release: each fixture's search or why it could not be done, and the releases replayed
    (in the order asked)."""
    replayed: dict[str, Mapping[str, Probe]] = {}

    def at(version: str) -> Mapping[str, Probe]:
        if version not in replayed:
            replayed[version] = probe(version)
        return replayed[version]

    found: dict[str, Bisection | BisectError] = {}
    for fixture_id in fixture_ids:
        def verdict(version: str, fixture_id: str = fixture_id) -> Probe:
            return at(version)[fixture_id]

        try:
            found[fixture_id] = bisect(versions, verdict)
        except BisectError as exc:
            found[fixture_id] = exc
    return found, list(replayed)


@attrs.frozen
class Span:
    """When a failure appears and when it is fixed, as triage.schema.json's ``first_broken``/``first_fixed`` say
    it: a release, ``<=V`` where V fails or passes and what lies before it was not replayed, ``open at V`` where
    the newest release tried still fails."""

    first_broken: str
    first_fixed: str
    found: Bisection | None  # the search; None where both ends fail (nothing between them was replayed)


def span(versions: list[str], probe: Callable[[str], Probe]) -> Span:
    """The releases (oldest first) where the repro starts failing and where it passes again: the ends that give a
    verdict, then a bisection of the one change between them. A repro that fails at neither end is a BisectError
    (broken and fixed inside the range, or not reproduced: a search of one change cannot tell). Where the release
    just before the oldest end is one the harness cannot drive for the repro (``unsupported``: its parser is not
    there yet), a failure at the oldest end first appears there, not earlier."""
    if len(versions) < 2:
        raise BisectError(f"needs two releases at least, got {versions}")
    probe = cache(probe)  # bisect asks the ends again
    asked: dict[int, Probe] = {}

    def at(index: int) -> Probe:
        asked[index] = probe(versions[index])
        return asked[index]

    low, high = _ends(versions, at, asked)
    oldest, newest = at(low), at(high)
    if "fail" not in (oldest.verdict, newest.verdict):
        raise BisectError(f"the repro fails at neither end: {oldest.verdict} at {oldest.version}, {newest.verdict} "
                          f"at {newest.version}{_stepped(asked, low, high)}")
    open_at = f"open at {newest.version}"
    if oldest.verdict == newest.verdict:
        appeared = low > 0 and at(low - 1).verdict == "unsupported"
        return Span(oldest.version if appeared else f"<={oldest.version}", open_at, None)
    found = bisect(versions, probe)
    change = found.after.version if found.adjacent else f"<={found.after.version}"
    return Span(change, open_at, found) if newest.verdict == "fail" else Span(f"<={oldest.version}", change, found)


def setup_fix(fixture: Fixture) -> str:
    """The command that lets a release the harness could not drive for ``fixture`` replay it, where this machine
    lacks something it can fetch: the family's offline tokenizer (``toolmatrix replay-install tokenizers``); ""
    where nothing is missing."""
    if TOKENIZERS.get(fixture.family) and tokenizer_path(fixture.family, fixture.model) is None:
        return "toolmatrix replay-install tokenizers"
    return ""


def replay_at(engine: str, pinned: str | None,
              targets: Iterable[tuple[Fixture, Iterable[str]]]) -> Callable[[str], dict[str, Probe]]:
    """A ``probe`` for ``bisect_each``: each target fixture's verdict at a release in its modes, by fixture id, its
    overlay installed first if not cached and one worker started for them all (none where the engine parses none
    of their families)."""
    targets = [(fixture, tuple(modes)) for fixture, modes in targets]

    def probe(version: str) -> dict[str, Probe]:
        adapter = adapter_at(engine, version, pinned)
        probes: dict[str, Probe] = {}
        todo = []
        for fixture, modes in targets:
            support = adapter.supports(fixture.family, None)  # the engine's spec: the same at every release
            if support:
                todo.append((fixture, modes))
            else:
                probes[fixture.id] = Probe(version, "unsupported", support.reason)
        reason = install_at(adapter) if todo else ""
        if reason:
            return {**probes, **{fixture.id: Probe(version, None, reason) for fixture, _ in todo}}
        try:
            if todo:
                with WorkerClient(adapter.python, adapter.worker, dict(adapter.env())) as client:
                    for fixture, modes in todo:
                        verdict, why = fixture_verdict(adapter, client, fixture, modes)
                        fix = setup_fix(fixture) if verdict == "unsupported" else ""
                        probes[fixture.id] = Probe(version, verdict, why, fix)
        except WorkerError as exc:
            down = Probe(version, None, f"{adapter.name} does not start here: {exc}")
            probes.update({fixture.id: down for fixture, _ in todo if fixture.id not in probes})
        return probes

    return probe


def describe(fixture_id: str, found: Bisection) -> str:
    """What a person reads: the two releases, their verdicts, and how many releases it took."""
    before, after = found.before, found.after
    lines = [f"{fixture_id}: {before.verdict} at {before.version}, {after.verdict} at {after.version}"
             + ("" if found.adjacent else f" (could not replay between them: {', '.join(found.skipped)})")
             + (f" (no verdict at {', '.join(p.version for p in found.stepped)}: stepped over)" if found.stepped
                else "")]
    for p in found.probes:
        why = f": {last_line(p.why)[:160]}" if p.why.strip() else ""
        lines.append(f"  {p.version}: {p.verdict or 'cannot replay'}{why}" + (f" ({p.fix})" if p.fix else ""))
    lines.append(f"  {len(found.probes)} releases replayed")
    return "\n".join(lines)

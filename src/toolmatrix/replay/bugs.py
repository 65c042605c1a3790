"""Publicly reported parser bugs as replay fixtures, replayed where they were reported broken, where they were
fixed and at the pinned version (``toolmatrix replay-bugs``).

A bug fixture is an ordinary fixture (the model text from the report, its tools, the correct answer) with a
``bug`` object: ``{repo, issue, engine, broken, fixed, chunkings?}``. ``broken`` and ``fixed`` are versions of the
engine's parser package (``fixed`` null while the report is open); ``chunkings`` names the replay modes that show
the bug (``none`` is the non-streamed parse), all of them by default. A version other than the pinned one replays
as ``ENGINE@VERSION`` (adapters/base.py: that package laid over the pinned env). The verdicts are the replay
tier's own (``session.replay_one``, the judge): a bug *reproduces* where any record of its modes fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import attrs
from packaging.version import InvalidVersion, Version

from toolmatrix.records import Verdict

from . import feeder
from .adapters import Adapter, replay_engines
from .fixtures import Fixture, FixtureError, load_fixtures
from .protocol import WorkerClient, WorkerError
from .session import Unsupported, adapters, replay_one

NONSTREAM = "none"  # ReplayInfo.chunking of the non-streamed parse
MODES = (NONSTREAM, *feeder.CHUNKINGS)


def default_file() -> Path:
    """The committed bug fixtures (package data)."""
    return Path(__file__).resolve().parents[1] / "data" / "bugs.jsonl"


@attrs.frozen
class Bug:
    repo: str
    issue: int
    engine: str
    broken: str
    fixed: str | None
    chunkings: tuple[str, ...] = MODES

    @property
    def label(self) -> str:
        return f"{self.repo}#{self.issue}"

    def expected(self, version: str) -> str:
        """``fail`` where the bug is present (before ``fixed``, or anywhere while open), else ``pass``."""
        return "pass" if self.fixed is not None and Version(version) >= Version(self.fixed) else "fail"


def _bug_problems(data: object) -> Iterator[tuple[str, str]]:
    """(field, message) for each problem of a fixture's ``bug`` beyond its JSON schema (fixture.schema.json)."""
    if not isinstance(data, dict):
        yield "bug", "required in a bug fixture file: {repo, issue, engine, broken, fixed}"
        return
    if data["engine"] not in replay_engines():
        yield "bug.engine", f"{data['engine']!r} has no replay adapter; known: {', '.join(replay_engines())}"
    versions = {}
    for field in ("broken", "fixed"):
        if data.get(field) is None:
            continue
        try:
            versions[field] = Version(data[field])
        except InvalidVersion:
            yield f"bug.{field}", f"{data[field]!r} is not a version"
    if len(versions) == 2 and versions["fixed"] <= versions["broken"]:
        yield "bug.fixed", f"{data['fixed']} is not after broken {data['broken']}"


def load_bugs(path: Path | str) -> list[tuple[Fixture, Bug]]:
    """The bug fixtures of a file; ``FixtureError`` naming ``file:line: $.bug.FIELD`` for each bad one."""
    fixtures = load_fixtures(path)  # the schema's problems, every line at once
    lines = [n for n, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1) if line.strip()]
    problems, bugs = [], []
    for number, fixture in zip(lines, fixtures):
        data = fixture.extra.get("bug")
        found = [f"{path}:{number}: $.{field}: {message}" for field, message in _bug_problems(data)]
        problems += found
        if not found and isinstance(data, dict):  # a fixture without a bug is a problem found above
            fields = {k: v for k, v in data.items() if k != "chunkings"}
            bugs.append((fixture, Bug(**fields, chunkings=tuple(data.get("chunkings", MODES)))))
    if problems:
        raise FixtureError(problems)
    return bugs


@attrs.frozen
class Row:
    """One bug replayed at one version."""

    bug: Bug
    fixture: str
    version: str
    role: str  # broken | fixed | pinned, joined where one version plays several
    expected: str
    got: str  # pass | fail | a reason it could not replay
    why: str = ""

    @property
    def ok(self) -> bool:
        return self.got == self.expected


def fixture_verdict(adapter: Adapter, client: WorkerClient, fixture: Fixture,
                    modes: Iterable[str] = MODES) -> tuple[str, str]:
    """One fixture's verdict on ``client``'s engine over ``modes`` (``none`` and chunkings): ``fail`` with the first
    failing mode's reason where any record of them fails, ``pass``, or ``unsupported`` with why."""
    modes = tuple(modes)
    support = adapter.supports(fixture.family, None)
    if not support:
        return "unsupported", support.reason
    chunkings = [c for c in modes if c != NONSTREAM]
    try:
        records = replay_one(client, adapter, fixture, chunkings, f"bugs-{adapter.name}")
    except Unsupported as exc:
        return "unsupported", str(exc)
    failed = [(r.replay.chunking, r.reason) for r in records
              if r.replay is not None and r.replay.chunking in modes and r.verdict is not Verdict.PASS]
    return ("fail", f"{failed[0][0]}: {failed[0][1]}") if failed else ("pass", "")


def _replay_at(adapter: Adapter, version: str, cases: list[tuple[Fixture, Bug, str, str]]) -> Iterator[Row]:
    """``cases``: (fixture, bug, role, expected) replayed by one worker of ``adapter`` (at ``version``)."""
    why = adapter.ready()
    if why is not None:
        yield from (Row(bug, f.id, version, role, exp, "not installed", why) for f, bug, role, exp in cases)
        return
    try:
        with WorkerClient(adapter.python, adapter.worker, dict(adapter.env())) as client:
            for fixture, bug, role, expected in cases:
                got, detail = fixture_verdict(adapter, client, fixture, bug.chunkings)
                yield Row(bug, fixture.id, version, role, expected, got, detail)
    except WorkerError as exc:
        yield from (Row(bug, f.id, version, role, exp, "worker died", str(exc)[-300:]) for f, bug, role, exp in cases)


def replay_bugs(bugs: list[tuple[Fixture, Bug]]) -> list[Row]:
    """Each bug at ``broken``, ``fixed`` and the pinned version (one worker per engine version)."""
    plan: dict[tuple[str, str], list[tuple[Fixture, Bug, str, str]]] = {}
    pinned: dict[str, str] = {}
    for fixture, bug in bugs:
        if bug.engine not in pinned:  # "" where the pinned env is not installed: its rows say so
            pinned[bug.engine] = adapters([bug.engine])[0].version or ""
        roles: dict[str, list[str]] = {}
        for role, version in (("broken", bug.broken), ("fixed", bug.fixed), ("pinned", pinned[bug.engine])):
            if version is not None:
                roles.setdefault(version, []).append(role)
        for version, names in roles.items():
            expected = bug.expected(version) if version else "?"
            plan.setdefault((bug.engine, version), []).append((fixture, bug, "+".join(names), expected))
    rows: list[Row] = []
    for (engine, version), cases in plan.items():
        name = engine if version == pinned[engine] else f"{engine}@{version}"
        rows += _replay_at(adapters([name])[0], version or "pinned", cases)
    order = {fixture.id: n for n, (fixture, _) in enumerate(bugs)}
    return sorted(rows, key=lambda r: (order[r.fixture], Version(r.version) if r.version != "pinned" else Version("0")))


def versions_to_install(bugs: Iterable[tuple[Fixture, Bug]]) -> list[str]:
    """``ENGINE@VERSION`` for every non-pinned version the bugs replay at (``replay-install --bugs``)."""
    names: dict[str, None] = {}
    for _, bug in bugs:
        pinned = adapters([bug.engine])[0].version
        for version in (bug.broken, bug.fixed):
            if version is not None and version != pinned:
                names[f"{bug.engine}@{version}"] = None
    return list(names)


def table(rows: list[Row]) -> str:
    from tabulate import tabulate
    body = [(r.bug.label, r.fixture, r.bug.engine, r.version, r.role, r.expected, r.got,
             "" if r.ok else "<-- differs", r.why[:90]) for r in rows]
    return tabulate(body, headers=("report", "fixture", "engine", "version", "as", "expected", "got", "",
                                   "first failure"))


def as_json(rows: list[Row]) -> str:
    return "\n".join(json.dumps({"report": r.bug.label, "engine": r.bug.engine, "fixture": r.fixture,
                                 "version": r.version, "as": r.role, "expected": r.expected, "got": r.got,
                                 "why": r.why}, ensure_ascii=False) for r in rows)

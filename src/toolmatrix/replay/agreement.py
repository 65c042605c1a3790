"""Replay against reality: each harvested fixture's replay through engine E beside what E itself answered live.

A harvested fixture (``replay-harvest``) keeps the live answer of the engine that served it (``live``). The
replay of the same engine (``DIR/E/results.jsonl``, its non-streamed record of that fixture) should give the same
answer, call by call (``answers.differences``: names, parsed arguments, content, reasoning), which is stricter
than agreeing verdicts. Per engine: how many agree of how many, and each disagreement with what differs. A fixture
the replay did not record counts as a disagreement (with the run's reason where it skipped the family).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.records import RECORDS, RUN, ResultsError, read_run_info, scan_records

from .answers import answer_of, differences
from .fixtures import Fixture


class AgreementError(ToolmatrixError, ValueError):
    """Input that cannot be compared; the message names the file and the fixture."""


@attrs.frozen
class Disagreement:
    fixture: str
    what: tuple[str, ...]


@attrs.frozen
class EngineAgreement:
    engine: str
    live_versions: tuple[str, ...]
    replay_version: str | None  # None: not replayed
    total: int
    disagreements: tuple[Disagreement, ...]

    @property
    def agreed(self) -> int:
        return self.total - len(self.disagreements)

    def line(self) -> str:
        live = ", ".join(self.live_versions)
        if self.replay_version is None:
            return f"{self.engine} (live {live}): not replayed"
        same = "" if self.live_versions == (self.replay_version,) else " (versions differ)"
        return (f"{self.engine} {self.replay_version} (live {live}){same}: {self.agreed}/{self.total} agree "
                f"({100 * self.agreed / self.total:.1f} %)")


def harvested(fixtures: Iterable[Fixture], where: str) -> list[Fixture]:
    """The fixtures that carry a live answer; AgreementError when none does."""
    found = [f for f in fixtures if "live" in f.extra]
    if not found:
        raise AgreementError(f"{where}: no harvested fixture (none has 'live': toolmatrix replay-harvest makes them)")
    return found


def _replayed(directory: Path, fixtures: dict[str, Fixture]) -> tuple[str, dict[str, dict], dict[str, str]]:
    """The replay run's version, each fixture's replay answer (non-streamed), and the families it skipped."""
    try:
        info = read_run_info(directory)
        if not info.run.engine.replay:
            raise AgreementError(f"{directory / RUN}: not a parser-replay run (engine tier "
                                 f"{info.run.engine.tier!r}): give the --results-dir of toolmatrix replay")
        answers: dict[str, dict] = {}
        for line in scan_records(info):
            data = line.data
            if data["mode"] != "nonstream":
                continue
            if data["case_id"] not in fixtures:
                raise AgreementError(f"{directory / RECORDS}:{line.number}: fixture {data['case_id']!r} is not in the "
                                     "fixture file: a replay of other fixtures")
            record = line.record
            message = record.exchange().message()
            answers[record.case_id] = answer_of(message) if message is not None else {
                "error": f"HTTP {record.http_status}: {str(record.response)[:160]}"}
    except ResultsError as exc:
        raise AgreementError(str(exc)) from None
    return str(info.run.engine.version), answers, dict(info.run.engine.skipped_families)


def compare_engine(engine: str, fixtures: list[Fixture], results_dir: Path) -> EngineAgreement:
    """Agreement of one engine's replay (``results_dir/engine``) with its live answers in ``fixtures``."""
    mine = [f for f in fixtures if f.extra["live"]["engine"] == engine]
    versions = tuple(sorted({str(f.extra["live"]["version"]) for f in mine}))
    directory = results_dir / engine
    if not (directory / RUN).is_file():
        return EngineAgreement(engine, versions, None, len(mine), ())
    version, answers, skipped = _replayed(directory, {f.id: f for f in fixtures})
    found: list[Disagreement] = []
    for fixture in mine:
        replay = answers.get(fixture.id)
        if replay is None:
            why = skipped.get(fixture.family, "no record of it")
            found.append(Disagreement(fixture.id, (f"not replayed: {why}",)))
        elif "error" in replay:
            found.append(Disagreement(fixture.id, (f"replay failed: {replay['error']}",)))
        elif what := differences(fixture.extra["live"], replay):
            found.append(Disagreement(fixture.id, tuple(what)))
    return EngineAgreement(engine, versions, version, len(mine), tuple(found))


def agreement(fixtures: list[Fixture], results_dir: Path,
              engines: Iterable[str] | None = None) -> list[EngineAgreement]:
    """Per engine that served harvested fixtures live (or ``engines``), its replay's agreement."""
    served = sorted({f.extra["live"]["engine"] for f in fixtures})
    return [compare_engine(engine, fixtures, results_dir) for engine in (engines or served)]


def main(fixtures_path: str, results_dir: str, engines: list[str] | None) -> int:
    """``toolmatrix replay-agreement``: per engine n/N and %, then each disagreement; 2 on input it cannot read or
    an engine named with ``--engine`` that was not replayed."""
    from .fixtures import FixtureError, load_fixtures

    try:
        fixtures = harvested(load_fixtures(fixtures_path), fixtures_path)
        served = {f.extra["live"]["engine"] for f in fixtures}
        unknown = [e for e in engines or [] if e not in served]
        if unknown:
            raise AgreementError(f"{fixtures_path}: no harvested fixture served live by {unknown[0]!r} "
                                 f"(served: {', '.join(sorted(served))})")
        results = agreement(fixtures, Path(results_dir), engines)
    except (FixtureError, AgreementError) as exc:
        print(f"replay-agreement: {exc}", file=sys.stderr)
        return 2
    for result in results:
        print(result.line())
        if result.replay_version is None:
            print(f"  toolmatrix replay --fixtures {fixtures_path} --results-dir {results_dir} "
                  f"--engine {result.engine} --chunking whole")
        for one in result.disagreements:
            print(f"  {one.fixture}: {'; '.join(one.what)}")
    # An engine asked for by name must have been replayed (as `toolmatrix replay --engine` fails on a skip).
    missing = [r.engine for r in results if engines and r.replay_version is None]
    if missing:
        print(f"replay-agreement: {Path(results_dir) / missing[0] / RUN}: no replay of {missing[0]}", file=sys.stderr)
        return 2
    return 0

"""One engine's replay at each of several releases (``toolmatrix replay-sweep``): ``DIR/ENGINE@VERSION`` per release,
the run layout of ``toolmatrix replay``, each release laid over the pinned env in its own cached overlay
(``ENGINE@VERSION``). A release that will not install or start here is still a column: every family skipped with
the measured reason (pip's error, the worker's last words), never a crash of the sweep."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import attrs

from .adapters import Adapter
from .adapters.base import InstallError
from .fixtures import Fixture
from .protocol import WorkerError
from .session import adapters, record_cannot_replay, replay_engine


@attrs.frozen
class Swept:
    """One release of a sweep: where its run is, its verdict counts (or why it could not replay), and the seconds
    spent installing its overlay (0 where cached) and replaying."""

    engine: str
    version: str
    directory: Path
    counts: dict[str, int]
    install_s: float
    replay_s: float
    reason: str = ""  # why the release could not replay here; "" where it did

    def line(self) -> str:
        where = self.directory / "results.jsonl"
        if self.reason:
            return f"{self.engine}@{self.version}: cannot replay here: {self.reason.splitlines()[-1][:200]} -> {where}"
        return (f"{self.engine}@{self.version}: {self.counts} in {self.replay_s:.1f} s "
                f"(install {self.install_s:.1f} s) -> {where}")


def adapter_at(engine: str, version: str, pinned: str | None) -> Adapter:
    """The engine's adapter at ``version``: its pinned env itself where that is the version, else an overlay."""
    (adapter,) = adapters([engine if version == pinned else f"{engine}@{version}"])
    return adapter


def install_at(adapter: Adapter) -> str:
    """Install the adapter's overlay if it is not cached yet; "" when ready, else the measured reason it is not."""
    if adapter.overlay_dir is not None:
        try:
            adapter.install()
        except InstallError as exc:
            return str(exc)
    return adapter.ready() or ""


def sweep_release(engine: str, version: str, pinned: str | None, fixtures: list[Fixture], results_dir: str,
                  chunkings: list[str]) -> Swept:
    """Replay ``fixtures`` at one release into ``results_dir/ENGINE@VERSION`` (any process: a pool worker too)."""
    adapter = adapter_at(engine, version, pinned)
    directory = Path(results_dir) / f"{engine}@{version}"
    started = time.perf_counter()
    reason = install_at(adapter)
    installed = time.perf_counter()
    if not reason:
        try:
            counts = replay_engine(adapter, fixtures, directory, chunkings)
            return Swept(engine, version, directory, counts, installed - started, time.perf_counter() - installed)
        except WorkerError as exc:  # the release's parser does not start over the pinned env
            reason = f"{adapter.name} does not start here: {exc}"
    counts = record_cannot_replay(adapter.spec, (f.family for f in fixtures), directory, reason, version)
    return Swept(engine, version, directory, counts, installed - started, time.perf_counter() - installed, reason)


def sweep(engine: str, versions: Iterable[str], pinned: str | None, fixtures: list[Fixture], results_dir: str,
          chunkings: list[str], jobs: int = 1) -> list[Swept]:
    """Every release in ``versions``, ``jobs`` of them at once (their installs too), in the order given."""
    from concurrent.futures import ProcessPoolExecutor

    args = [(engine, v, pinned, fixtures, results_dir, chunkings) for v in versions]
    if jobs > 1 and len(args) > 1:
        with ProcessPoolExecutor(min(jobs, len(args))) as pool:
            return list(pool.map(sweep_release, *zip(*args)))
    return [sweep_release(*a) for a in args]

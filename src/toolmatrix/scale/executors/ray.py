"""Shards as Ray tasks: each asks the cluster for the shard's GPUs, runs the shard's own pytest command on the
node Ray picks, and hands its results directory back to the driver, which files it and builds one page.

Ray does the scheduling, placement and retries: a task whose node dies is run again once (``max_retries``) on
another node; a second loss is written as the shard's results all the same, every case an ``error`` blamed on
``infra`` (``--record-lost``), so nothing is silently missing. Results travel only as a finished task's return
value, so a node that dies mid-run leaves nothing half-written behind, and the driver files each shard once, in
a folder of its own that it never writes twice (``file_results``).
"""

from __future__ import annotations

import functools
import io
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.records import RUN, ResultsError, read_run_info
from toolmatrix.scale.shards import Plan, Shard, safe_name

LOG_TAIL = 4000  # bytes of a shard's output kept for the driver's summary


@attrs.frozen
class ShardResult:
    """What came back of one shard: the child's exit code, where it ran, its results as a tar archive."""

    exit_code: int
    host: str
    node_id: str
    archive: bytes | None  # None: the command wrote no results directory (e.g. the engine could not start)
    log_tail: str


@attrs.frozen
class Filed:
    """A shard as the driver filed it."""

    shard: Shard
    exit_code: int | None  # None: lost with its machine, twice
    host: str | None
    node_id: str | None  # the Ray node that ran it to the end
    results: Path | None
    note: str  # the lost reason, or the child's last output when it wrote no results


def local_argv(command: Sequence[str]) -> list[str]:
    """The shard's command run with this interpreter (``pytest`` -> ``python -m pytest``)."""
    return [sys.executable, "-m", "pytest", *command[1:]] if command[0] == "pytest" else list(command)


def run_shard(shard: Shard, env: dict[str, str] | None = None) -> ShardResult:
    """Run one shard here, in a fresh folder, and pack what it wrote. The body of the Ray task."""
    import ray  # on the node: this runs inside a Ray worker

    from toolmatrix.serving.launchers.process import die_with_parent

    with tempfile.TemporaryDirectory(prefix="toolmatrix-shard-") as work:
        proc = subprocess.run(local_argv(shard.command), cwd=work, env={**os.environ, **(env or {})},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              # the node's worker dies -> the child gets SIGTERM and stops its engine in order
                              preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
        results = Path(work) / shard.results_dir
        return ShardResult(proc.returncode, socket.gethostname(), ray.get_runtime_context().get_node_id(),
                           _pack(results) if (results / RUN).is_file() else None,
                           proc.stdout[-LOG_TAIL:].decode("utf-8", "replace"))


def _pack(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "matrix" not in path.relative_to(directory).parts:  # the driver builds the page
                tar.add(path, arcname=str(path.relative_to(directory)))
    return buffer.getvalue()


def file_results(archive: bytes, root: Path, shard: Shard) -> Path:
    """Unpack a shard's results into ``root/SHARD/RUN_ID``: a folder per run, created here and never reused, so a
    run never overwrites another (the history is append-only)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=root))
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            _extract(tar, staging / "run")
        return _file(staging / "run", root, shard)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract(tar: tarfile.TarFile, where: Path) -> None:
    """Unpack regular files only, never outside ``where``: a node's archive is not trusted further than that (the
    ``data`` filter, where this Python has it, also drops modes and owners)."""
    for member in tar.getmembers():
        if not member.isfile() or Path(member.name).is_absolute() or ".." in Path(member.name).parts:
            raise tarfile.TarError(f"refused archive member {member.name!r}: not a plain file inside the folder")
    if hasattr(tarfile, "data_filter"):
        tar.extractall(where, filter="data")
    else:  # a Python without extraction filters
        tar.extractall(where)


def _file(results: Path, root: Path, shard: Shard) -> Path:
    target = root / safe_name(shard.id) / safe_name(read_run_info(results).run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir()  # FileExistsError: this run was filed already; refuse rather than overwrite it
    results.rename(target)
    return target


def record_lost(shard: Shard, root: Path, reason: str, env: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """The shard's results as lost: its own command, here, with ``--record-lost`` (no engine, no xdist). Returns
    where they were filed and the reason, or None and why they could not be written."""
    staging = Path(tempfile.mkdtemp(prefix=".lost-", dir=root))
    try:
        command = [*local_argv(shard.command), "-n", "0", "--no-matrix", f"--record-lost={reason}"]
        proc = subprocess.run(command, cwd=staging, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        results = staging / shard.results_dir
        if (results / RUN).is_file():
            return _file(results, root, shard), reason
        return None, f"{reason}; not recorded either: {last_line(proc.stdout.decode('utf-8', 'replace'))}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def task_options(shard: Shard, retries: int) -> dict[str, Any]:
    """What the Ray task asks of the cluster: the shard's GPUs, one CPU to hold its place, ``retries`` reruns
    after a lost node (system failures only: a shard whose cases fail is a finished shard, never retried)."""
    return {"num_gpus": shard.gpus, "num_cpus": 1, "max_retries": retries, "retry_exceptions": False}


class ClusterError(ToolmatrixError):
    """No Ray cluster can be reached at the address given; the message says what was tried."""


def connect(address: str) -> Any:
    """``ray`` connected to the cluster at ``address``. A host:port that does not answer is refused in seconds
    (Ray itself would retry for minutes), and so is a missing ``ray`` package."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'toolmatrix[ray]'") from None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if host and port.isdigit():
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except OSError as exc:
            raise ClusterError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc})") from None
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONUNBUFFERED": "1"}})
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ClusterError(f"--ray {address}: {exc}") from None
    return ray


def run_on_ray(plan: Plan, address: str, root: Path, *, retries: int = 1, env: dict[str, str] | None = None,
               echo: Callable[[str], None] = print) -> list[Filed]:
    """Run every shard of ``plan`` on the Ray cluster at ``address``; file each shard's results under ``root``.

    ``env`` is passed to every shard's command on its node (e.g. an engine binary's path). Returns one ``Filed``
    per shard, in the plan's order. Raises ClusterError, before anything runs, when no cluster is there."""
    ray = connect(address)
    root.mkdir(parents=True, exist_ok=True)
    try:
        remote = ray.remote(run_shard)
        pending = {remote.options(**task_options(shard, retries)).remote(shard, env): shard for shard in plan.shards}
        filed: dict[str, Filed] = {}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(done[0])
            filed[shard.id] = _collect(ray, done[0], shard, root, retries, env)
            echo(_line(filed[shard.id]))
        return [filed[shard.id] for shard in plan.shards]
    finally:
        ray.shutdown()


def _collect(ray: Any, ref: Any, shard: Shard, root: Path, retries: int, env: dict[str, str] | None) -> Filed:
    try:
        result: ShardResult = ray.get(ref)
    except ray.exceptions.RayError as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        how = "its task failed on the node" if isinstance(exc, ray.exceptions.RayTaskError) else \
            f"lost with its node, {retries + 1} tries"
        reason = f"shard not run to the end ({how}): {type(exc).__name__}: {first}"
        return Filed(shard, None, None, None, *record_lost(shard, root, reason, env))
    try:
        results = file_results(result.archive, root, shard) if result.archive else None
    except (ResultsError, OSError, tarfile.TarError) as exc:  # one shard's bad answer: the others go on
        return Filed(shard, result.exit_code, result.host, result.node_id, None, f"results not filed: {exc}")
    return Filed(shard, result.exit_code, result.host, result.node_id, results, "" if results else result.log_tail)


def last_line(text: str) -> str:
    """The last non-blank line of a command's output: what it said when it stopped."""
    return next((line for line in reversed(text.splitlines()) if line.strip()), "")


def _line(filed: Filed) -> str:
    from toolmatrix.base.exitcodes import meaning

    if filed.exit_code is None:
        recorded = f"recorded as infra errors in {filed.results}" if filed.results else "nothing recorded"
        return f"toolmatrix: {filed.shard.id}: lost: {filed.note}; {recorded}"
    where = f" on {filed.host} (node {(filed.node_id or '')[:8]})"
    if filed.results is None:
        return f"toolmatrix: {filed.shard.id}: exit {filed.exit_code} ({meaning(filed.exit_code)}){where}, " \
               f"no results: {last_line(filed.note)}\n  command: {shlex.join(filed.shard.command)}"
    return f"toolmatrix: {filed.shard.id}: exit {filed.exit_code} ({meaning(filed.exit_code)}){where}; {filed.results}"

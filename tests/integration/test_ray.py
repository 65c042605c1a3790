"""Pairs fanned out on a real local Ray cluster (``ray start``: a head and worker nodes with fake GPUs), merged into
one page: with the fake engine standing in for the engines' binaries, with a worker node killed mid-run, and with
the embedded llama-server."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd, stand_in
from tests.helpers_ray import LocalCluster
from toolmatrix.records import check_results, read_records, read_run_info
from toolmatrix.scale.shards import plan_shards

ray = pytest.importorskip("ray", reason="the ray extra: pip install 'toolmatrix[ray]'")
pytestmark = pytest.mark.live

PAIRS = ["--engine=llamacpp,llama-cpp-python", "--model=gemma3-270m"]
SUBSET = ["-k", "single"]  # 16 items a pair
SLOW = ("--delay", "0.5")  # each answer takes half a second: a shard runs for several seconds, long enough to kill


def run_dirs(root: Path, shard: str) -> list[Path]:
    return sorted(p for p in (root / shard).iterdir() if p.is_dir()) if (root / shard).is_dir() else []


@pytest.fixture
def fakes(tmp_path):
    """Stand-ins for the two engines' binaries; the worker nodes inherit them, as nodes inherit their image."""
    return {**stand_in(tmp_path, "llamacpp", *SLOW), **stand_in(tmp_path, "llama-cpp-python", *SLOW)}


@pytest.fixture
def cluster(fakes):
    started = LocalCluster.start(workers=2, env=fakes)
    yield started
    started.stop()


def test_pairs_fan_out_as_ray_tasks_and_merge_into_one_page(cluster, fakes, tmp_path):
    proc = subprocess.run(pytest_cmd("-n", "2", *SUBSET, *PAIRS, "--ray", cluster.address,
                                     "--results-dir", str(tmp_path / "r")),
                          cwd=tmp_path, env={**os.environ, **fakes}, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # the fake's answers fail cases: a finished run of failed cases
    nodes, batches = set(), set()
    for pair in ("gemma3-270m@llamacpp", "gemma3-270m@llama-cpp-python"):
        [run] = run_dirs(tmp_path / "r", pair)
        assert check_results(run) == []
        assert len(list(read_records(run))) == 16
        info = read_run_info(run).run
        assert info.shard == pair and info.batch.startswith("ray-")  # one fan-out: one batch for every shard
        batches.add(info.batch)
        line = next(line for line in out.splitlines() if line.startswith(f"toolmatrix: {pair}: exit 1"))
        nodes.add(line.split("(node ")[1][:8])
    assert len(nodes) == 2, out[-3000:]  # one CPU a node: the two shards ran at once, one on each node
    assert len(batches) == 1
    cells = json.loads((tmp_path / "r" / "matrix" / "matrix.json").read_text())["cells"]
    assert sorted(c["pair"] for c in cells) == ["gemma3-270m@llama-cpp-python", "gemma3-270m@llamacpp"]
    assert "2 shards on Ray, 0 lost" in out


def test_a_worker_node_killed_mid_run_costs_one_retry_and_nothing_is_lost_or_doubled(cluster, fakes, tmp_path):
    root = tmp_path / "r"
    proc = subprocess.Popen(pytest_cmd("-n", "2", *SUBSET, *PAIRS, "--ray", cluster.address, "--results-dir", str(root)),
                            cwd=tmp_path, env={**os.environ, **fakes}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    victim = cluster.node_running("toolmatrix.testing.fake")  # a shard's engine is up: mid-run
    assert cluster.kill_node(victim) >= 3  # its raylet, the Ray worker running the shard, the shard's pytest...
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out[-3000:]
    nodes = set()
    for pair in ("gemma3-270m@llamacpp", "gemma3-270m@llama-cpp-python"):
        [run] = run_dirs(root, pair)  # the killed attempt left nothing; the retry filed exactly one run
        records = list(read_records(run))
        assert len(records) == len({(r.case_id, r.mode) for r in records}) == 16
        assert check_results(run) == []
        nodes.add(next(line for line in out.splitlines() if line.startswith(f"toolmatrix: {pair}: exit 1"))
                  .split("(node ")[1][:8])
    assert len(nodes) == 1, out[-3000:]  # both finished on the node left: the killed shard was run again there
    assert "0 lost" in out
    assert not list(root.glob(".incoming-*")) and not list(root.glob(".lost-*"))


def test_a_shard_lost_without_a_retry_is_recorded_as_infra_errors(cluster, fakes, tmp_path):
    """The library call with no retry: the lost shard's every case x mode is an ``error`` blamed on ``infra``."""
    from toolmatrix.scale.executors.ray import run_on_ray

    plan = plan_shards(["llama-cpp-python"], ["gemma3-270m"], pytest_args=("-n", "2", *SUBSET))
    lines: list[str] = []
    killer = threading.Thread(target=lambda: cluster.kill_node(cluster.node_running("toolmatrix.testing.fake")))
    killer.start()
    [filed] = run_on_ray(plan, cluster.address, tmp_path / "r", retries=0, env=fakes, echo=lines.append)
    killer.join()
    assert filed.exit_code is None and filed.results is not None, lines
    records = list(read_records(filed.results))
    assert len(records) == 16 and {(r.verdict.value, r.blame.value) for r in records} == {("error", "infra")}
    assert all(r.checks[0].kind == "SHARD_LOST" and "lost with its node, 1 tries" in r.reason for r in records)
    assert read_run_info(filed.results).run.exit_status.value == "lost"
    assert "lost" in lines[0]


def test_the_embedded_llama_server_fans_out_on_ray(tmp_path):
    """Two real pairs (the two registry models llama-server serves here) as Ray tasks, one page of both."""
    started = LocalCluster.start(workers=2, env={})
    try:
        proc = subprocess.run(pytest_cmd("-n", "1", "--slots", "1", "-k", "single.get_weather_paris", "--engine=llamacpp",
                                         "--model=qwen2.5-coder-0.5b,gemma3-270m", "--ray", started.address,
                                         "--results-dir", str(tmp_path / "r")),
                              cwd=tmp_path, capture_output=True, text=True, timeout=900)
    finally:
        started.stop()
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), out[-3000:]
    for pair in ("qwen2.5-coder-0.5b@llamacpp", "gemma3-270m@llamacpp"):
        [run] = run_dirs(tmp_path / "r", pair)
        info = read_run_info(run)
        assert info.run.engine.version and info.run.model.weights_sha256  # a real llama-server answered
        assert len(list(read_records(run))) == 2
    assert len(json.loads((tmp_path / "r" / "matrix" / "matrix.json").read_text())["cells"]) == 2


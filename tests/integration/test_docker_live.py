"""The suite for real inside a container: llama-server from the local image, started by the docker launcher.

What a user types, in a subprocess so that xdist, signals and exit codes are the real ones:
``pytest --engine=llamacpp --model=qwen2.5-coder-0.5b --launcher=docker --variant=local``. The image
``toolmatrix/llama-server:b11434`` (tagged with the llama.cpp build it holds) is built here with no registry
(``src/toolmatrix/data/build-llama-image.sh``, idempotent, about a second once llama-server is built); the GGUF and
the chat template are mounted read-only.

Evidence that the container is started exactly once: the Docker daemon's own event log, read back for the run's
time window and filtered by the run's label (``toolmatrix.run=<run_id>`` from run.json) — one ``create``, one
``start``, one ``destroy``. Skipped only when no Docker daemon answers (start one with
``src/toolmatrix/data/start-dockerd.sh``); a missing image or llama-server is a failure, not a skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers_engine import interruptible, read_until
from toolmatrix.records import check_results, read_records
from toolmatrix.serving.launchers.docker import LABEL_OWNER, LABEL_PAIR, LABEL_RUN
from toolmatrix.serving.launchers.process import find_binary
from toolmatrix.serving.registry import load_engines, load_models

pytestmark = pytest.mark.live  # never beside another engine: 2 cores
ROOT = Path(__file__).parents[2]
DATA = ROOT / "src" / "toolmatrix" / "data"
IMAGE = load_engines()["llamacpp"].docker.variants["local"]["image"]  # toolmatrix/llama-server:b11434
MODEL = "qwen2.5-coder-0.5b"  # the embedded default
SUBSET = "single"  # the single-call cases, both modes: small enough for 2 cores
LONG = "many_tools or no_params or nested"  # still running a few seconds after the engine is ready


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
            str(ROOT / "pyproject.toml"), "--engine=llamacpp", f"--model={MODEL}", "--launcher=docker",
            "--variant=local", *args]


@pytest.fixture(scope="module")
def client():
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any way of not answering means: no daemon here
        pytest.skip(f"no Docker daemon answers ({exc}); start one: {DATA / 'start-dockerd.sh'}")
    return client


@pytest.fixture(scope="module")
def image(client):
    """Build the local image (kept when it exists). A failure here is a test failure: CI has a daemon."""
    proc = subprocess.run(["bash", str(DATA / "build-llama-image.sh")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return client.images.get(IMAGE)


def test_the_image_holds_the_build_in_the_cache_with_its_cpu_modules(image):
    """An image of another build (an older -march=native one) is replaced, not kept: its label names the binary
    and every library beside it, the portable build's CPU modules among them."""
    binary = (find_binary(load_engines()["llamacpp"]) or Path("missing")).resolve()
    files = [binary, *sorted(binary.parent.glob("lib*.so*"))]
    assert any(f.name.startswith("libggml-cpu-") for f in files)
    built = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()
    assert image.labels["toolmatrix.llama-server.build"] == built


def containers(client, **labels: str) -> list:
    """Containers in any state carrying every given label (value None: the label at all)."""
    wanted = [key if value is None else f"{key}={value}" for key, value in labels.items()]
    return client.containers.list(all=True, filters={"label": wanted})


def owner_of(proc: subprocess.Popen) -> str:
    return f"{socket.gethostname()}:{proc.pid}"


def container_events(client, run_id: str, since: float) -> Counter:
    """What the daemon did to containers labelled with this run, from ``since`` until now."""
    events = client.events(since=int(since) - 1, until=int(time.time()) + 1, decode=True,
                           filters={"type": "container", "label": f"{LABEL_RUN}={run_id}"})
    return Counter(event["Action"] for event in events)


@pytest.fixture(scope="module")
def docker_run(client, image, tmp_path_factory):
    results = tmp_path_factory.mktemp("docker")
    started = time.time()
    # -n 4 (more workers than cores): still one container, shared by every worker.
    proc = subprocess.run(pytest_cmd("-n", "4", "-k", SUBSET, "--results-dir", str(results)),
                          cwd=tmp_path_factory.getbasetemp(), capture_output=True, text=True, timeout=3000)
    run = json.loads((results / "run.json").read_text()) if (results / "run.json").exists() else {}
    return proc, results, run, started


def test_suite_runs_in_the_container_with_valid_results(docker_run, image):
    proc, results, run, _ = docker_run
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 1: some cases failed
    assert check_results(results) == []
    records = list(read_records(results))
    pairs = {(r.case_id, r.mode) for r in records}
    assert len(pairs) == len(records) >= 14, "one record per case x mode, none lost or doubled"
    assert {mode for _, mode in pairs} == {"nonstream", "stream"}
    assert all(r.case_id.startswith(("single.", "parallel.disabled_single")) for r in records)
    # An engine's 500 is a finding (llama-server's parser rejects some answers); an infra error is the container.
    misbehaved = [(r.case_id, r.mode, r.reason) for r in records if r.verdict == "error" and r.blame == "infra"]
    assert not misbehaved, "the container misbehaved"
    engine = run["engine"]
    assert engine["launcher"] == "docker" and engine["variant"] == "local"
    assert engine["image"] == IMAGE and engine["image_digest"] == image.id  # no registry: the image ID
    assert engine["container"].startswith(f"toolmatrix-{MODEL}-llamacpp-")
    assert engine["version"], "the engine's version, asked from the running server (/props build_info)"
    assert "--jinja" in engine["flags"] and "/toolmatrix/templates/qwen2.5-tools.jinja" in engine["flags"]
    assert run["model"]["weights_sha256"] == load_models()[MODEL].weights["gguf"]["sha256"]
    assert run["exit_status"] == "complete" and sum(run["counts"].values()) == len(records)


def test_container_started_once_and_removed(docker_run, client):
    proc, _, run, started = docker_run
    events = container_events(client, run["run_id"], started)
    assert (events["create"], events["start"], events["destroy"]) == (1, 1, 1), events
    assert len(re.findall(rf"toolmatrix: {re.escape(MODEL)}@llamacpp ready at", proc.stdout)) == 1
    assert "created: 4/4 workers" in proc.stdout
    assert containers(client, **{LABEL_RUN: run["run_id"]}) == []
    assert containers(client, **{LABEL_RUN: None}) == [], "no toolmatrix container is left on this machine"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_container_removed_when_the_run_is_interrupted(client, image, tmp_path, sig):
    with interruptible(pytest_cmd("-n", "2", "-k", LONG, "--results-dir", str(tmp_path / "r")), cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        read_until(proc, "ready at", 600)
        mine = containers(client, **{LABEL_OWNER: owner_of(proc)})
        assert [c.status for c in mine] == ["running"], "the run's container should be running now"
        # Weights and chat template reach the container read-only.
        mounts = {m["Destination"]: m["RW"] for m in mine[0].attrs["Mounts"]}
        assert mounts["/models"] is False and mounts["/toolmatrix/templates"] is False, mounts
        time.sleep(2)  # let requests be in flight
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert containers(client, **{LABEL_OWNER: owner_of(proc)}) == [], out[-2000:]
    assert containers(client, **{LABEL_RUN: None}) == [], "no toolmatrix container is left on this machine"
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["exit_status"] == "interrupted" and check_results(tmp_path / "r") == []


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_stale_container_of_a_killed_run_is_removed_at_the_next_start(client, image, tmp_path):
    host, tag = socket.gethostname(), uuid.uuid4().hex[:8]
    labels = {LABEL_RUN: f"killed-run-{tag}", LABEL_PAIR: f"{MODEL}@llamacpp"}
    stale = client.containers.create(IMAGE, ["--version"], name=f"toolmatrix-stale-{tag}",
                                     labels={**labels, LABEL_OWNER: f"{host}:{dead_pid()}"})
    # A container of a run still going on (this process) must survive the cleanup.
    alive = client.containers.create(IMAGE, ["--version"], name=f"toolmatrix-alive-{tag}",
                                      labels={**labels, LABEL_OWNER: f"{host}:{os.getpid()}"})
    try:
        # The next start: a run that selects no case still starts (and stops) the engine.
        proc = subprocess.run(pytest_cmd("-k", "no_case_is_called_this"), cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        assert "ready at" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"toolmatrix: removed container {stale.name} left by an earlier run" in proc.stderr
        names = {c.name for c in containers(client, **{LABEL_RUN: labels[LABEL_RUN]})}
        assert names == {alive.name}, names
    finally:
        for container in (stale, alive):
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by the run
                pass
    assert containers(client, **{LABEL_RUN: None}) == []

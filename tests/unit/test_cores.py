"""Engines started on one machine never spin more threads than it has cores (launchers/cores.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers_engine import stand_in
from toolmatrix.serving.launchers import ProcessLauncher, cores
from toolmatrix.serving.registry import ModelSpec, load_engines


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A fresh lease file, on a machine whose usable cores are 0-3."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.setattr(cores, "usable_cpus", lambda: [0, 1, 2, 3])
    return tmp_path


def test_engines_get_the_cores_no_other_engine_holds(machine):
    first = cores.lease()
    second = cores.lease()
    assert first.cpus == (0, 1, 2, 3) and first.threads == 4 and first.cpu_list == "0-3"
    assert second.cpus == (0,) and second.threads == 1  # all held: share the least held core, never none
    first.release()
    third = cores.lease()
    assert third.cpus == (1, 2, 3) and third.cpu_list == "1-3"  # core 0 is still the second engine's


def test_a_dead_holders_cores_are_free_again(machine):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (machine / cores.LEASES).write_text(f'{{"gone": {{"pid": {dead.pid}, "cpus": [0, 1, 2, 3]}}}}')
    assert cores.lease().cpus == (0, 1, 2, 3)


def test_a_damaged_lease_file_is_read_as_no_leases(machine):
    (machine / cores.LEASES).write_text('{"half": {"pid": ')
    assert cores.lease().cpus == (0, 1, 2, 3)


def test_cpu_lists_in_the_form_bindings_read():
    assert cores.Lease("", (0, 2, 3, 5)).cpu_list == "0,2-3,5"
    assert cores.Lease("", (7,)).cpu_list == "7"


def test_two_engines_started_together_take_the_free_cores_and_give_them_back(machine, monkeypatch):
    """The bug: each of two llama-servers got --threads 2 (os.cpu_count()) on 2 cores, 14x slower than 1 each."""
    monkeypatch.setattr(cores, "usable_cpus", lambda: [0, 1])
    for name, value in stand_in(machine, "llamacpp").items():
        monkeypatch.setenv(name, value)
    weights = machine / "any.gguf"
    weights.write_bytes(b"GGUF")  # the stand-in never reads it
    model = ModelSpec.from_source(f"gguf:{weights}", "hermes")
    launchers = [ProcessLauncher(load_engines()["llamacpp"], model, run_id=f"cores{i}", log_dir=machine)
                 for i in range(2)]
    try:
        for launcher in launchers:
            launcher.start()
        assert [launcher.argv[launcher.argv.index("--threads") + 1] for launcher in launchers] == ["2", "1"]
    finally:
        for launcher in launchers:
            launcher.stop()
    assert cores.lease().cpus == (0, 1)  # both gave their cores back

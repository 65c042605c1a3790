"""Items that must share an xdist worker do, on every pytest and xdist version pyproject.toml allows (CI runs this
on the newest and the oldest): the groups come from node ids through xdist's scheduler hook, not from marks."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import INTEGRATION, LIVE, ONE_WORKER, group_of

ROOT = Path(__file__).parents[2]

TOY_TESTS = '''
import pytest

@pytest.mark.parametrize("group", "abcd")
@pytest.mark.parametrize("n", range(4))
def test_item(group, n):
    pass
'''
TOY_CONFTEST = '''
import pytest
from toolmatrix.plugin.scheduling import GroupScheduling, wants_grouping

@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if wants_grouping(config):
        return GroupScheduling(config, log, key=lambda nodeid: nodeid.rsplit("-", 1)[-1])
'''


def workers_by_group(tmp_path: Path, *args: str) -> dict[str, set[str]]:
    (tmp_path / "test_toy.py").write_text(TOY_TESTS)
    (tmp_path / "conftest.py").write_text(TOY_CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:toolmatrix", "-v",
                           "-n", "2", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ran: dict[str, set[str]] = defaultdict(set)
    for found in re.finditer(r"\[(gw\d)\].*test_item\[\d-([a-d])\]", proc.stdout):
        ran[found.group(2)].add(found.group(1))
    return ran


@pytest.mark.parametrize("dist", [(), ("--dist", "load"), ("--dist", "loadgroup")], ids=["-n", "load", "loadgroup"])
def test_a_group_runs_on_one_worker_and_groups_spread(tmp_path, dist):
    ran = workers_by_group(tmp_path, *dist)
    assert sorted(ran) == list("abcd")
    assert all(len(workers) == 1 for workers in ran.values()), dict(ran)
    assert len(set().union(*ran.values())) == 2, "both workers had groups"


def test_worksteal_stays_xdists_choice(tmp_path):
    ran = workers_by_group(tmp_path, "--dist", "worksteal")
    assert sorted(ran) == list("abcd")  # any placement: the hook stands aside; every item still ran


def test_every_module_the_harness_groups_exists():
    for name in LIVE + ONE_WORKER:
        assert (ROOT / INTEGRATION / f"{name}.py").is_file(), name
    assert group_of("tests/integration/test_ray.py::test_x") == group_of("tests/integration/test_hostile.py::t") == "live"
    assert group_of("tests/integration/test_selection.py::test_y[a]") == "tests/integration/test_selection.py"
    assert group_of("tests/integration/test_faults.py::test_z[a]") == "tests/integration/test_faults.py::test_z[a]"


class FakeWorker:
    """What xdist's scheduler asks of a worker: take item indexes, shut down."""

    shutting_down = False

    def __init__(self) -> None:
        self.sent: list[int] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


class OneWorkerConfig:
    option = SimpleNamespace(loadscopereorder=False)  # in collection order, as the suite runs by default

    def getvalue(self, name: str) -> list[str] | None:
        return ["popen"] if name == "tx" else None


def test_the_scheduler_runs_every_item_once_and_keeps_only_the_work_in_flight():
    """xdist's own bookkeeping keeps every scope a worker ever had (and walks it after each test); ours forgets a
    finished scope, so it stays as small as the work handed out, however long the run."""
    from toolmatrix.plugin.scheduling import GroupScheduling

    items = [f"t.py::test_case[c{n}-{mode}]" for n in range(200) for mode in ("nonstream", "stream")]
    scheduler = GroupScheduling(OneWorkerConfig(), None, key=lambda nodeid: nodeid.split("[")[1].split("-")[0])
    worker = FakeWorker()
    scheduler.add_node(worker)
    scheduler.add_node_collection(worker, items)
    scheduler.schedule()
    done, held = 0, []
    while done < len(worker.sent):
        scheduler.mark_test_complete(worker, worker.sent[done])
        done += 1
        held.append(len(scheduler.assigned_work[worker]))
    assert sorted(worker.sent) == list(range(len(items))) and worker.shutting_down
    assert max(held[len(held) // 2:]) <= 3, "finished scopes are forgotten"
    assert scheduler.tests_finished

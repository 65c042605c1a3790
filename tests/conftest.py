"""How toolmatrix's own tests share two xdist workers (``pytest -n 2``).

Some modules must run on one worker, one test after another: each test runs a whole suite of its own, or the
module shares one module-scoped run. Modules that start a real engine form one group, ``live``: two engines side
by side on 2 cores starve each other into false timeouts. Every other test is scheduled on its own. The groups are
given to xdist by the scheduler hook it documents, not by ``xdist_group`` marks (see ``toolmatrix.plugin.scheduling``).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolmatrix.plugin import target_requested
from toolmatrix.plugin.scheduling import GroupScheduling, wants_grouping

LIVE = ("test_docker_live", "test_hostile", "test_live_cpu_engines", "test_live_llamacpp", "test_portable_build",
        "test_ray")
ONE_WORKER = ("test_engine_death", "test_plugin_fake", "test_run_info_template", "test_selection",
              "test_several_pairs", "test_surfaces", "test_usage", "test_worker_crash")
INTEGRATION = "tests/integration/"


def group_of(nodeid: str) -> str:
    """The scope of a test: ``live``, its module for a one-worker module, else the test itself."""
    module = nodeid.split("::", 1)[0]
    name = module.removeprefix(INTEGRATION).removesuffix(".py")
    if module.startswith(INTEGRATION) and name in LIVE:
        return "live"
    if module.startswith(INTEGRATION) and name in ONE_WORKER:
        return module
    return nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if target_requested(config) or not wants_grouping(config):
        return None  # a suite run groups by case (toolmatrix.plugin); other --dist modes are xdist's
    return GroupScheduling(config, log, key=group_of)

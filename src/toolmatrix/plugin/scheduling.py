"""Which items share an xdist worker: a scheduler given through xdist's documented ``pytest_xdist_make_scheduler``.

Both modes of a case must run on one worker (its stream is compared with the non-streamed answer that worker
recorded). ``xdist_group`` marks cannot promise it: ``--dist loadgroup`` finds a group by the ``@name`` that
workers append to ``item._nodeid``, which pytest 9.2 no longer reads (node ids are built from a structured id),
so there every group is silently split. This scheduler takes the group from the node id as pytest reports it,
through a key function, and needs nothing from the workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduler with scopes from ``key(nodeid)``: the items of one scope run on one worker, in
    collection order, and a worker that crashes has the rest of its scope run again elsewhere.

    Its bookkeeping is kept proportional to the work in flight: xdist's keeps every scope a worker was ever given
    and walks them all after each test, and finds each item's index with ``list.index``; both are quadratic in
    the run (a second of the controller's time at 10^4 items, minutes at 10^5)."""

    def __init__(self, config: pytest.Config, log: Any, key: Callable[[str], str]):
        super().__init__(config, log)
        self.key = key
        self.indexes: dict[Any, dict[str, int]] = {}  # per worker: node id -> its index in that worker's collection

    def _split_scope(self, nodeid: str) -> str:  # the one method xdist's own scope schedulers override
        return self.key(nodeid)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        nodeid = self.registered_collections[node][item_index]
        scope = self._split_scope(nodeid)
        work = self.assigned_work[node][scope]
        work[nodeid] = True
        if all(work.values()):  # a finished scope has nothing left to count, run again or give back
            del self.assigned_work[node][scope]
        self._reschedule(node)

    def _assign_work_unit(self, node: Any) -> None:
        scope, work_unit = self.workqueue.popitem(last=False)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        if node not in self.indexes:
            self.indexes[node] = {nodeid: i for i, nodeid in enumerate(self.registered_collections[node])}
        index = self.indexes[node]
        node.send_runtest_some([index[nodeid] for nodeid, completed in work_unit.items() if not completed])


def wants_grouping(config: pytest.Config) -> bool:
    """True for the distribution modes that group (xdist's default ``load`` under ``-n``, and ``loadgroup``);
    the others (``worksteal``, ``each``, ``loadfile``, ...) are the user's explicit choice and stay xdist's."""
    return config.getoption("dist", "no") in ("load", "loadgroup")

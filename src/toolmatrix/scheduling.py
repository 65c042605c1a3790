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
    collection order, and a worker that crashes has the rest of its scope run again elsewhere."""

    def __init__(self, config: pytest.Config, log: Any, key: Callable[[str], str]):
        super().__init__(config, log)
        self.key = key

    def _split_scope(self, nodeid: str) -> str:  # the one method xdist's own scope schedulers override
        return self.key(nodeid)


def wants_grouping(config: pytest.Config) -> bool:
    """True for the distribution modes that group (xdist's default ``load`` under ``-n``, and ``loadgroup``);
    the others (``worksteal``, ``each``, ``loadfile``, ...) are the user's explicit choice and stay xdist's."""
    return config.getoption("dist", "no") in ("load", "loadgroup")

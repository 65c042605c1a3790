"""Exit codes of a suite run: pytest's own, plus one of toolmatrix's, and which of them is worst.

pytest uses 0-5; toolmatrix adds ``ENGINE_DIED`` (6): the engine it started stopped in the middle of the run,
so the results end in ``error`` records that say nothing about tool calling. ``worst`` picks the exit code of
an invocation that ran several pairs.
"""

from __future__ import annotations

import signal
from typing import Iterable

import pytest

ENGINE_DIED = 6
SHARD_LOST = 7  # an executor lost a shard with its machine (fan-out only): its records are infra errors

# Worst first. An interrupted run (2) stopped every pair after it; a crash of the harness (3) is a bug of ours;
# a dead engine (6) or one that could not start (4, pytest's usage error) says nothing about tool calling;
# failed cases (1) are the normal result of a weak model; no case selected (5) is a filter that matched nothing.
SEVERITY = (
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.INTERNAL_ERROR,
    ENGINE_DIED,
    SHARD_LOST,
    pytest.ExitCode.USAGE_ERROR,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.NO_TESTS_COLLECTED,
    pytest.ExitCode.OK,
)
MEANING = {
    pytest.ExitCode.OK: "every case passed",
    pytest.ExitCode.TESTS_FAILED: "some cases failed",
    pytest.ExitCode.INTERRUPTED: "interrupted",
    pytest.ExitCode.INTERNAL_ERROR: "internal error",
    pytest.ExitCode.USAGE_ERROR: "usage error, or the engine could not start",
    pytest.ExitCode.NO_TESTS_COLLECTED: "no case selected",
    ENGINE_DIED: "engine died",
    SHARD_LOST: "shard lost with its machine",
}


def known(code: int) -> int:
    """``code`` itself, or INTERNAL_ERROR for anything else (e.g. a child pytest killed by a signal)."""
    return code if code in SEVERITY else pytest.ExitCode.INTERNAL_ERROR


def worst(codes: Iterable[int]) -> int:
    """The most severe of ``codes`` by ``SEVERITY`` (0 for none)."""
    return min((known(code) for code in codes), key=SEVERITY.index, default=pytest.ExitCode.OK)


def describe_exit(code: int | None) -> str:
    """A process's exit status in words: ``exit N``, ``killed by SIGKILL``, or unknown (None)."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"


def meaning(code: int) -> str:
    """What a pair's exit code says, for the summary of several pairs."""
    return MEANING.get(code, describe_exit(code) if code < 0 else "unknown exit code")

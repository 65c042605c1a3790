"""Exit codes: a suite run's (pytest's own, plus toolmatrix's) and which of them is worst; a command's.

pytest uses 0-5 (stable values, restated in ``ExitCode`` so that nothing outside the plugin imports pytest);
toolmatrix adds ``ENGINE_DIED`` (6): the engine it started stopped in the middle of the run, so the results end
in ``error`` records that say nothing about tool calling; ``SHARD_LOST`` (7); and ``NO_ANSWER`` (8): no case got
an answer to judge, every exchange an ``infra`` error (a server that stopped serving the model, a URL that is no
API). ``worst`` picks the exit code of an invocation that ran several pairs. ``CommandExit`` is the other column
of the README's table: what a ``toolmatrix`` command's status says.
"""

from __future__ import annotations

import signal
from enum import IntEnum
from typing import Iterable


class ExitCode(IntEnum):
    """A suite run's exit status: pytest's ``pytest.ExitCode`` (0-5), then toolmatrix's own."""

    OK = 0
    TESTS_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4
    NO_TESTS_COLLECTED = 5
    ENGINE_DIED = 6
    SHARD_LOST = 7  # an executor lost a shard with its machine (fan-out only): its records are infra errors
    NO_ANSWER = 8  # every exchange of the run ended as an infra error: nothing was judged


ENGINE_DIED = ExitCode.ENGINE_DIED
SHARD_LOST = ExitCode.SHARD_LOST
NO_ANSWER = ExitCode.NO_ANSWER


class CommandExit(IntEnum):
    """A ``toolmatrix`` command's exit status (the README's table, its command column). A usage error is 2, as
    argparse has it; 4 and 5 keep the suite's meaning where ``replay-bisect`` says the same thing."""

    DONE = 0  # valid, passed, written
    NO = 1  # the command's answer is no: a gate failed, results have problems, a replay differs
    USAGE = 2  # usage or input error: an unknown option or id, a missing path, an invalid file
    CANNOT_RUN = ExitCode.USAGE_ERROR  # replay-bisect: a fixture no two releases replay here
    NOTHING_SELECTED = ExitCode.NO_TESTS_COLLECTED  # replay-bisect: the selection picked no fixture


# Worst first. An interrupted run (2) stopped every pair after it; a crash of the harness (3) is a bug of ours;
# a dead engine (6) or one that could not start (4, pytest's usage error) says nothing about tool calling;
# failed cases (1) are the normal result of a weak model; no case selected (5) is a filter that matched nothing.
SEVERITY = (
    ExitCode.INTERRUPTED,
    ExitCode.INTERNAL_ERROR,
    ExitCode.ENGINE_DIED,
    ExitCode.SHARD_LOST,
    ExitCode.NO_ANSWER,
    ExitCode.USAGE_ERROR,
    ExitCode.TESTS_FAILED,
    ExitCode.NO_TESTS_COLLECTED,
    ExitCode.OK,
)
MEANING: dict[int, str] = {
    ExitCode.OK: "every case passed",
    ExitCode.TESTS_FAILED: "some cases failed",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.INTERNAL_ERROR: "internal error",
    ExitCode.USAGE_ERROR: "usage error, or the engine could not start",
    ExitCode.NO_TESTS_COLLECTED: "no case selected",
    ExitCode.ENGINE_DIED: "engine died",
    ExitCode.SHARD_LOST: "shard lost with its machine",
    ExitCode.NO_ANSWER: "no case got an answer to judge",
}


def known(code: int) -> int:
    """``code`` itself, or INTERNAL_ERROR for anything else (e.g. a child pytest killed by a signal)."""
    return code if code in SEVERITY else ExitCode.INTERNAL_ERROR


def worst(codes: Iterable[int]) -> int:
    """The most severe of ``codes`` by ``SEVERITY`` (0 for none)."""
    return min((known(code) for code in codes), key=SEVERITY.index, default=ExitCode.OK)


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


# What a signal that killed an engine most likely means, and what to do about it.
SIGNAL_HINTS = {
    "SIGILL": "illegal instruction: the engine runs CPU instructions this machine refuses (a build made for another "
              "CPU, or a CPU that advertises instruction sets its hypervisor or kernel does not allow); rebuild it "
              "here for any x86-64 CPU: toolmatrix install ENGINE (a toolmatrix build is portable; a binary you "
              "named with TOOLMATRIX_<ENGINE>_BIN must be rebuilt by you)",
    "SIGKILL": "killed from outside, most often by the kernel's out-of-memory killer (dmesg names it): free memory, "
               "or run a smaller model or context",
    "SIGSEGV": "segmentation fault: a crash inside the engine (its log tail shows where it was); report it to "
               "the engine with that log",
    "SIGBUS": "bus error: a memory-mapped file (the weights) was truncated or replaced while loaded, or its disk "
              "is full",
    "SIGABRT": "aborted: the engine stopped itself, usually on a failed assertion its log tail names",
    "SIGFPE": "arithmetic fault inside the engine (its log tail shows where it was)",
}


def signal_hint(code: int | None, engine: str = "ENGINE") -> str | None:
    """For an exit status that is a signal: what it most likely means and what to do; None otherwise."""
    if code is None or code >= 0:
        return None
    try:
        hint = SIGNAL_HINTS.get(signal.Signals(-code).name)
    except ValueError:
        return None
    return hint.replace("ENGINE", engine) if hint else None


def death_message(code: int | None, engine: str = "ENGINE") -> str:
    """A dead engine's status with, for a signal, its likely cause: ``killed by SIGILL: illegal instruction ...``."""
    hint = signal_hint(code, engine)
    return f"{describe_exit(code)}: {hint}" if hint else describe_exit(code)


def meaning(code: int) -> str:
    """What a pair's exit code says, for the summary of several pairs."""
    return MEANING.get(code, describe_exit(code) if code < 0 else "unknown exit code")

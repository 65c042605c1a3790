"""Notice an engine that died in the middle of a run, and say so in every record that its death spoiled.

The controller shows each record to an ``EngineWatch`` before writing it. Only a record whose exchange failed
(verdict ``error``, or blame ``infra``) makes the watch ask the launcher whether the engine still runs, so a
healthy run never pays for the question (a docker ``alive()`` is an API call). Once the engine is found dead,
every failed record from then on becomes verdict ``error``, blame ``infra``, with the reason ``engine died
(...)`` and the engine's log tail under ``engine_death``. A record that carries a real answer (pass, or a
failure blamed on the model, engine or template) was answered before the death and is written as it came;
records already written are never touched.
"""

from __future__ import annotations

import json

import attrs

from toolmatrix.records import Blame, EngineDeath, Posted, Record, Verdict
from toolmatrix.serving.launchers import Launcher

LOG_LINES = 40


class EngineWatch:
    """Looks at each record before the controller writes it; see the module docstring."""

    def __init__(self, launcher: Launcher):
        self.launcher = launcher
        self.death: EngineDeath | None = None
        self.seen = 0

    def observe(self, posted: Posted) -> Posted:
        """The record to write: as given, or marked as spoiled by the engine's death."""
        self.seen += 1
        if posted.verdict != Verdict.ERROR and posted.blame != Blame.INFRA:
            return posted
        if self.death is None and not self.launcher.alive():
            self.death = EngineDeath(self.launcher.exit_code(), self.launcher.log_tail(LOG_LINES), self.seen - 1)
        if self.death is None:
            return posted
        record = Record.from_dict(json.loads(posted.line))
        # The failed exchange is the cause (an unsupported verdict's reason would name the feature instead).
        cause = next((f"{c.name}: {c.detail}" for c in record.checks if c.failed and c.blame is Blame.INFRA),
                     record.reason)
        return Posted.of(attrs.evolve(record, verdict=Verdict.ERROR, blame=Blame.INFRA,
                                      reason=f"{self.death.summary}; {cause}", engine_death=self.death))

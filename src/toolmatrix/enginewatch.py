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
from typing import Any

import attrs

from toolmatrix.exitcodes import describe_exit
from toolmatrix.launchers import Launcher
from toolmatrix.results import encode_record

LOG_LINES = 40


@attrs.frozen
class EngineDeath:
    """When and how the engine died, as run.json and the spoiled records carry it."""

    exit_code: int | None
    log_tail: str
    records_before: int  # records written before the death was noticed

    @property
    def summary(self) -> str:
        return f"engine died ({describe_exit(self.exit_code)})"

    def to_dict(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "log_tail": self.log_tail, "records_before": self.records_before}


class EngineWatch:
    """Looks at each record before the controller writes it; see the module docstring."""

    def __init__(self, launcher: Launcher):
        self.launcher = launcher
        self.death: EngineDeath | None = None
        self.seen = 0

    def observe(self, line: str, verdict: str, blame: str | None) -> tuple[str, str, str | None]:
        """The record to write (an encoded JSON line), its verdict and blame: as given, or marked as spoiled."""
        self.seen += 1
        failed = verdict == "error" or blame == "infra"
        if not failed:
            return line, verdict, blame
        if self.death is None and not self.launcher.alive():
            self.death = EngineDeath(self.launcher.exit_code(), self.launcher.log_tail(LOG_LINES), self.seen - 1)
        if self.death is None:
            return line, verdict, blame
        record = json.loads(line)
        # The failed exchange is the cause (an unsupported verdict's reason would name the feature instead).
        cause = next((f"{c['name']}: {c['detail']}" for c in record["checks"]
                      if c["status"] == "fail" and c["blame"] == "infra"), record["reason"])
        record.update(verdict="error", blame="infra", reason=f"{self.death.summary}; {cause}",
                      engine_death=self.death.to_dict())
        return encode_record(record), "error", "infra"

"""A run's provenance (``run.json``, beside its records): what was tested, where, when, by which command, and how
the run ended."""

from __future__ import annotations

import attrs

from toolmatrix.records.codec import SCHEMA_VERSION, compact, converter
from toolmatrix.records.record import EngineDeath, Word


class ExitStatus(Word):
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ENGINE_DIED = "engine_died"
    INTERNAL_ERROR = "internal_error"  # toolmatrix itself failed outside any one answer
    LOST = "lost"  # an executor lost the shard with its machine: every record an infra error (--record-lost)


@compact
@attrs.frozen
class Run:
    """run.json: what was tested, where and when. ``engine``, ``model`` and ``hardware`` are open mappings
    (their fields are described in run.schema.json) because launchers add what they know."""

    schema_version: int = attrs.field(default=SCHEMA_VERSION, kw_only=True)
    run_id: str
    pair: str  # MODEL@ENGINE, the matrix cell key
    engine: dict
    model: dict
    hardware: dict
    started: str
    finished: str | None
    toolmatrix_version: str
    counts: dict[str, int]
    command: list[str] = attrs.field(factory=list)
    cases: list[str] = attrs.field(factory=list)
    case_shard: str | None = None  # "I/N": the run holds only that slice of the cases (--case-shard)
    batch: str | None = None  # the fan-out (one plan's run on its executor) this run is a shard of (--batch)
    shard: str | None = None  # which shard of that plan (--shard)
    exit_status: ExitStatus | None = None
    engine_death: EngineDeath | None = None
    api: str = "chat"  # the surface every case of the run went over: a cell per model x engine x surface
    fuzz: dict | None = None  # --fuzz: {seed, count, hypothesis}, what draws the generated cases again

    def to_dict(self) -> dict:
        return converter.unstructure(self)

    @property
    def cell_key(self) -> str:
        """The matrix cell: the pair, and the surface where it is not Chat Completions."""
        return self.pair if self.api == "chat" else f"{self.pair} [{self.api}]"

    @classmethod
    def from_dict(cls, data: dict) -> Run:
        return converter.structure({**data, "schema_version": SCHEMA_VERSION}, cls)

    @property
    def model_id(self) -> str:
        return self.model["id"]

    @property
    def engine_id(self) -> str:
        return self.engine["id"]

    def option(self, name: str) -> str | None:
        """The value the run's command gave an option (``--name value`` or ``--name=value``), if it did."""
        for index, arg in enumerate(self.command):
            if arg == name and index + 1 < len(self.command):
                return self.command[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

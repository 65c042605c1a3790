"""A run's provenance (``run.json``, beside its records): what was tested, where, when, by which command, and how
the run ended."""

from __future__ import annotations

from typing import Any

import attrs

from toolmatrix.records.codec import SCHEMA_VERSION, JSONObject, compact, converter, keeps_unknown
from toolmatrix.records.record import LIVE, REPLAY, EngineDeath, Word


class ExitStatus(Word):
    COMPLETE = "complete"
    INTERRUPTED = "interrupted"
    ENGINE_DIED = "engine_died"
    INTERNAL_ERROR = "internal_error"  # toolmatrix itself failed outside any one answer
    LOST = "lost"  # an executor lost the shard with its machine: every record an infra error (--record-lost)


@keeps_unknown
@attrs.frozen
class RunEngine:
    """run.json's ``engine``: which engine answered and how it was started, as its launcher described it (the
    fields are described in run.schema.json); for a parser replay, which release's parsers read the fixtures."""

    id: str
    version: str | None  # as the server reports it, or the binary's --version; a replay's release
    launcher: str  # process | docker | external | replay
    flags: list[str]  # every argument the engine was started with
    tier: str = LIVE  # written on a replay run only
    base_url: str | None = None
    image: str | None = None
    image_digest: str | None = None
    binary: str | None = None
    build: JSONObject | None = None  # what a binary toolmatrix built was built from (its build record)
    cpu: JSONObject | None = None  # what the engine's machine check found before the start
    packages: list[str] | None = None  # a Python engine's exact package versions
    log: str | None = None  # the engine's log, relative to the results directory
    entrypoint: list[str] | None = None  # docker: the container's
    container: str | None = None
    env: list[str] | None = None  # docker: the names of the variables given (values may be secrets)
    gpus: Any = None
    variant: str | None = None  # docker: the image variant of the engine spec
    versions: list[str] | None = None  # replay: the engine's environment (pip freeze)
    skipped_families: dict[str, str] = attrs.field(factory=dict)  # replay: a family not replayed, and why
    extra: JSONObject = attrs.field(factory=dict)  # what else a launcher told (see codec.keeps_unknown)

    @property
    def replay(self) -> bool:
        """A parser-replay run: no model ran, the engine's parsers read recorded text."""
        return self.tier == REPLAY


@keeps_unknown
@attrs.frozen
class RunModel:
    """run.json's ``model``: the model the engine served, its weights and chat template by file name and SHA-256."""

    id: str
    family: str
    served_name: str
    weights: str | None = None
    weights_sha256: str | None = None
    revision: str | None = None
    chat_template: str | None = None  # the file the launcher handed the engine
    chat_template_sha256: str | None = None
    extra: JSONObject = attrs.field(factory=dict)


@compact
@attrs.frozen
class Run:
    """run.json: what was tested, where and when. ``hardware`` is an open mapping (its fields are described in
    run.schema.json): what a machine tells of itself differs from machine to machine."""

    schema_version: int = attrs.field(default=SCHEMA_VERSION, kw_only=True)
    run_id: str
    pair: str  # MODEL@ENGINE, the matrix cell key
    engine: RunEngine
    model: RunModel
    hardware: JSONObject
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
    fuzz: JSONObject | None = None  # --fuzz: {seed, count, hypothesis}, what draws the generated cases again

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = converter.unstructure(self)
        return data

    @property
    def cell_key(self) -> str:
        """The matrix cell: the pair, and the surface where it is not Chat Completions."""
        return self.pair if self.api == "chat" else f"{self.pair} [{self.api}]"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        return converter.structure({**data, "schema_version": SCHEMA_VERSION}, cls)

    @property
    def model_id(self) -> str:
        return self.model.id

    @property
    def engine_id(self) -> str:
        return self.engine.id

    def option(self, name: str) -> str | None:
        """The value the run's command gave an option (``--name value`` or ``--name=value``), if it did."""
        for index, arg in enumerate(self.command):
            if arg == name and index + 1 < len(self.command):
                return self.command[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
        return None

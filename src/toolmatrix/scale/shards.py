"""The fan-out plan: one shard per model x engine x launcher x surface (x case slice, x repeat), as data.

A shard is the unit an executor runs: this machine, a Ray task, a GitHub Actions job or a Kubernetes Job. Each
carries the exact command that runs it (an ordinary single-pair ``pytest`` run writing its own results
directory) and what it needs of the machine, so every executor is generated from the same plan and none
decides anything of its own. ``toolmatrix plan --emit json`` prints it.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.serving.launchers import default_launcher
from toolmatrix.serving.registry import EngineSpec, registry, resolve_model

SURFACES = ("chat",)  # the API surfaces a case is sent over; Chat Completions is the one built so far
PLAN_FORMAT = "toolmatrix-plan"


class PlanError(ToolmatrixError, ValueError):
    """The plan cannot be made: unknown ids, or nothing that can run. The message says which."""


@attrs.frozen
class Shard:
    id: str  # MODEL@ENGINE, then +LAUNCHER unless process, .IofN for a case slice, .rK for a repeat
    model: str
    engine: str
    launcher: str
    surface: str
    case_shard: str | None  # "I/N", or None for the whole library
    repeat: int  # 1 .. plan's repeat: the same pair again, on whatever machine the executor picks
    gpus: int  # GPUs the executor must give it (0: a CPU engine)
    command: tuple[str, ...]  # argv, run from a checkout or an install of toolmatrix
    results_dir: str  # where the command writes, relative to where it runs

    @property
    def pair(self) -> str:
        return f"{self.model}@{self.engine}"

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "command": list(self.command), "pair": self.pair}


@attrs.frozen
class Plan:
    shards: tuple[Shard, ...]
    not_run: tuple[tuple[str, str], ...]  # (pair, why the engine cannot serve it)

    def to_dict(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, "format_version": 1, "shards": [s.to_dict() for s in self.shards],
                "not_run": [{"pair": pair, "reason": why} for pair, why in self.not_run]}


def gpus_needed(engine: EngineSpec, launcher: str) -> int:
    """GPUs a shard asks for: the docker spec's count (``all`` counts as one: each shard gets one GPU of the
    machine its executor picks, as Ray grants and a Kubernetes limit gives); a local process or a URL needs none
    of its own here."""
    if launcher != "docker" or engine.docker is None:
        return 0
    gpus = engine.docker.gpus
    return gpus if isinstance(gpus, int) else (0 if gpus == "none" else 1)


def shard_id(pair: str, launcher: str, case_shard: str | None, repeat: int, repeats: int) -> str:
    text = pair + ("" if launcher == "process" else f"+{launcher}")
    if case_shard:
        text += ".{}of{}".format(*case_shard.split("/"))
    return text + (f".r{repeat}" if repeats > 1 else "")


def plan_shards(engines: Sequence[str], models: Sequence[str], *, launcher: str | None = None,
                case_shards: int = 1, repeat: int = 1, results_root: str = "results",
                pytest_args: Sequence[str] = ("-n", "auto"), batch: str | None = None) -> Plan:
    """Every shard of ``engines`` x ``models``; a pair the engine cannot serve is listed in ``not_run``. Without
    ``launcher`` each engine gets its default (``default_launcher``).

    Each command names its shard (``--shard``) and, given one, the batch (``--batch``): the matrix makes one cell
    of a pair's shards in one batch. An executor that starts every shard from the same plan once (Ray, a plan
    emitted for Kubernetes) passes a fresh batch id; GitHub Actions sets ``TOOLMATRIX_BATCH`` per workflow run."""
    if case_shards < 1 or repeat < 1:
        raise PlanError("case shards and repeats must be at least 1")
    engine_specs, model_specs = registry().engines, registry().models
    problems = [f"unknown engine {e!r}" for e in engines if e not in engine_specs]
    resolved = {}
    for model in models:
        try:
            resolved[model] = resolve_model(model_specs, model)
        except ValueError as exc:
            problems.append(f"unknown model {model!r} ({exc})")
    if problems or not engines or not models:
        raise PlanError("; ".join(problems) or "name at least one engine and one model")
    shards, not_run = [], []
    for engine_id in engines:
        engine = engine_specs[engine_id]
        kind = launcher or default_launcher(None, engine)
        for model_id in models:
            pair = f"{resolved[model_id].id}@{engine_id}"
            refusal = engine.refusal(resolved[model_id], kind)
            if refusal:
                not_run.append((pair, refusal))
                continue
            for slice_ in [None] if case_shards == 1 else [f"{i}/{case_shards}" for i in range(1, case_shards + 1)]:
                for k in range(1, repeat + 1):
                    sid = shard_id(pair, kind, slice_, k, repeat)
                    results = f"{results_root}/{safe_name(sid)}"
                    command = ["pytest", *pytest_args, f"--engine={engine_id}", f"--model={model_id}",
                               f"--launcher={kind}", f"--results-dir={results}", "--no-matrix", f"--shard={sid}"]
                    if batch:
                        command.append(f"--batch={batch}")
                    if slice_:
                        command.append(f"--case-shard={slice_}")
                    shards.append(Shard(sid, model_id, engine_id, kind, SURFACES[0], slice_, k,
                                        gpus_needed(engine, kind), tuple(command), results))
    if not shards:
        raise PlanError("no pair can run: " + "; ".join(f"{pair}: {why}" for pair, why in not_run))
    return Plan(tuple(shards), tuple(not_run))


def new_batch(executor: str) -> str:
    """A batch id for one fan-out: the executor, the time, and a random tail."""
    return f"{executor}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def safe_name(text: str) -> str:
    """A folder or artifact name from a shard id (model ids may hold '/' or ':')."""
    return re.sub(r"[^\w.@+-]+", "_", text)


def with_options(command: Sequence[str], options: Mapping[str, str]) -> tuple[str, ...]:
    """``command`` with each ``--name=value`` of ``options`` in place of the one it holds, or added at the end.

    ``plan_shards`` writes every option it sets as one ``--name=value`` word, so an executor that runs a shard
    differently (Kubernetes: against a sidecar engine, into a volume) changes those words and keeps the rest.
    """
    given = set()
    out = []
    for word in command:
        name = word.partition("=")[0]
        if name in options:
            given.add(name)
            word = f"{name}={options[name]}"
        out.append(word)
    return (*out, *(f"{name}={value}" for name, value in options.items() if name not in given))

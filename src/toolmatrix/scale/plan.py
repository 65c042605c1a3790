"""``toolmatrix engines`` lists the engine specs; ``toolmatrix plan`` prints exactly what a pair would start.

``plan`` starts nothing and pulls nothing: for the docker launcher it prints the container config that
``DockerLauncher`` would hand to the docker SDK (the same ``container_config`` call), as a ``docker run`` line;
for the process launcher, the command line. A pair the engine cannot serve exits 2 with one line saying why.

``plan --emit FORMAT`` takes comma lists of engines and models and writes the fan-out plan (``shards``) instead:
as JSON, as a GitHub Actions workflow, or as Kubernetes Jobs. Pairs that cannot run are named on stderr.
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
from pathlib import Path
from typing import Any, Mapping

from tabulate import tabulate

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.scale.executors import EmitError
from toolmatrix.scale.executors.github import workflow
from toolmatrix.scale.executors.kubernetes import manifests
from toolmatrix.scale.shards import Plan, new_batch, plan_shards
from toolmatrix.serving.launchers import default_launcher
from toolmatrix.serving.launchers.base import LaunchError, docker_of, process_of, weights_of
from toolmatrix.serving.placeholders import render, render_json
from toolmatrix.serving.registry import (
    ANY_FAMILY,
    EngineSpec,
    ModelSpec,
    WeightsSource,
    load_registry,
    resolve_model,
)


def families_summary(engine: EngineSpec) -> str:
    """Which tool-call formats the engine can serve, in a few words."""
    refused = sorted(family for family in engine.cannot_serve if family != ANY_FAMILY)
    if ANY_FAMILY in engine.cannot_serve:
        return f"{len(engine.family_args)} listed"
    return "all" + (f" but {', '.join(refused)}" if refused else "")


def engine_row(engine: EngineSpec) -> dict[str, Any]:
    docker = engine.docker
    return {
        "id": engine.id,
        "title": engine.title,
        "launchers": list(engine.launchers),
        "image": docker.image if docker else None,
        "variants": {name: v.get("image", docker.image) for name, v in docker.variants.items()} if docker else {},
        "gpus": docker.gpus if docker else None,
        "port": engine.port,
        "readiness": [engine.readiness_path, *(f"{s.method} {s.path}" for s in engine.readiness_steps)],
        "weights": engine.weights_kind,
        "families": families_summary(engine),
        "unsupported": dict(engine.unsupported),
    }


def engines_listing(as_json: bool) -> str:
    """Every engine spec, one row each (``engine_row``): a table, or JSON."""
    engines = load_registry()[0]
    rows = [engine_row(engine) for engine in sorted(engines.values(), key=lambda e: e.id)]
    if as_json:
        return json.dumps(rows, indent=2)
    table = [[r["id"], r["title"], ", ".join(r["launchers"]), r["image"] or "-", r["port"], " -> ".join(r["readiness"]),
              r["weights"], r["families"], ", ".join(r["unsupported"]) or "-"] for r in rows]
    return tabulate(table, headers=["id", "engine", "launchers", "image", "port", "readiness", "weights", "formats",
                                    "known unsupported"])


def readiness_lines(engine: EngineSpec, values: Mapping[str, str]) -> list[str]:
    lines = [f"readiness:  GET {engine.readiness_path} until 200 (up to {engine.readiness_timeout_s:.0f}s)"]
    for step in engine.readiness_steps:
        body = f" {json.dumps(render_json(step.json, values))}" if step.json else ""
        expect = ""
        if step.expect:
            expect = f", {step.expect['field']} must hold {render_json(step.expect['contains'], values)!r}"
        lines.append(f"            then {step.method} {step.path}{body}{expect}")
    return lines


def weights_text(model: ModelSpec, source: WeightsSource) -> str:
    from toolmatrix.serving.weights import local_weights

    if source.form == "hub":
        return source.ref + (f" @ {source.revision}" if source.revision else "")
    path = local_weights(model, source, fetch=False)
    if path.exists() or not (source.assembled_from or source.from_gguf):
        return str(path)
    how = f"assembled from {source.assembled_from}" if source.assembled_from else "converted from the GGUF"
    return f"{path} ({how} on first use)"


def docker_plan(engine: EngineSpec, model: ModelSpec, args: argparse.Namespace) -> tuple[list[str], str]:
    """Details and the ``docker run`` line of the config DockerLauncher would start."""
    from toolmatrix.serving.launchers.docker import container_config

    config = container_config(engine, model, slots=args.slots, run_id=args.run_id, variant=args.variant,
                              network=args.network)
    spec = docker_of(engine, args.variant)
    source = weights_of(engine, model)  # container_config has refused a model without them
    details = [
        f"image:      {config.image}" + ("" if spec.pull else f" (built locally, never pulled: {spec.build})"),
        f"weights:    {engine.weights_kind} {weights_text(model, source)}",
        f"tool args:  {shlex.join(engine.tool_args(model)) or '(none: the engine needs no flag for this format)'}",
        f"gpus:       {config.gpus}",
        f"env:        {', '.join(config.env_names) or '-'} (passed-through values are never printed or recorded)",
        *readiness_lines(engine, config.values),
        f"api:        http://127.0.0.1:{config.host_port}{engine.api_prefix}, model "
        f"{render(engine.served_model, config.values)!r} (the launcher picks a free port at start)",
    ]
    return details, config.docker_cli()


def process_plan(engine: EngineSpec, model: ModelSpec, args: argparse.Namespace) -> tuple[list[str], str]:
    """Details and the command line ProcessLauncher would run (on the engine's default port)."""
    from toolmatrix.serving.launchers.process import ProcessLauncher, find_binary, venv_bin

    with tempfile.TemporaryDirectory() as logs:
        launcher = ProcessLauncher(engine, model, slots=args.slots, log_dir=Path(logs))
        argv = launcher.command(engine.port, fetch=False)
    process = process_of(engine)
    venv = process.venv
    if venv:
        binary = str(venv_bin(engine, process.binary))
        install = " && ".join(f"pip install {shlex.join(step)}" for step in venv.steps)
        install += f" && pip uninstall -y {shlex.join(venv.remove)}" if venv.remove else ""
        where = f"binary:     {binary}" + ("" if find_binary(engine) else f" (installed on first use: {install})")
    else:
        found = find_binary(engine)
        binary = str(found) if found else process.binary
        where = f"binary:     {binary}" + ("" if found else " (not found yet: built on first use)")
    source = model.weights_source(engine.weights_kind)
    env = launcher.spec_env()
    details = [where,
               f"weights:    {engine.weights_kind} {weights_text(model, source)}" if source else "weights:    -",
               f"tool args:  {shlex.join(engine.tool_args(model)) or '(none: the engine needs no flag for this format)'}",
               f"env:        {' '.join(f'{k}={v}' for k, v in env.items()) or '-'}",
               *readiness_lines(engine, launcher.values),
               f"api:        the launcher picks a free port at start; model {launcher.served_model()!r}"]
    return details, shlex.join([*(f"{k}={v}" for k, v in env.items()), binary, *argv])


PLANNERS = {"docker": docker_plan, "process": process_plan}


def pair_plan(args: argparse.Namespace) -> str:
    """What ``args.engine`` would start for ``args.model``: the pair, its details, what it does not support and
    the command; a ToolmatrixError (SpecErrors among them) for an unknown id or a pair it cannot serve."""
    engines, models = load_registry()
    if args.engine not in engines:
        raise ToolmatrixError(f"unknown engine {args.engine!r}; known: {', '.join(sorted(engines))}")
    try:
        model = resolve_model(models, args.model)
    except ValueError as exc:
        raise ToolmatrixError(f"unknown model {args.model!r}; known: {', '.join(sorted(models))}; or {exc}") from None
    engine = engines[args.engine]
    launcher = args.launcher or default_launcher(None, engine)  # what the same pytest command would start
    pair = f"{model.id}@{engine.id}"
    refusal = engine.refusal(model, launcher)
    if refusal:
        raise ToolmatrixError(f"{pair} cannot be served: {refusal}")
    try:
        details, command = PLANNERS[launcher](engine, model, args)
    except (LaunchError, KeyError) as exc:  # the pair named before what its spec lacks
        raise ToolmatrixError(f"{pair}: {exc.args[0]}") from None
    unsupported = [f"unsupported: {feature}: {reason}"
                   for feature, reason in sorted(engine.pair_unsupported(model).items())]
    return "\n".join([f"pair:       {pair} ({model.title} on {engine.title}), {launcher} launcher", *details,
                      *unsupported, "", command])


def emit_json(plan: Plan, args: argparse.Namespace) -> str:
    return json.dumps(plan.to_dict(), indent=2) + "\n"


def emit_github(plan: Plan, args: argparse.Namespace) -> str:
    return workflow(plan, command_line=command_line(args), runs_on=args.runs_on, gpu_runs_on=args.gpu_runs_on,
                    baseline=args.baseline)


def emit_kubernetes(plan: Plan, args: argparse.Namespace) -> str:
    if not args.toolmatrix_image:
        raise EmitError("--emit kubernetes needs --toolmatrix-image IMAGE (none is published: build one, docs/scale-out.md)")
    return manifests(plan, command_line=command_line(args), toolmatrix_image=args.toolmatrix_image,
                     namespace=args.namespace, results_claim=args.results_claim, models_claim=args.models_claim,
                     env_secret=args.env_secret)


EMITTERS = {"json": emit_json, "github-actions": emit_github, "kubernetes": emit_kubernetes}


def command_line(args: argparse.Namespace) -> str:
    """The command as it was typed (``cli.main`` keeps its words), for the header of a generated file."""
    return shlex.join(["toolmatrix", *args.argv])


def emit_plan(args: argparse.Namespace) -> tuple[Plan, str]:
    """Every pair of the lists planned, and the plan written in the ``--emit`` format; a ToolmatrixError (a
    SpecErrors, PlanError or EmitError) before anything is written."""
    from toolmatrix.scale.pairs import split_ids

    # Jobs applied from one file are one fan-out; a workflow run names its own batch (TOOLMATRIX_BATCH).
    batch = args.batch or (new_batch("kubernetes") if args.emit == "kubernetes" else None)
    plan = plan_shards(split_ids(args.engine), split_ids(args.model), launcher=args.launcher,
                       case_shards=args.case_shards, repeat=args.repeat, results_root=args.results_root, batch=batch)
    return plan, EMITTERS[args.emit](plan, args)

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
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

from tabulate import tabulate

from toolmatrix.base.argtypes import positive_int
from toolmatrix.base.atomic import write_text
from toolmatrix.base.specs import SpecErrors
from toolmatrix.scale.executors import EmitError
from toolmatrix.scale.executors.github import DEFAULT_GPU_RUNS_ON, DEFAULT_RUNS_ON, workflow
from toolmatrix.scale.executors.kubernetes import (
    DEFAULT_ENV_SECRET,
    DEFAULT_MODELS_CLAIM,
    DEFAULT_RESULTS_CLAIM,
    manifests,
)
from toolmatrix.scale.shards import Plan, PlanError, new_batch, plan_shards
from toolmatrix.serving.launchers import default_launcher
from toolmatrix.serving.launchers.base import LaunchError, docker_of, process_of, weights_of
from toolmatrix.serving.placeholders import render, render_json
from toolmatrix.serving.registry import (
    ANY_FAMILY,
    LAUNCHER_KINDS,
    EngineSpec,
    ModelSpec,
    WeightsSource,
    load_registry,
    resolve_model,
)

USAGE_ERROR = 2


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


def _registry() -> tuple[dict, dict] | None:
    """Engines and models, or None after printing every problem in the data files."""
    try:
        return load_registry()
    except SpecErrors as exc:
        print(exc, file=sys.stderr)
        return None


def cmd_engines(args: argparse.Namespace) -> int:
    registry = _registry()
    if registry is None:
        return USAGE_ERROR
    engines = registry[0]
    rows = [engine_row(engine) for engine in sorted(engines.values(), key=lambda e: e.id)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [[r["id"], r["title"], ", ".join(r["launchers"]), r["image"] or "-", r["port"], " -> ".join(r["readiness"]),
              r["weights"], r["families"], ", ".join(r["unsupported"]) or "-"] for r in rows]
    print(tabulate(table, headers=["id", "engine", "launchers", "image", "port", "readiness", "weights", "formats",
                                   "known unsupported"]))
    return 0


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


def cmd_plan(args: argparse.Namespace) -> int:
    if args.emit:
        return cmd_emit(args)
    registry = _registry()
    if registry is None:
        return USAGE_ERROR
    engines, models = registry
    if args.engine not in engines:
        print(f"toolmatrix plan: unknown engine {args.engine!r}; known: {', '.join(sorted(engines))}", file=sys.stderr)
        return USAGE_ERROR
    try:
        model = resolve_model(models, args.model)
    except ValueError as exc:
        print(f"toolmatrix plan: unknown model {args.model!r}; known: {', '.join(sorted(models))}; or {exc}",
              file=sys.stderr)
        return USAGE_ERROR
    engine = engines[args.engine]
    launcher = args.launcher or default_launcher(None, engine)  # what the same pytest command would start
    pair = f"{model.id}@{engine.id}"
    refusal = engine.refusal(model, launcher)
    if refusal:
        print(f"toolmatrix plan: {pair} cannot be served: {refusal}", file=sys.stderr)
        return USAGE_ERROR
    try:
        details, command = PLANNERS[launcher](engine, model, args)
    except (LaunchError, KeyError) as exc:
        print(f"toolmatrix plan: {pair}: {exc.args[0]}", file=sys.stderr)
        return USAGE_ERROR
    print(f"pair:       {pair} ({model.title} on {engine.title}), {launcher} launcher")
    print("\n".join(details))
    for feature, reason in sorted(engine.pair_unsupported(model).items()):
        print(f"unsupported: {feature}: {reason}")
    print(f"\n{command}")
    return 0


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


def cmd_emit(args: argparse.Namespace) -> int:
    """Plan every pair of the lists and write it in the ``--emit`` format; nothing is written on an error."""
    from toolmatrix.scale.pairs import split_ids

    try:
        # Jobs applied from one file are one fan-out; a workflow run names its own batch (TOOLMATRIX_BATCH).
        batch = args.batch or (new_batch("kubernetes") if args.emit == "kubernetes" else None)
        plan = plan_shards(split_ids(args.engine), split_ids(args.model), launcher=args.launcher,
                           case_shards=args.case_shards, repeat=args.repeat, results_root=args.results_root,
                           batch=batch)
        text = EMITTERS[args.emit](plan, args)
    except SpecErrors as exc:
        print(exc, file=sys.stderr)
        return USAGE_ERROR
    except (PlanError, EmitError) as exc:
        print(f"toolmatrix plan: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for pair, why in plan.not_run:
        print(f"toolmatrix plan: not run: {pair}: {why}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)  # .github/workflows/ in a new repository
        write_text(args.output, text)
    except OSError as exc:
        print(f"toolmatrix plan: -o {args.output}: cannot write: {exc.strerror}", file=sys.stderr)
        return USAGE_ERROR
    return 0


def _labels(text: str) -> tuple[str, ...]:
    labels = tuple(label.strip() for label in text.split(",") if label.strip())
    if not labels:
        raise argparse.ArgumentTypeError(f"expected runner labels, comma separated (got {text!r})")
    return labels


def register(subparsers: Any) -> None:
    """Add ``engines`` and ``plan`` to the ``toolmatrix`` command."""
    engines = subparsers.add_parser(
        "engines", help="list the engine specs: images, readiness, formats, known gaps",
        description="List the engine specs as a table (or --json): each engine's launchers, image, port, readiness "
                    "steps, kind of weights, model formats and known unsupported features.")
    engines.add_argument("--json", action="store_true", help="machine-readable output")
    engines.set_defaults(func=cmd_engines)
    plan = subparsers.add_parser(
        "plan", help="print exactly what would be started for a pair, without starting it",
        description="Print exactly what would be started for one MODEL@ENGINE pair (the docker run line or the "
                    "command line, with its weights, tool flags and readiness steps) without starting or pulling "
                    "anything, or with --emit write the fan-out plan of every pair of the lists as JSON, a GitHub "
                    "Actions workflow or Kubernetes Jobs.")
    plan.add_argument("--engine", required=True, metavar="ENGINE", help="engine spec id (toolmatrix engines)")
    plan.add_argument("--model", required=True, metavar="MODEL",
                      help="model id from engines/models.yaml, or a source such as hf:ORG/NAME or gguf:/path/x.gguf")
    plan.add_argument("--launcher", choices=LAUNCHER_KINDS,
                      help="default: process, as pytest's own default (docker where you name it)")
    plan.add_argument("--variant", metavar="NAME", help="a docker variant of the engine spec (e.g. llamacpp: cpu)")
    plan.add_argument("--network", choices=("host", "bridge"), default="host",
                      help="host networking (default) or a published port")
    plan.add_argument("--slots", type=int, default=2, metavar="N", help="parallel request slots (default 2)")
    plan.add_argument("--run-id", default="<run-id>", metavar="ID", help="run id for the container labels")
    emit = plan.add_argument_group("fan-out (--emit: --engine and --model take comma lists)")
    emit.add_argument("--emit", choices=tuple(EMITTERS), help="write the plan of every pair as data, a GitHub "
                      "Actions workflow or Kubernetes Jobs, instead of one pair's launch")
    emit.add_argument("--case-shards", type=positive_int, default=1, metavar="N",
                      help="split each pair's cases into N shards (default 1)")
    emit.add_argument("--repeat", type=positive_int, default=1, metavar="K", help="run each shard K times (default 1)")
    emit.add_argument("--results-root", default="results", metavar="DIR",
                      help="the shards write DIR/<shard> (default results)")
    emit.add_argument("--batch", metavar="ID", help="the fan-out's id in every shard's command (kubernetes: a new "
                      "one by default; github-actions: each workflow run's own)")
    emit.add_argument("-o", "--output", type=Path, metavar="FILE", help="write FILE instead of stdout")
    emit.add_argument("--runs-on", type=_labels, default=DEFAULT_RUNS_ON, metavar="LABELS",
                      help=f"github-actions: runner labels of shards without GPU (default {','.join(DEFAULT_RUNS_ON)})")
    emit.add_argument("--gpu-runs-on", type=_labels, default=DEFAULT_GPU_RUNS_ON, metavar="LABELS",
                      help=f"github-actions: runner labels of GPU shards (default {','.join(DEFAULT_GPU_RUNS_ON)})")
    emit.add_argument("--baseline", metavar="PATH", help="github-actions: gate each shard against PATH/<shard>, "
                      "a results root of an earlier run of the same plan in the repository")
    emit.add_argument("--toolmatrix-image", metavar="IMAGE", help="kubernetes (required): an image with "
                      "toolmatrix installed; none is published (docs/scale-out.md: how to build one)")
    emit.add_argument("--namespace", metavar="NS", help="kubernetes: the Jobs' namespace (default: none given)")
    emit.add_argument("--results-claim", default=DEFAULT_RESULTS_CLAIM, metavar="PVC",
                      help=f"kubernetes: claim for the results, /results/<shard>/<pod> (default {DEFAULT_RESULTS_CLAIM})")
    emit.add_argument("--models-claim", default=DEFAULT_MODELS_CLAIM, metavar="PVC",
                      help=f"kubernetes: claim holding local weights at its root (default {DEFAULT_MODELS_CLAIM})")
    emit.add_argument("--env-secret", default=DEFAULT_ENV_SECRET, metavar="SECRET",
                      help=f"kubernetes: optional Secret for variables such as HF_TOKEN (default {DEFAULT_ENV_SECRET})")
    plan.set_defaults(func=cmd_plan)

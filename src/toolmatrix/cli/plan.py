"""``toolmatrix engines`` and ``plan``: the engine specs listed, and what a pair would start or a fan-out would
run, planned without starting anything (``toolmatrix.scale.plan``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from toolmatrix.base.argtypes import positive_int
from toolmatrix.base.errors import ToolmatrixError


def _cmd_engines(args: argparse.Namespace) -> int:
    from toolmatrix.scale.plan import engines_listing

    print(engines_listing(args.json))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from toolmatrix.scale.plan import pair_plan

    if args.emit:
        return _cmd_emit(args)
    print(pair_plan(args))
    return 0


def _cmd_emit(args: argparse.Namespace) -> int:
    """Plan every pair of the lists and write it in the ``--emit`` format; nothing is written on an error."""
    from toolmatrix.base.atomic import write_text
    from toolmatrix.scale.plan import emit_plan

    plan, text = emit_plan(args)
    for pair, why in plan.not_run:
        print(f"toolmatrix plan: not run: {pair}: {why}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)  # .github/workflows/ in a new repository
        write_text(args.output, text)
    except OSError as exc:
        raise ToolmatrixError(f"-o {args.output}: cannot write: {exc.strerror}") from exc
    return 0


def _labels(text: str) -> tuple[str, ...]:
    labels = tuple(label.strip() for label in text.split(",") if label.strip())
    if not labels:
        raise argparse.ArgumentTypeError(f"expected runner labels, comma separated (got {text!r})")
    return labels


def register(subparsers: Any) -> None:
    """Add ``engines`` and ``plan`` to the ``toolmatrix`` command."""
    from toolmatrix.scale.executors.github import DEFAULT_GPU_RUNS_ON, DEFAULT_RUNS_ON
    from toolmatrix.scale.executors.kubernetes import DEFAULT_ENV_SECRET, DEFAULT_MODELS_CLAIM, DEFAULT_RESULTS_CLAIM
    from toolmatrix.scale.plan import EMITTERS
    from toolmatrix.serving.registry import LAUNCHER_KINDS

    """Add ``engines`` and ``plan`` to the ``toolmatrix`` command."""
    engines = subparsers.add_parser(
        "engines", help="list the engine specs: images, readiness, formats, known gaps",
        description="List the engine specs as a table (or --json): each engine's launchers, image, port, readiness "
                    "steps, kind of weights, model formats and known unsupported features.")
    engines.add_argument("--json", action="store_true", help="machine-readable output")
    engines.set_defaults(func=_cmd_engines)
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
    plan.set_defaults(func=_cmd_plan)

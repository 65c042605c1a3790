"""Several pairs in one invocation: ``pytest --engine=vllm,sglang --model=qwen3,llama3.1``.

The cross product of the two lists runs one pair after another (two engines at once would compete for GPU
memory), each in a child ``pytest`` with the same arguments but one engine and one model. So every pair is an
ordinary run: its engine started once, its results in ``DIR/MODEL@ENGINE`` when ``--results-dir DIR`` is given.
A pair the engine cannot serve is not started and is listed as ``not run`` with the reason. SIGINT or SIGTERM
is passed to the running child, which stops its engine in order, and no further pair starts. At the end come
one matrix page of every pair (``DIR/matrix``), a line per pair, and the worst exit code of the pairs
(``exitcodes.SEVERITY``).

With ``--base-url`` there is one server: ``--model`` may list several names it serves, ``--engine`` only one.
A problem with the lists is a ``ToolmatrixError``, raised before anything starts (the plugin makes it pytest's
usage error); what the invocation asked for comes in a ``PairsRequest``, so nothing here reads pytest's config.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import attrs

from toolmatrix.base import exitcodes
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import SpecErrors
from toolmatrix.records import RUN
from toolmatrix.scale.shards import safe_name
from toolmatrix.serving.launchers import default_launcher
from toolmatrix.serving.launchers.process import die_with_parent
from toolmatrix.serving.registry import load_registry, resolve_model

LISTS = ("--engine", "--model")
RESULTS = "--results-dir"


def split_ids(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def wants_pairs(engines: str | None, models: str | None) -> bool:
    """True when --engine or --model lists several ids."""
    return any("," in (value or "") for value in (engines, models))


@attrs.frozen
class PairsRequest:
    """The invocation that asked for several pairs: the options these runs read, and its own arguments."""

    engines: str | None  # --engine, a comma list
    models: str | None  # --model, a comma list
    base_url: str | None
    launcher: str | None  # --launcher; None: each engine's default
    results: str | None  # --results-dir
    no_matrix: bool  # --no-matrix
    args: tuple[str, ...]  # the invocation's arguments, passed on to each pair's child pytest
    cwd: Path  # where it was invoked: relative paths among args are relative to it


@attrs.frozen
class Pair:
    model: str
    engine: str | None  # None: --base-url without --engine
    refusal: str | None = None  # why the engine cannot serve the model; such a pair is not started

    @property
    def name(self) -> str:
        return f"{self.model}@{self.engine or 'external'}"

    def results_dir(self, root: Path) -> Path:
        return root / safe_name(self.name)  # a served name such as Qwen/Qwen3-8B is one folder


def plan_pairs(engine_list: str | None, model_list: str | None, base_url: str | None,
               launcher: str | None) -> list[Pair]:
    """Every pair of the lists, engine by engine; unknown ids are a usage error, before anything starts. Without
    ``launcher`` each engine gets its default (``default_launcher``), as its pair's own run then picks it."""
    engine_ids, model_ids = split_ids(engine_list), split_ids(model_list)
    if not model_ids:
        raise ToolmatrixError("--model is required with --engine/--base-url (e.g. --model=gemma3-270m)")
    if base_url and len(engine_ids) > 1:
        raise ToolmatrixError(f"--base-url reaches one server: --engine names one engine, not {engine_list!r}")
    try:
        engines, models = load_registry()
    except SpecErrors as exc:
        raise ToolmatrixError("invalid toolmatrix data:\n" + str(exc)) from None
    problems = [f"--engine {e!r}: unknown engine" for e in engine_ids if e not in engines]
    specs = {}
    for model in [] if base_url else model_ids:  # against a URL a model is any name the server serves
        try:
            specs[model] = resolve_model(models, model)  # a registry id or a source such as hf:ORG/NAME
        except ValueError as exc:
            problems.append(f"--model {model!r}: unknown model; {exc}")
    if problems:
        raise ToolmatrixError("\n".join(problems) + f"\nknown engines: {', '.join(sorted(engines))}"
                                f"\nknown models: {', '.join(sorted(models))}")
    if base_url or launcher == "external":  # nothing is started: the server serves what it serves
        named: list[str | None] = list(engine_ids) or [None]
        return [Pair(model, engine) for engine in named for model in model_ids]
    return [Pair(model, engine, engines[engine].refusal(specs[model], launcher or default_launcher(None, engines[engine])))
            for engine in engine_ids for model in model_ids]


def passed_on(args: Sequence[str], dropped: Sequence[str] = (*LISTS, RESULTS)) -> list[str]:
    """The invocation's arguments without ``dropped`` options (``--opt value`` or ``--opt=value``)."""
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in dropped:
            skip_value = True  # `--engine a,b`: the value is the next argument
        elif not arg.startswith(tuple(f"{option}=" for option in dropped)):
            kept.append(arg)
    return kept


def absolute_cases(args: Sequence[str], cwd: Path) -> list[str]:
    """``--cases`` paths made absolute: a shard runs in a folder of its own on its node, where a relative path
    would name nothing (on other machines the same absolute path must hold the same files)."""
    out: list[str] = []
    for arg in args:
        if out and out[-1] == "--cases":
            arg = str(cwd / arg)
        elif arg.startswith("--cases="):
            arg = "--cases=" + str(cwd / arg.partition("=")[2])
        out.append(arg)
    return out


def child_args(args: Sequence[str], pair: Pair, results: Path | None) -> list[str]:
    """The invocation's arguments with the pair's one engine, one model and results directory."""
    kept = passed_on(args)
    kept.append(f"--model={pair.model}")
    if pair.engine:
        kept.append(f"--engine={pair.engine}")
    if results is not None:
        kept.append(f"{RESULTS}={results}")
    return kept


class PairRunner:
    """Runs the children one at a time and passes SIGINT/SIGTERM on to the one running."""

    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.child: subprocess.Popen | None = None
        self.stopped_by: int | None = None

    def on_signal(self, signum: int, frame: Any) -> None:
        self.stopped_by = signum
        if self.child is not None:
            self.child.send_signal(signum)  # a no-op once the child has been reaped

    def run(self, args: list[str]) -> int:
        # Its own session: a Ctrl-C in the terminal reaches the child once, through on_signal, not twice.
        self.child = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=self.cwd,
                                      start_new_session=True,
                                      # a child whose parent was killed outright gets SIGTERM: it stops its engine
                                      preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
        if self.stopped_by is not None:  # the signal came while the child was being started
            self.child.send_signal(self.stopped_by)
        try:
            return self.child.wait()
        finally:
            self.child = None


def _counts(results: Path | None) -> str:
    if results is None:
        return ""
    try:
        counts = json.loads((results / RUN).read_text())["counts"]
    except (TypeError, OSError, ValueError, KeyError):
        return ""
    return "; " + ", ".join(f"{verdict} {number}" for verdict, number in counts.items())


def run_pairs(request: PairsRequest) -> int:
    """Run every pair of --engine × --model in turn; returns the worst exit code of those that ran."""
    pairs = plan_pairs(request.engines, request.models, request.base_url, request.launcher)
    if all(pair.refusal for pair in pairs):
        raise ToolmatrixError("no pair can run:\n" + "\n".join(f"{p.name}: {p.refusal}" for p in pairs))
    root = Path(request.results) if request.results else None
    runner = PairRunner(request.cwd)
    previous = {sig: signal.signal(sig, runner.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    outcomes: dict[Pair, int] = {}
    try:
        for number, pair in enumerate(pairs, 1):
            if runner.stopped_by is not None:
                break
            print(f"toolmatrix: pair {number}/{len(pairs)}: {pair.name}"
                  + (f": not run: {pair.refusal}" if pair.refusal else ""), flush=True)
            if pair.refusal:
                continue
            results = pair.results_dir(root) if root else None
            outcomes[pair] = runner.run(child_args(request.args, pair, results))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    page = None
    if root and not request.no_matrix:
        page = _combined_page(root, [pair.results_dir(root) for pair in outcomes])
    _print_summary(pairs, outcomes, root, page, runner.stopped_by)
    codes = list(outcomes.values()) + ([exitcodes.ExitCode.INTERRUPTED] if runner.stopped_by else [])
    return exitcodes.worst(codes)


def run_on_cluster(request: PairsRequest, address: str) -> int:
    """``--ray ADDRESS``: every pair a shard, run as a Ray task on the cluster; one page of all their results."""
    from toolmatrix.scale.executors.ray import run_on_ray
    from toolmatrix.scale.shards import PlanError, new_batch, plan_shards

    if request.base_url:
        raise ToolmatrixError("--ray fans out pairs whose engines the suite starts; --base-url reaches one server")
    if not request.results:
        raise ToolmatrixError("--ray needs --results-dir DIR: the shards' results come back into it")
    try:
        args = passed_on(request.args, (*LISTS, RESULTS, "--ray"))
        plan = plan_shards(split_ids(request.engines), split_ids(request.models), launcher=request.launcher,
                           pytest_args=absolute_cases(args, request.cwd), batch=new_batch("ray"))
    except PlanError as exc:
        raise ToolmatrixError(f"--ray: {exc}") from None
    for pair, why in plan.not_run:
        print(f"toolmatrix: {pair}: not run: {why}", flush=True)
    root = Path(request.results)
    filed = run_on_ray(plan, address, root, echo=lambda line: print(line, flush=True))  # a ClusterError as it is
    dirs = [f.results for f in filed if f.results]
    page = None if request.no_matrix or not dirs else _combined_page(root, dirs)
    lost = sum(1 for f in filed if f.exit_code is None)
    print(f"{'=' * 20} toolmatrix: {len(filed)} shards on Ray, {lost} lost {'=' * 20}"
          + (f"\nmatrix page of every shard: {page}" if page else ""), flush=True)
    return exitcodes.worst([exitcodes.SHARD_LOST if f.exit_code is None else f.exit_code for f in filed])


def _combined_page(root: Path, dirs: list[Path]) -> Path | None:
    from toolmatrix.matrix import build_matrix

    found = [d for d in dirs if (d / RUN).is_file()]
    if not found:
        return None
    try:
        build_matrix(found, root / "matrix")
    except Exception as exc:  # noqa: BLE001 - every pair's results are already on disk
        print(f"toolmatrix: combined matrix page not built: {exc}", flush=True)
        return None
    return root / "matrix" / "index.html"


def _print_summary(pairs: list[Pair], outcomes: dict[Pair, int], root: Path | None, page: Path | None,
                   stopped_by: int | None) -> None:
    lines = [f"{'=' * 20} toolmatrix: {len(outcomes)} of {len(pairs)} pairs run {'=' * 20}"]
    for pair in pairs:
        results = pair.results_dir(root) if root else None
        if pair in outcomes:
            code = outcomes[pair]
            where = f"; {results}" if results else ""
            lines.append(f"{pair.name}: exit {code} ({exitcodes.meaning(code)}){_counts(results)}{where}")
        elif pair.refusal:
            lines.append(f"{pair.name}: not run: {pair.refusal}")
        else:
            why = f"stopped by {signal.Signals(stopped_by).name}" if stopped_by is not None else "stopped"
            lines.append(f"{pair.name}: not run: {why}")
    if page:
        lines.append(f"matrix page of every pair: {page}")
    print("\n".join(lines), flush=True)

"""The ``toolmatrix`` command: thin wrappers over the library (each subcommand registered by its module)."""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from pathlib import Path

from toolmatrix.base.specs import SpecErrors
from toolmatrix.serving.runinfo import toolmatrix_version


def _cmd_validate(args: argparse.Namespace) -> int:
    from toolmatrix.library.cases import load_cases

    try:
        cases = load_cases([Path(p) for p in args.paths])
    except SpecErrors as exc:
        print(exc, file=sys.stderr)
        return 2
    categories = sorted({c.category for c in cases})
    print(f"{len(cases)} cases in {len(categories)} categories: {', '.join(categories)}")
    return 0


def _cmd_check_results(args: argparse.Namespace) -> int:
    from toolmatrix.records import ResultsError, check_results, run_dirs

    missing = [d for d in args.dirs if not Path(d).is_dir()]
    if missing:  # a usage error, as everywhere in toolmatrix (exit 2); 1 says the results themselves are wrong
        print(f"toolmatrix check-results: not a directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    problems: list[str] = []
    checked = 0
    for given in args.dirs:  # a results directory, or a folder of them (a snapshot), as show, gate and matrix take
        try:
            found = run_dirs(Path(given))
        except ResultsError as exc:
            problems.append(str(exc))
            continue
        checked += len(found)
        problems += [p for run in found for p in check_results(run)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{checked} result dir(s): {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


def _cmd_install(args: argparse.Namespace) -> int:
    from toolmatrix.serving.launchers import LaunchError
    from toolmatrix.serving.launchers.base import process_of
    from toolmatrix.serving.launchers.process import find_binary, install_binary
    from toolmatrix.serving.registry import load_engines

    engines = {engine_id: spec for engine_id, spec in load_engines().items() if spec.process}
    engine = engines.get(args.engine)
    if engine is None:
        close = difflib.get_close_matches(args.engine, engines, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(f"toolmatrix install: no process launcher for engine {args.engine!r}{hint}; engines with one: "
              f"{', '.join(sorted(engines))}", file=sys.stderr)
        return 2
    try:
        # An install script is idempotent and knows what its build must hold (llama-server's: the replay harness).
        print((None if process_of(engine).install else find_binary(engine)) or install_binary(engine))
    except LaunchError as exc:
        print(f"toolmatrix install: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolmatrix", description="Tool-calling compatibility matrix. The suite itself runs under pytest "
        "(pytest -n 2 --engine=llamacpp --model=qwen2.5-coder-0.5b --results-dir results/local); these commands "
        "install engines, check cases and results, build the matrix page, gate, plan and replay.")
    parser.add_argument("--version", action="version", version=f"toolmatrix {toolmatrix_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser(
        "validate", help="validate case files (default: the built-in library)",
        description="Load case files (default: the built-in library) as a run would, checked against the case "
                    "schema and the built-in library, and print how many cases they hold in which categories, or "
                    "every problem found with its file, line and JSON path (exit 2).")
    validate.add_argument("paths", nargs="*", default=[], help="case files or folders (default: the built-in library)")
    validate.set_defaults(func=_cmd_validate)
    check = sub.add_parser(
        "check-results", help="validate results directories against their JSON Schemas",
        description="Check results directories (or folders of them, a snapshot): run.json and every line of "
                    "results.jsonl against their JSON Schemas, and the records against run.json's counts; print "
                    "every problem found (exit 1 where there is one, 2 where a path is not a directory).")
    check.add_argument("dirs", nargs="+", help="results directories (each holding results.jsonl and run.json), or "
                                               "folders of them (a snapshot)")
    check.set_defaults(func=_cmd_check_results)
    install = sub.add_parser(
        "install", help="build/fetch an engine's local binary into the cache (e.g. llamacpp)",
        description="Build or install the local binary of an engine that has a process launcher into toolmatrix's "
                    "cache (llama-server from source, a Python engine into its own virtual environment) and print "
                    "its path.")
    install.add_argument("engine", help="an engine spec with a process launcher, e.g. llamacpp, vllm, transformers")
    install.set_defaults(func=_cmd_install)
    from toolmatrix.library import casetable
    casetable.register(sub)
    from toolmatrix import matrix
    from toolmatrix.cli import demo, releases
    from toolmatrix.library import bfcl
    from toolmatrix.report import gate, show
    from toolmatrix.scale import plan
    bfcl.register(sub)
    demo.register(sub)
    releases.register(sub)
    matrix.register(sub)
    gate.register(sub)
    plan.register(sub)
    show.register(sub)
    from toolmatrix.library import fuzzkeep
    fuzzkeep.register(sub)
    from toolmatrix.replay import cli as replay_cli
    replay_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a generated file names the command that wrote it
    if args.command in ("validate", "cases") and not args.paths:
        from toolmatrix.serving.registry import data_root

        args.paths = [str(data_root() / "cases")]
    try:
        return args.func(args)
    except BrokenPipeError:  # `toolmatrix show … | head`: the reader stopped reading; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return 128 + signal.SIGPIPE  # what a command killed by SIGPIPE reports to a pipefail shell


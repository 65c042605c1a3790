"""The ``toolmatrix`` command: thin wrappers over the library, each area's subcommands registered by its module
here (``library``, ``report``, ``engines``, ``plan``, ``matrix``, ``replay``, ``demo``, ``releases``). A
subcommand raises a ``ToolmatrixError`` where it cannot go on; ``main`` alone prints it, as one
``toolmatrix SUBCOMMAND: message`` on stderr, and exits with the status it carries."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import SpecErrors
from toolmatrix.serving.runinfo import toolmatrix_version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolmatrix", description="Tool-calling compatibility matrix. The suite itself runs under pytest "
        "(pytest -n 2 --engine=llamacpp --model=qwen2.5-coder-0.5b --results-dir results/local); these commands "
        "install engines, check cases and results, build the matrix page, gate, plan and replay.")
    parser.add_argument("--version", action="version", version=f"toolmatrix {toolmatrix_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    from toolmatrix.cli import demo, engines, library, matrix, plan, releases, replay, report

    # In the order `toolmatrix --help` has always listed them (the CLI reference is generated from it).
    for add in (library.register_validate, report.register_check_results, engines.register, library.register_cases,
                library.register_bfcl, demo.register, releases.register, matrix.register, report.register_gate,
                plan.register, report.register_show, library.register_fuzz_keep, replay.register):
        add(sub)
    _name_each(parser)
    return parser


def _name_each(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's parser sets ``prog`` (``toolmatrix matrix build``) on what it parses: the name its errors
    are said under. The innermost subcommand's is the one left."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                subparser.set_defaults(prog=subparser.prog)
                _name_each(subparser)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a generated file names the command that wrote it
    if args.command in ("validate", "cases") and not args.paths:
        from toolmatrix.serving.registry import data_root

        args.paths = [str(data_root() / "cases")]
    try:
        return args.func(args)
    except ToolmatrixError as exc:  # the one place a command's error is said: its line, its status
        # A data file's problems, one a line and each naming its file and line, under a line that says so.
        said = f"invalid data file:\n{exc}" if isinstance(exc, SpecErrors) else str(exc)
        print(f"{args.prog}: {said}", file=sys.stderr)
        return exc.status
    except BrokenPipeError:  # `toolmatrix show … | head`: the reader stopped reading; no traceback for that
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
        return 128 + signal.SIGPIPE  # what a command killed by SIGPIPE reports to a pipefail shell


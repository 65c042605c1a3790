"""``toolmatrix install``: an engine's local binary or virtual environment, built into toolmatrix's cache."""

from __future__ import annotations

import argparse
import difflib

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import CommandExit


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
        raise ToolmatrixError(f"no process launcher for engine {args.engine!r}{hint}; engines with one: "
                              f"{', '.join(sorted(engines))}")
    try:
        # An install script is idempotent and knows what its build must hold (llama-server's: the replay harness).
        print((None if process_of(engine).install else find_binary(engine)) or install_binary(engine))
    except LaunchError as exc:  # a build that failed: the engine is known, the answer is no (1)
        raise ToolmatrixError(str(exc), status=CommandExit.NO) from exc
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    install = sub.add_parser(
        "install", help="build/fetch an engine's local binary into the cache (e.g. llamacpp)",
        description="Build or install the local binary of an engine that has a process launcher into toolmatrix's "
                    "cache (llama-server from source, a Python engine into its own virtual environment) and print "
                    "its path.")
    install.add_argument("engine", help="an engine spec with a process launcher, e.g. llamacpp, vllm, transformers")
    install.set_defaults(func=_cmd_install)

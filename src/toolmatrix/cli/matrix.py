"""``toolmatrix matrix build``: results directories in, the matrix page out (``toolmatrix.matrix``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from toolmatrix.base.argtypes import positive_int
from toolmatrix.base.errors import ToolmatrixError


def _cmd_build(args: argparse.Namespace) -> int:
    from toolmatrix.matrix import build_matrix
    from toolmatrix.matrix.figures import percent

    if not args.results and not args.versions:
        raise ToolmatrixError("name a RESULTS directory or a --versions FILE")
    try:
        report = build_matrix([Path(p) for p in args.results], args.output, title=args.title, jobs=args.jobs,
                              triage=args.triage, versions=args.versions)
    except OSError as exc:  # the output side: inputs never raise
        raise ToolmatrixError(f"cannot write {exc.filename or args.output}: {exc.strerror}") from exc
    for skipped in report.skipped:
        print(f"skipped: {skipped.reason}", file=sys.stderr)
    for cell in report.cells:
        rate = percent(cell.pass_rate)  # as the page and matrix.md print it
        since = f", {cell.newly_failing} newly failing, {cell.newly_passing} newly passing" if cell.previous else ""
        runs = f", {cell.runs} runs, {cell.mixed} mixed" if cell.runs > 1 else ""
        print(f"{cell.pair}: {rate} of {cell.total} ({cell.path}{runs}{since})")
    if report.superseded:
        print(f"{len(report.superseded)} older run(s) not shown (newer runs of the same pair win)")
    if not report.outputs:
        raise ToolmatrixError("no usable results directory among the inputs")
    print("wrote " + ", ".join(str(p) for p in report.outputs))
    return 2 if args.strict and report.skipped else 0  # an input error, as when nothing was usable


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``toolmatrix matrix build RESULTS... -o DIR``."""
    parser = subparsers.add_parser(
        "matrix", help="build the compatibility matrix page from results directories",
        description="Build the compatibility matrix page from results directories: matrix build merges them into "
                    "index.html, matrix.md and matrix.json.")
    commands = parser.add_subparsers(dest="matrix_command", required=True, metavar="COMMAND")
    build = commands.add_parser(
        "build", help="merge results directories into index.html, matrix.md and matrix.json",
        description="Merge results directories into DIR/index.html, DIR/matrix.md and DIR/matrix.json. The newest "
                    "run of each MODEL@ENGINE pair wins, with the newest runs of the same configuration on other "
                    "hosts or case shards (one cell; cases their verdicts disagree on are mixed); the newest run "
                    "not in the cell gives the history. Unusable inputs are reported and skipped. Exit status: 0 "
                    "built; 2 nothing usable, or (--strict) any input skipped.")
    build.add_argument("results", nargs="*", metavar="RESULTS", help="results directory, or a directory holding some")
    build.add_argument("-o", "--output", metavar="DIR", type=Path, required=True, help="where to write the matrix")
    build.add_argument("--title", metavar="TEXT", default="toolmatrix", help="page title (default: toolmatrix)")
    build.add_argument("-j", "--jobs", metavar="N", type=positive_int, default=1,
                       help="read N pairs at once in worker processes (default 1; for big matrices)")
    build.add_argument("--triage", metavar="FILE", type=Path,
                       help="the file that classifies the replay failures (TRIAGE.md): the page links it")
    build.add_argument("--versions", metavar="FILE", type=Path, action="append", default=[],
                       help="a sweep's summary (toolmatrix replay-versions DIR --write FILE): the page's version axis "
                            "(repeatable)")
    build.add_argument("--strict", action="store_true",
                       help="exit 2 when any input was skipped (the matrix of the others is still written)")
    build.set_defaults(func=_cmd_build)

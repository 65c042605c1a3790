"""``toolmatrix validate``, ``cases``, ``bfcl-export``, ``bfcl-categories`` and ``fuzz-keep``: the case library's
commands, thin over ``toolmatrix.library`` (its errors, SpecErrors and the rest, reach ``cli.main`` as raised)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_validate(args: argparse.Namespace) -> int:
    from toolmatrix.library.cases import load_cases

    cases = load_cases([Path(p) for p in args.paths])
    categories = sorted({c.category for c in cases})
    print(f"{len(cases)} cases in {len(categories)} categories: {', '.join(categories)}")
    return 0


def _cmd_cases(args: argparse.Namespace) -> int:
    from toolmatrix.library.casetable import table

    sys.stdout.write(table([Path(p) for p in args.paths]))
    return 0


def _cmd_bfcl_export(args: argparse.Namespace) -> int:
    from toolmatrix.library.bfcl import write_case_file

    count = write_case_file(args.category, Path(args.output))
    print(f"{count} cases of bfcl_{args.category} -> {args.output}")
    return 0


def _cmd_bfcl_categories(args: argparse.Namespace) -> int:
    from toolmatrix.library.bfcl import category_table

    print(category_table())
    return 0


def _cmd_fuzz_keep(args: argparse.Namespace) -> int:
    from toolmatrix.library.fuzz import CATEGORY
    from toolmatrix.library.fuzzkeep import FAILURES, keep_failures

    directory = Path(args.results)
    out = Path(args.output) if args.output else directory / FAILURES
    kept = keep_failures(directory, out)
    print(f"{kept} failing {CATEGORY} case(s) written to {out}" if kept else f"no generated case failed in {directory}")
    return 0


def register_validate(sub: argparse._SubParsersAction) -> None:
    validate = sub.add_parser(
        "validate", help="validate case files (default: the built-in library)",
        description="Load case files (default: the built-in library) as a run would, checked against the case "
                    "schema and the built-in library, and print how many cases they hold in which categories, or "
                    "every problem found with its file, line and JSON path (exit 2).")
    validate.add_argument("paths", nargs="*", default=[], help="case files or folders (default: the built-in library)")
    validate.set_defaults(func=_cmd_validate)


def register_cases(sub: argparse._SubParsersAction) -> None:
    cases = sub.add_parser(
        "cases", help="print the case library's category table (Markdown, as in docs/cases.md)",
        description="Print the case files' categories (default: the built-in library) as the Markdown table of "
                    "docs/cases.md: each category's case count and the first sentence of its file's description.")
    cases.add_argument("paths", nargs="*", default=[], help="case files or directories (default: the built-in library)")
    cases.set_defaults(func=_cmd_cases)


def register_bfcl(sub: argparse._SubParsersAction) -> None:
    from toolmatrix.library.bfcl import CATEGORIES

    export = sub.add_parser(
        "bfcl-export", help="write one BFCL category (bfcl-eval's data) as a toolmatrix case file",
        description="Convert one BFCL category from the data of the installed bfcl-eval package into a toolmatrix "
                    "case file, the same cases a run with --cases bfcl:CATEGORY converts when it starts.")
    export.add_argument("category", metavar="CATEGORY", help=", ".join(CATEGORIES))
    export.add_argument("-o", "--output", required=True, metavar="FILE.yaml")
    export.set_defaults(func=_cmd_bfcl_export)
    table = sub.add_parser(
        "bfcl-categories", help="the BFCL categories and their case counts (a Markdown table)",
        description="Print the BFCL categories toolmatrix converts as a Markdown table: each one's --cases value, "
                    "its BFCL file, its case count in the installed bfcl-eval and what its cases expect.")
    table.set_defaults(func=_cmd_bfcl_categories)


def register_fuzz_keep(sub: argparse._SubParsersAction) -> None:
    from toolmatrix.library.fuzzkeep import FAILURES

    keep = sub.add_parser(
        "fuzz-keep", help="write the generated cases that failed in a --fuzz run as a case file that reproduces them",
        description="Write the generated cases that failed (or errored, but not for the infrastructure) in the "
                    "results of a --fuzz run as a case file that runs them again without hypothesis, each with why "
                    "it failed.")
    keep.add_argument("results", help="the results directory of a run with --fuzz N")
    keep.add_argument("-o", "--output", metavar="FILE", help=f"the case file to write (default: RESULTS/{FAILURES})")
    keep.set_defaults(func=_cmd_fuzz_keep)

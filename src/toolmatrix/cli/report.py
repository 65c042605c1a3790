"""``toolmatrix check-results``, ``gate`` and ``show``: results read back, checked, judged against a baseline,
one record shown; thin over ``toolmatrix.records`` and ``toolmatrix.report``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import CommandExit


def _cmd_check_results(args: argparse.Namespace) -> int:
    from toolmatrix.records import ResultsError, check_results, run_dirs

    missing = [d for d in args.dirs if not Path(d).is_dir()]
    if missing:  # a usage error, as everywhere in toolmatrix (exit 2); 1 says the results themselves are wrong
        raise ToolmatrixError(f"not a directory: {', '.join(missing)}")
    problems: list[str] = []
    checked = 0
    for given in args.dirs:  # a results directory, or a folder of them (a snapshot), as show, gate and matrix take
        try:
            found = run_dirs(Path(given))
        except ResultsError as exc:  # a problem of the results, reported with the others
            problems.append(str(exc))
            continue
        checked += len(found)
        problems += [p for run in found for p in check_results(run)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{checked} result dir(s): {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return CommandExit.NO if problems else CommandExit.DONE


def _cmd_gate(args: argparse.Namespace) -> int:
    from toolmatrix.report.gate import run_gate

    gating = run_gate(args.baseline, args.results, min_pass_rates=dict(args.min_pass_rate),
                      min_conformance=dict(args.min_conformance), min_pass_lower=dict(args.min_pass_lower),
                      allowlist=args.allow, junit_xml=args.junit_xml)
    for line in gating.lines():
        print(line)
    return gating.exit_code


def _cmd_show(args: argparse.Namespace) -> int:
    from toolmatrix.report.show import find_records, parse_selector, render

    case_id, mode = parse_selector(args.selector, args.mode)
    found = find_records(Path(args.results), case_id, mode, args.pair)
    if not found:
        where = f" of {args.pair}" if args.pair else ""
        raise ToolmatrixError(f"no record of case {case_id!r}{f' [{mode}]' if mode else ''} in {args.results}{where}",
                              status=CommandExit.NO)
    pairs = sorted({run.pair for run, _ in found})
    if len(pairs) > 1:
        raise ToolmatrixError(f"case {case_id!r} is in {len(pairs)} pairs' results; choose one with --pair: "
                              + ", ".join(pairs))
    print("\n\n".join(render(run, record, args.full) for run, record in found))
    return 0


def register_check_results(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        "check-results", help="validate results directories against their JSON Schemas",
        description="Check results directories (or folders of them, a snapshot): run.json and every line of "
                    "results.jsonl against their JSON Schemas, and the records against run.json's counts; print "
                    "every problem found (exit 1 where there is one, 2 where a path is not a directory).")
    check.add_argument("dirs", nargs="+", help="results directories (each holding results.jsonl and run.json), or "
                                               "folders of them (a snapshot)")
    check.set_defaults(func=_cmd_check_results)


def register_gate(subparsers: argparse._SubParsersAction) -> None:
    """Add ``toolmatrix gate``."""
    from toolmatrix.report.gate import parse_threshold

    """Add ``toolmatrix gate``."""
    parser = subparsers.add_parser(
        "gate", help="fail when results regress against a baseline",
        description="Compare results with baseline results, pair by pair: each side a results directory or a "
                    "folder of them (a snapshot, a run over several surfaces). Exit status: 0 passed; "
                    "1 failed (a case x mode that passed in the baseline does not pass now, or a category is under "
                    "its --min-pass-rate, --min-conformance or --min-pass-lower); 2 usage or input error (missing or invalid baseline, results or "
                    "allowlist, or a pair only one side holds).")
    parser.add_argument("--baseline", metavar="DIR", type=Path, required=True,
                        help="the baseline: a results directory or a folder of them")
    parser.add_argument("--results", metavar="DIR", type=Path, required=True,
                        help="the results to judge: a results directory or a folder of them")
    parser.add_argument("--min-pass-rate", metavar="CATEGORY=RATE", type=parse_threshold, action="append", default=[],
                        help="fail when CATEGORY's pass rate is under RATE (0.9 or 90%%; '*' = all); repeatable")
    parser.add_argument("--min-conformance", metavar="CATEGORY=RATE", type=parse_threshold, action="append",
                        default=[], help="fail when CATEGORY's engine conformance (the engine alone: it returned "
                        "what the model said, honouring the request) is under RATE; repeatable")
    parser.add_argument("--min-pass-lower", metavar="CATEGORY=RATE", type=parse_threshold, action="append",
                        default=[], help="fail when the low end of the 95%% Wilson interval of CATEGORY's pass@1 "
                        "(the mean over repeated samples, --samples K; over case x mode) is under RATE; repeatable")
    parser.add_argument("--allow", metavar="FILE.yaml", type=Path,
                        help="known-unsupported cells, each with a reason (schema: allowlist.schema.json)")
    parser.add_argument("--junit-xml", metavar="FILE", type=Path, help="also write the judgements as JUnit XML")
    parser.set_defaults(func=_cmd_gate)


def register_show(subparsers: argparse._SubParsersAction) -> None:
    show = subparsers.add_parser(
        "show", help="one record: verdict, blame, failing checks, what the answer said, the model's raw text, and a "
                     "curl that sends it again",
        description="Print one case's records (both modes unless one is chosen) from results, found by its id or "
                    "a failing line of toolmatrix gate: each one's verdict and blame, failing checks, what the answer "
                    "said, the model's own raw text, a curl that sends the request again (for a live record) and the "
                    "pytest command that runs the case again.")
    show.add_argument("results", help="a results directory, or a folder of them (a snapshot)")
    show.add_argument("selector", help="a case id (single.weather), or a failing line of `toolmatrix gate`")
    show.add_argument("--mode", choices=("nonstream", "stream"), help="one mode (default: both, or the gate line's)")
    show.add_argument("--pair", metavar="MODEL@ENGINE", help="which pair, where the folder holds several")
    show.add_argument("--full", action="store_true", help="every check, the request as sent and the answer as it came")
    show.set_defaults(func=_cmd_show)

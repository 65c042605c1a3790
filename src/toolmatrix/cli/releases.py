"""``toolmatrix releases``: does any pin of an engine lag the newest release on its package index?"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tabulate import tabulate

from toolmatrix.base.errors import ToolmatrixError

BEHIND = 1  # a pin fell behind (and no hold covers it), or an image is unpinned
UNREACHABLE = 3  # nothing is behind as far as could be read, but an index could not be read


def _cmd_releases(args: argparse.Namespace) -> int:
    from toolmatrix.replay.releases import INDEX
    from toolmatrix.report.pins import read_sweep, standing
    from toolmatrix.serving.registry import load_engines

    engines = load_engines()
    unknown = [e for e in args.engine or () if e not in engines]
    if unknown:
        raise ToolmatrixError(f"unknown engine {', '.join(unknown)}; known: {', '.join(sorted(engines))}")
    sweep = read_sweep(args.sweep)
    found = [standing(engines[e], args.snapshot, sweep, args.index or INDEX) for e in sorted(args.engine or engines)]
    if args.json:
        print(json.dumps([{"engine": s.engine, "package": s.package, "newest": str(s.newest) if s.newest else None,
                           "pins": [{"where": p.where, "what": p.what, "version": str(p.version) if p.version else None}
                                    for p in s.pins],
                           "status": s.status(), "failing": s.failing} for s in found], indent=1))
    else:
        rows = [(s.engine, s.package or "-", s.newest or "-",
                 "\n".join(f"{p.where}: {p.what}" for p in s.pins) or "-", s.status()) for s in found]
        print(tabulate(rows, headers=("engine", "package", "newest", "pins", "status"), tablefmt="simple"))
    if any(s.failing for s in found):
        return BEHIND
    return UNREACHABLE if any(s.unreachable for s in found) else 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "releases", help="list each engine's pins against the newest release on its package index",
        description="For every engine (or --engine), the newest final release of its package on the index (PyPI) "
                    "against every place that pins it: the image tag, the process and replay environments, the "
                    "replay snapshot and the version sweep. Exit 1 when a pin is behind and its spec holds no "
                    "reason for that release (releases.held), or an image is unpinned; 3 when an index could not "
                    "be read (and nothing read was behind); 0 otherwise.")
    parser.add_argument("--engine", action="append", help="an engine spec id (repeatable; default: every engine)")
    parser.add_argument("--snapshot", type=Path, default=Path("results/replay"),
                        help="the replay snapshot whose ENGINE/run.json versions count as pins (default: "
                             "results/replay; skipped where missing)")
    parser.add_argument("--sweep", type=Path, default=Path("results/versions/versions.json"),
                        help="the version sweep's versions.json (default: results/versions/versions.json; skipped "
                             "where missing)")
    parser.add_argument("--index", default=None, help="a PEP 691 simple index (default: PyPI's)")
    parser.add_argument("--json", action="store_true", help="print the standings as JSON")
    parser.set_defaults(func=_cmd_releases)

"""The page's version axis: a sweep folder given to ``toolmatrix matrix build`` (one engine's replay runs at several
releases, ``DIR/ENGINE@VERSION`` as ``toolmatrix replay-sweep`` writes them) becomes, per engine, families x
releases, each cell the family's pass share at that release; a change from the release before is marked
(regression, fix) and points at the records that flipped. The aggregation is ``toolmatrix.replay.versions``'; this
module only lays it out for the page (data drawn by its script, text nodes only) and for matrix.md."""

from __future__ import annotations

from typing import Any, Callable

from toolmatrix.replay.versions import Sweep


def version_layout(sweep: Sweep, source: str) -> list[dict[str, Any]]:
    """Per engine of ``sweep`` (read from ``source``): ``{"engine", "source", "releases", "families", "cells",
    "flips", "arrivals"}``. ``cells[family]`` holds per release ``{"pass", "total", "rate", "flips": [index]}`` or
    ``{"reason"}`` (not replayed there, and why) or None (no fixture of it); ``flips[index]`` is ``{"before",
    "after", "kind", "family", "records": [[case_id, mode, was, now]]}``."""
    out = []
    for engine, columns in sweep.columns.items():
        groups = sweep.flip_groups(engine)
        flips = [{"before": before, "after": after, "kind": kind, "family": family,
                  "records": [[f.case_id, f.mode, f.was, f.now] for f in found]}
                 for (before, after, kind, family), found in groups.items()]
        cells: dict[str, list[dict[str, Any] | None]] = {}
        for family in sweep.families(engine):
            row: list[dict[str, Any] | None] = []
            for column in columns:
                share = column.share(family)
                if share is None:
                    row.append({"reason": column.skipped[family]} if family in column.skipped else None)
                    continue
                marked = [i for i, f in enumerate(flips) if f["family"] == family and f["after"] == column.version]
                row.append({"pass": share[0], "total": share[1], "rate": round(share[0] / share[1], 4),
                            "flips": marked})
            cells[family] = row
        out.append({"engine": engine, "source": source, "releases": [c.version for c in columns],
                    "families": sweep.families(engine), "cells": cells, "flips": flips,
                    "arrivals": [{"family": f, "version": v, "reason": why} for f, v, why in sweep.arrivals(engine)]})
    return out


def _cell_md(cell: dict[str, Any] | None, flips: list[dict[str, Any]], md_text: Callable[..., str]) -> str:
    if cell is None:
        return ""
    if "reason" in cell:
        return "n/a: " + md_text(cell["reason"].strip().splitlines()[-1] if cell["reason"].strip() else "", 80)
    marks = "".join(sorted({"▼" if flips[i]["kind"] == "regression" else "▲" for i in cell["flips"]}))
    return f"{100 * cell['rate']:.0f}% ({cell['pass']}/{cell['total']}){' ' + marks if marks else ''}"


def versions_markdown(engines: list[dict[str, Any]], md_text: Callable[..., str], cap: int) -> list[str]:
    """matrix.md's part: per engine its table (▼ a regression since the release before, ▲ a fix), then each flip
    with its first ``cap`` records (``md_text`` escapes untrusted text)."""
    if not engines:
        return []
    from tabulate import tabulate

    lines = ["", "## Parser replay across releases", "",
             "Each family's pass share at each release of the engine's parser (replay, no model ran); ▼ a record "
             "that passed at the release before fails here (regression), ▲ one that failed passes (fix)."]
    for entry in engines:
        flips = entry["flips"]
        rows = [[md_text(family)] + [_cell_md(c, flips, md_text) for c in entry["cells"][family]]
                for family in entry["families"]]
        headers = [md_text(f"{entry['engine']} ({entry['source']})")] + [md_text(v) for v in entry["releases"]]
        lines += ["", tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
        for flip in flips:
            records = flip["records"]
            shown = ", ".join(f"{md_text(case)} [{md_text(mode)}] {md_text(was)}->{md_text(now)}"
                              for case, mode, was, now in records[:cap])
            more = f" and {len(records) - cap} more" if len(records) > cap else ""
            lines.append(f"- {flip['kind']} {md_text(flip['before'])} -> {md_text(flip['after'])} "
                         f"{md_text(flip['family'])} ({len(records)}): {shown}{more}")
        lines += [f"- first replayed at {md_text(a['version'])}: {md_text(a['family'])}" for a in entry["arrivals"]]
    return lines

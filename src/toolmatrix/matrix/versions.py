"""The page's version axis: a sweep folder given to ``toolmatrix matrix build`` (one engine's replay runs at several
releases, ``DIR/ENGINE@VERSION`` as ``toolmatrix replay-sweep`` writes them) becomes, per engine, families x
releases, each cell the family's pass share at that release; a change from the release before is marked
(regression, fix) and points at the records that flipped. A sweep's summary file (``replay-versions --write``) given
as ``matrix build --versions FILE`` is the same axis without its gigabytes of records. The aggregation is
``toolmatrix.replay.versions``' (``layout``); this module only lays it out for matrix.md (the page draws the same
data with its script, text nodes only)."""

from __future__ import annotations

from typing import Any, Callable

from toolmatrix.matrix.figures import percent
from toolmatrix.replay.versions import FIX, REGRESSION, last_line, marks


def _cell_md(cell: dict[str, Any] | None, flips: list[dict[str, Any]], md_text: Callable[..., str]) -> str:
    if cell is None:
        return ""
    if "reason" in cell:
        return "n/a: " + md_text(last_line(cell["reason"], empty=""), 80)
    mark = marks(cell, flips, {REGRESSION: "▼", FIX: "▲"})
    return f"{percent(cell['rate'])} ({cell['pass']}/{cell['total']}){' ' + mark if mark else ''}"


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
        # the engine by its name (where its sweep was read is matrix.json's "source", no heading's business)
        headers = ["family \\ release"] + [md_text(v) for v in entry["releases"]]
        lines += ["", f"### {md_text(entry['engine'])}: {len(entry['releases'])} releases", "",
                  tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
        for flip in flips:
            records = flip["records"]
            shown = ", ".join(f"{md_text(case)} [{md_text(mode)}] {md_text(was)}->{md_text(now)}"
                              for case, mode, was, now, *_ in records[:cap])
            more = f" and {len(records) - cap} more" if len(records) > cap else ""
            lines.append(f"- {flip['kind']} {md_text(flip['before'])} -> {md_text(flip['after'])} "
                         f"{md_text(flip['family'])} ({len(records)}): {shown}{more}")
        lines += [f"- first replayed at {md_text(a['version'])}: {md_text(a['family'])}" for a in entry["arrivals"]]
    return lines

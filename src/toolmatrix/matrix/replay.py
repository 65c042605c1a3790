"""The parser-replay part of the matrix: its own table, families x engines, apart from the live model x engine one.

A replay cell (``tier: replay``, pair ``parser-replay@ENGINE``) holds every family that engine's parser was fed;
its records' category is ``replay.FAMILY``. A family an engine did not replay is in its run's
``skipped_families`` with the reason (no parser for the format, parser refused at startup, no tokenizer): the
table shows that reason in the empty cell, so no blank is left unexplained.
"""

from __future__ import annotations

from typing import Any

from toolmatrix.matrix.figures import percent

PREFIX = "replay."
NOT_FED = "not replayed: no fixture of this family in this engine's run"


def is_replay(cell: dict) -> bool:
    return cell.get("tier") == "replay"


def replay_layout(cells: list[dict]) -> dict[str, Any]:
    """``{"families", "engines", "cells": [{engine, family, pair, pass, total, rate, counts} | {.., reason}]}``."""
    replay = sorted((c for c in cells if is_replay(c)), key=lambda c: c["engine"])
    families: set[str] = set()
    for cell in replay:
        families |= {row[0][len(PREFIX):] for row in cell["breakdown"] if row[0].startswith(PREFIX)}
        families |= set(cell.get("skipped_families", {}))
    entries = []
    for cell in replay:
        for family in sorted(families):
            rows = [r for r in cell["breakdown"] if r[0] == PREFIX + family]
            entry: dict[str, Any] = {"engine": cell["engine"], "family": family, "pair": cell["pair"]}
            if rows:
                counts: dict[str, int] = {}
                for _, _, verdict, _, n in rows:
                    counts[verdict] = counts.get(verdict, 0) + n
                total = sum(counts.values())
                entry.update(counts=counts, total=total, rate=round(counts.get("pass", 0) / total, 4))
            else:
                entry["reason"] = cell.get("skipped_families", {}).get(family) or NOT_FED
            entries.append(entry)
    engines = [{"id": c["engine"], "version": c["engine_version"], "pair": c["pair"]} for c in replay]
    return {"families": sorted(families), "engines": engines, "cells": entries}


def replay_markdown(shape: dict[str, Any], md_text, triage: str | None = None) -> list[str]:
    """The replay table for matrix.md (``md_text`` escapes untrusted text), and the link to its triage."""
    if not shape["engines"]:
        return []
    from tabulate import tabulate

    by_key = {(e["family"], e["engine"]): e for e in shape["cells"]}

    def text(entry: dict) -> str:
        if "reason" in entry:
            return "not replayed: " + md_text(entry["reason"], 160)
        bad = ", ".join(f"{n} {v}" for v, n in sorted(entry["counts"].items()) if v != "pass")
        return f"{percent(entry['rate'])} ({entry['counts'].get('pass', 0)}/{entry['total']})" + \
            (f", {bad}" if bad else "")

    headers = ["family \\ engine parser"] + [md_text(f"{e['id']} {e['version'] or ''}".strip()) for e in shape["engines"]]
    rows = [[md_text(f)] + [text(by_key[f, e["id"]]) for e in shape["engines"]] for f in shape["families"]]
    return ["", "## Parser replay (no model ran)", "",
            "Each engine's own output parser, at the version shown, fed the family's model text whole and in chunks "
            "(token, special-token, seeded random) and judged by the live checks. It proves the parser reads the "
            "format; it says nothing about chat templates, grammar-constrained tool_choice or sampling (live cells).",
            "", tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)] + \
        (["", f"Every failing cluster classified (engine bug, contested format, truncation policy, fixture doubt), "
              f"each with a one-line repro: [{md_text(triage)}]({triage})"] if triage else [])

"""The end-of-run table: per category, pass counts per mode, failures, engine conformance and who was blamed."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Sequence

from tabulate import tabulate

from toolmatrix.records import Posted


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def summary_table(posted: Sequence[Posted]) -> str:
    """Per category: pass counts per mode, fail / unsupported / error, the end-to-end pass rate, the engine's
    conformance (answered exchanges where it returned what the model said, honouring the request), and blames."""
    rows = []
    by_category: dict[str, list[Posted]] = defaultdict(list)
    for row in posted:
        by_category[row.category].append(row)
    for category in sorted(by_category) + ["TOTAL"]:
        items = list(posted) if category == "TOTAL" else by_category[category]
        count = Counter((p.mode, p.verdict) for p in items)
        blames = Counter(p.blame for p in items if p.verdict != "pass" and p.blame)
        judged = [p.conformant for p in items if p.conformant is not None]
        passed = count["nonstream", "pass"] + count["stream", "pass"]
        rows.append([
            category,
            f"{count['nonstream', 'pass']}/{sum(v for (m, _), v in count.items() if m == 'nonstream')}",
            f"{count['stream', 'pass']}/{sum(v for (m, _), v in count.items() if m == 'stream')}",
            sum(v for (_, verdict), v in count.items() if verdict == "fail"),
            sum(v for (_, verdict), v in count.items() if verdict == "unsupported"),
            sum(v for (_, verdict), v in count.items() if verdict == "error"),
            _percent(passed, len(items)),
            f"{_percent(sum(judged), len(judged))} ({sum(judged)}/{len(judged)})" if judged else "-",
            ", ".join(f"{b} {n}" for b, n in blames.most_common()),
        ])
    headers = ["category", "nonstream pass", "stream pass", "fail", "unsupported", "error", "pass rate",
               "engine conformance", "blame"]
    return tabulate(rows, headers=headers, tablefmt="github") + evidence_line(posted)


def evidence_line(posted: Sequence[Posted]) -> str:
    """How often the model's own words were asked for and had, and which blames they moved from the wire's."""
    asked = Counter(p.evidence for p in posted if p.evidence)
    if not asked:
        return ""
    moved = Counter(f"{p.wire_blame}->{p.blame}" for p in posted if p.wire_blame and p.wire_blame != p.blame)
    moves = ", ".join(f"{move} {n}" for move, n in moved.most_common()) or "none"
    return (f"\nevidence: {', '.join(f'{n} {status}' for status, n in sorted(asked.items()))}; "
            f"blames it moved from the wire rules': {moves}")

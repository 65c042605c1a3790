"""The end-of-run table: per category, pass counts per mode, failures and who was blamed."""

from __future__ import annotations

from collections import Counter, defaultdict

from tabulate import tabulate


def summary_table(verdicts: list[tuple[str, str, str, str | None]]) -> str:
    """Per category: pass counts per mode, then fail / unsupported / error and who was blamed."""
    rows = []
    by_category: dict[str, list] = defaultdict(list)
    for row in verdicts:
        by_category[row[0]].append(row)
    for category in sorted(by_category) + ["TOTAL"]:
        items = verdicts if category == "TOTAL" else by_category[category]
        count = Counter((mode, verdict) for _, mode, verdict, _ in items)
        blames = Counter(blame for _, _, verdict, blame in items if verdict != "pass" and blame)
        total = len(items)
        passed = count["nonstream", "pass"] + count["stream", "pass"]
        rows.append([
            category,
            f"{count['nonstream', 'pass']}/{sum(v for (m, _), v in count.items() if m == 'nonstream')}",
            f"{count['stream', 'pass']}/{sum(v for (m, _), v in count.items() if m == 'stream')}",
            sum(v for (_, verdict), v in count.items() if verdict == "fail"),
            sum(v for (_, verdict), v in count.items() if verdict == "unsupported"),
            sum(v for (_, verdict), v in count.items() if verdict == "error"),
            f"{100 * passed / total:.0f}%" if total else "-",
            ", ".join(f"{b} {n}" for b, n in blames.most_common()),
        ])
    headers = ["category", "nonstream pass", "stream pass", "fail", "unsupported", "error", "pass rate", "blame"]
    return tabulate(rows, headers=headers, tablefmt="github")

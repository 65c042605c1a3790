"""``toolmatrix cases``: the case library by category, as the Markdown docs/cases.md shows.

Generated, never typed: each row is a category's case count and the first sentence of its file's
``description``, so the docs' count and table follow the files (tests/unit/test_case_library.py holds
docs/cases.md to this output).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from toolmatrix.base.specs import read_yaml
from toolmatrix.library.cases import case_files, load_cases

_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")  # "e.g. DE" and "v0.2" do not end a sentence


def covers(description: str) -> str:
    """What a case file covers, for a table cell: the first sentence of its description, on one line."""
    first = _SENTENCE_END.split(" ".join(description.split()), maxsplit=1)[0]
    return first.replace("|", "\\|").replace("<", "&lt;")  # a cell: no column break, no HTML tag


def table(paths: list[Path]) -> str:
    """The lead line and the category table of the case files under ``paths`` (validated first)."""
    counts = Counter(case.category for case in load_cases(paths))
    described: dict[str, str] = {}
    for path in case_files(paths):
        data = read_yaml(path).data
        if data["category"] in counts:
            described.setdefault(data["category"], covers(data.get("description", "")))
    lines = [f"{sum(counts.values())} cases in {len(counts)} categories:", "",
             "| category | cases | what it covers |", "|---|---:|---|"]
    lines += [f"| `{category}` | {counts[category]} | {described[category]} |" for category in sorted(counts)]
    return "\n".join(lines) + "\n"

"""``toolmatrix replay-bugs`` on the real parser packages: every committed bug fixture fails where its report says
the bug is, passes where it was fixed, and the pinned version answers as its place between the two says.

Needs each engine's parser env and the older versions (``toolmatrix replay-install ENGINE`` and ``toolmatrix
replay-install --bugs``); skipped without them, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.replay.bugs import default_file, load_bugs, versions_to_install
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.session import adapters


def _missing() -> list[str]:
    bugs = load_bugs(default_file())
    names = sorted({bug.engine for _, bug in bugs}) + versions_to_install(bugs)
    missing = [why for adapter in adapters(names) if (why := adapter.ready()) is not None]
    return missing + ([] if tokenizer_path("hermes") else ["toolmatrix replay-install tokenizers"])


def test_every_bug_fails_where_broken_and_passes_where_fixed() -> None:
    missing = _missing()
    if missing:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))
    toolmatrix = Path(sys.executable).with_name("toolmatrix")
    done = subprocess.run([str(toolmatrix), "replay-bugs", "--json"], capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    differ = [r for r in rows if r["got"] != r["expected"]]
    assert done.returncode == 0 and not differ, differ or done.stderr[-2000:]
    reports = {bug.label for _, bug in load_bugs(default_file())}
    assert {r["report"] for r in rows} == reports
    # Each report replayed at the pinned version; the fixed ones also fail before their fix and pass after it.
    assert all(any("pinned" in r["as"] for r in rows if r["report"] == report) for report in reports)
    assert {"pass", "fail"} <= {r["got"] for r in rows if r["as"] == "fixed" or r["as"] == "broken"}

"""``toolmatrix replay-bisect`` on the real SGLang parser packages: a public bug of the committed bugs.jsonl is
bisected to the broken/fixed boundary its report names. Installs at most two overlays (the report's two releases;
the pinned one is the env itself).

Needs SGLang's parser env (``toolmatrix replay-install sglang``) and the tokenizers; skipped without them, unless
TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails. The overlays install on first use (PyPI, --no-deps)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.replay.bugs import default_file, load_bugs, pinned_version
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.session import adapters


def test_bisect_finds_the_reported_fixed_release_of_a_public_bug() -> None:
    (adapter,) = adapters(["sglang"])
    missing = [why for why in (adapter.ready(),) if why] + ([] if tokenizer_path("hermes") else ["tokenizers"])
    if missing:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))
    fixture, bug = next((f, b) for f, b in load_bugs(default_file()) if b.label == "sgl-project/sglang#18102")
    assert bug.fixed is not None
    # broken, fixed, pinned: the search must replay the middle one to tell which side of it the change is on.
    versions = ",".join([bug.broken, bug.fixed, pinned_version(adapter) or ""])
    toolmatrix = Path(sys.executable).with_name("toolmatrix")
    done = subprocess.run([str(toolmatrix), "replay-bisect", "--engine", "sglang", "--fixture", fixture.id,
                           "--fixtures", str(default_file()), "--versions", versions],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    first = done.stdout.splitlines()[0]
    assert first == f"{fixture.id}: fail at {bug.broken}, pass at {bug.fixed}", done.stdout
    assert done.stdout.rstrip().endswith("3 releases replayed")

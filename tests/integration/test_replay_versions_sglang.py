"""The version axis on the real SGLang parser packages: ``toolmatrix replay-bisect`` finds the broken/fixed boundary
a public bug of the committed bugs.jsonl names, and ``replay-sweep`` over the same two releases, read back by
``replay-versions``, shows that record's fix, and a family whose parser a release lacks as not replayed there;
``toolmatrix gate`` between 0.5.10 and the pinned release flags a GLM-4.5 regression and lists a GLM-4.7 fix.
Uses two overlays only, the report's two releases (the ones ``toolmatrix replay-install --bugs`` installs; otherwise
they install on first use, PyPI, --no-deps); the pinned release is the env itself.

Needs SGLang's parser env (``toolmatrix replay-install sglang``) and the tokenizers; skipped without them, unless
TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.replay.bugs import Bug, default_file, load_bugs
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.session import adapters
from toolmatrix.serving.registry import data_root

TOOLMATRIX = Path(sys.executable).with_name("toolmatrix")


# Every public SGLang report of bugs.jsonl that names the release that fixed it (the others are still open).
FIXED = sorted(b.label for _, b in load_bugs(default_file()) if b.engine == "sglang" and b.fixed is not None)


def _ready() -> None:
    missing = [why for why in (adapters(["sglang"])[0].ready(),) if why]
    missing += [] if tokenizer_path("hermes") else ["toolmatrix replay-install tokenizers"]
    if missing:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))


def _bug(label: str) -> tuple[Fixture, Bug]:
    _ready()
    return next((f, b) for f, b in load_bugs(default_file()) if b.label == label)


@pytest.fixture
def fixed_bug() -> tuple[Fixture, Bug]:
    """sgl-project/sglang#18102: broken at 0.5.9, fixed at 0.5.10 (the stream of two calls in one delta)."""
    return _bug("sgl-project/sglang#18102")


def _toolmatrix(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOOLMATRIX), *args], capture_output=True, text=True, timeout=600)


def test_every_fixed_public_report_names_a_release() -> None:
    assert "sgl-project/sglang#18102" in FIXED and "sgl-project/sglang#13411" in FIXED


@pytest.mark.parametrize("label", FIXED)
def test_bisect_finds_the_reported_fixed_release_of_a_public_bug(label: str) -> None:
    fixture, bug = _bug(label)
    # broken, fixed, pinned: the search must replay the middle one to tell which side of it the change is on.
    versions = ",".join([bug.broken, str(bug.fixed), adapters(["sglang"])[0].version or ""])
    done = _toolmatrix("replay-bisect", "--engine", "sglang", "--fixture", fixture.id,
                       "--fixtures", str(default_file()), "--versions", versions)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == f"{fixture.id}: fail at {bug.broken}, pass at {bug.fixed}", done.stdout
    assert done.stdout.rstrip().endswith("3 releases replayed")


def test_a_sweep_of_the_two_releases_shows_the_fix_in_the_version_table(fixed_bug: tuple[Fixture, Bug],
                                                                        tmp_path: Path) -> None:
    fixture, bug = fixed_bug
    fixtures = tmp_path / "bug.jsonl"
    # and a Gemma 4 fixture: neither release has that parser yet, so its server would refuse to start with it
    fixtures.write_text("".join(line + "\n" for line in default_file().read_text(encoding="utf-8").splitlines()
                                if f'"{fixture.id}"' in line or '"family": "gemma4"' in line), encoding="utf-8")
    swept = _toolmatrix("replay-sweep", "--engine", "sglang", "--versions", f"{bug.fixed},{bug.broken}",
                        "--fixtures", str(fixtures), "--results-dir", str(tmp_path / "sweep"), "--chunking", "token")
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert [line.split(":")[0] for line in swept.stdout.splitlines()] == [f"sglang@{bug.broken}", f"sglang@{bug.fixed}"]
    table = _toolmatrix("replay-versions", str(tmp_path / "sweep"))
    assert table.returncode == 0, table.stderr[-2000:]
    assert (f"fix {bug.broken} -> {bug.fixed} {fixture.family}: {fixture.id} [stream:token] fail->pass"
            in table.stdout), table.stdout
    run = json.loads((tmp_path / "sweep" / f"sglang@{bug.broken}" / "run.json").read_text())
    assert run["engine"]["skipped_families"]["gemma4"].endswith("--tool-call-parser gemma4: not a choice of this "
                                                                "release")
    assert any(line.split()[:3] == ["gemma4", "n/a", "n/a"] for line in table.stdout.splitlines()), table.stdout


def test_the_gate_between_two_releases_flags_the_regression_and_lists_the_fix(tmp_path: Path) -> None:
    # Two snapshot fixtures whose verdicts differ between 0.5.10 and the pinned release (0.5.23 when measured):
    # GLM-4.5's newline-led <think> kept in the reasoning (triage E11; its whole-text stream fails at both), GLM-4.7's
    # null value parsed.
    regressed, fixed = "glm45.choose.time_not_weather.think", "glm47.types.null_value.plain"
    snapshot = data_root() / "results" / "replay" / "fixtures.jsonl"
    lines = [line for line in snapshot.read_text(encoding="utf-8").splitlines()
             if f'"id": "{regressed}"' in line or f'"id": "{fixed}"' in line]
    why = adapters(["sglang"])[0].ready()  # whole texts: no tokenizer needed
    if why:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    fixtures = tmp_path / "two.jsonl"
    fixtures.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    pinned = adapters(["sglang"])[0].version
    swept = _toolmatrix("replay-sweep", "--engine", "sglang", "--versions", f"0.5.10,{pinned}", "--fixtures",
                        str(fixtures), "--results-dir", str(tmp_path / "sweep"), "--chunking", "whole")
    assert swept.returncode == 0, swept.stderr[-2000:]
    gated = _toolmatrix("gate", "--baseline", str(tmp_path / "sweep" / "sglang@0.5.10"),
                        "--results", str(tmp_path / "sweep" / f"sglang@{pinned}"))
    assert gated.returncode == 1, gated.stdout + gated.stderr
    lines = gated.stdout.splitlines()
    assert f"upgrade: engine version 0.5.10 in the baseline, {pinned} in the results" in lines
    assert [line.split(":")[0] for line in lines if line.startswith(("REGRESSION", "fixed"))] == [
        f"REGRESSION {regressed} [nonstream]", f"fixed {fixed} [nonstream]", f"fixed {fixed} [stream]"], gated.stdout

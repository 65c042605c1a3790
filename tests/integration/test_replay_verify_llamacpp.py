"""toolmatrix replay-verify on llama.cpp: the replay harness compiled again from the source the installed one was
built from with a diff applied (or from a checkout), with the installed build's flags, and the fixtures replayed
through both. The diffs are small real changes of llama.cpp's repository: one that breaks Qwen3-Coder's calls (its
parameter opener misspelt), and one that changes only a comment beside a CI file the source tree does not hold.
Skipped where the harness or its source tree is missing, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from toolmatrix.cli import main
from toolmatrix.replay.fixtures import dump_fixtures, load_fixtures
from toolmatrix.replay.session import adapters
from toolmatrix.serving.registry import data_root

PARSER = "common/parsers/qwen3-coder.cpp"
OPENER = 'p.tool_arg_open("<parameter="'
FIXTURES = ("qwen3_coder.choose.time_not_weather.plain", "hermes.choose.time_not_weather.plain")


@pytest.fixture(scope="module")
def llamacpp():
    (adapter,) = adapters(["llamacpp"])
    why = adapter.ready()
    if why is None and not (adapter.source_tree / PARSER).is_file():
        why = f"the llama.cpp tree the harness was built from is not in the cache ({adapter.source_tree})"
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return adapter


def diff_of(adapter, old: str, new: str) -> str:
    """A one-line change of the Qwen3-Coder parser as ``git diff`` writes it."""
    lines = (adapter.source_tree / PARSER).read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if old in line)
    return (f"--- a/{PARSER}\n+++ b/{PARSER}\n@@ -{at + 1} +{at + 1} @@\n"
            f"-{lines[at]}\n+{lines[at].replace(old, new)}\n")


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    chosen = [f for f in load_fixtures(data_root() / "results" / "replay" / "fixtures.jsonl") if f.id in FIXTURES]
    assert len(chosen) == len(FIXTURES)
    dump_fixtures(chosen, tmp_path / "fx.jsonl")
    return tmp_path / "fx.jsonl"


def verify(tmp_path: Path, fixtures: Path, capsys, *change: str) -> tuple[int, str, str]:
    code = main(["replay-verify", "--engine", "llamacpp", *change, "--fixtures", str(fixtures),
                 "--results-dir", str(tmp_path / "v"), "--chunking", "whole"])
    out, err = capsys.readouterr()
    return code, out, err


def installed_harness(adapter) -> str:
    return hashlib.sha256(adapter.harness.read_bytes()).hexdigest()


def test_a_diff_that_breaks_qwen3_coder_calls_is_built_and_found(llamacpp, tmp_path, fixtures, capsys):
    before = installed_harness(llamacpp)
    (tmp_path / "break.diff").write_text(diff_of(llamacpp, OPENER, 'p.tool_arg_open("<param="'))
    code, out, _ = verify(tmp_path, fixtures, capsys, "--patch", str(tmp_path / "break.diff"))
    assert code == 1, out
    assert "broken: qwen3_coder.choose.time_not_weather.plain (nonstream, stream)" in out
    assert "0 fixed, 1 broken, 1 unchanged of 2 fixtures" in out
    assert installed_harness(llamacpp) == before  # the installed build is never the one rebuilt
    key = hashlib.sha256((tmp_path / "break.diff").read_bytes()).hexdigest()[:12]
    assert not (llamacpp.source_tree.parents[2] / f"change-{key}").exists()  # the change's own tree is gone


def test_a_checkout_with_the_same_line_changed_breaks_the_same_fixture(llamacpp, tmp_path, fixtures, capsys,
                                                                       monkeypatch):
    checkout = tmp_path / "llama.cpp"
    shutil.copytree(llamacpp.source_tree, checkout, copy_function=os.symlink)
    (checkout / PARSER).unlink()
    (checkout / PARSER).write_text((llamacpp.source_tree / PARSER).read_text().replace(OPENER, 'p.tool_arg_open("<param="'))
    monkeypatch.chdir(tmp_path)  # named as a user types it: relative
    code, out, _ = verify(tmp_path, fixtures, capsys, "--source", "llama.cpp")
    assert code == 1 and "broken: qwen3_coder.choose.time_not_weather.plain" in out, out


def test_a_cache_without_the_harness_source_tree_is_refused_in_one_line(llamacpp, tmp_path, fixtures, capsys,
                                                                        monkeypatch):
    # A cache holding only the built binaries (copied from another machine, or a CI leg's): nothing to patch.
    (tmp_path / "x.diff").write_text(diff_of(llamacpp, OPENER, 'p.tool_arg_open("<param="'))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "bin").symlink_to(llamacpp.bin_dir)
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path / "cache"))
    code, _, err = verify(tmp_path, fixtures, capsys, "--patch", str(tmp_path / "x.diff"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "is not in the cache" in err and "toolmatrix install llamacpp" in err


def test_a_comment_changes_nothing_and_a_file_outside_the_tree_is_not_applied(llamacpp, tmp_path, fixtures, capsys):
    ci = "--- a/.github/workflows/build.yml\n+++ b/.github/workflows/build.yml\n@@ -1 +1 @@\n-a\n+b\n"
    (tmp_path / "noop.diff").write_text(diff_of(llamacpp, "auto rule_name", "auto /* same */ rule_name") + ci)
    code, out, err = verify(tmp_path, fixtures, capsys, "--patch", str(tmp_path / "noop.diff"))
    assert code == 0, out + err
    assert "0 fixed, 0 broken, 2 unchanged of 2 fixtures" in out
    assert "not applied (not in llamacpp's source tree): b/.github/workflows/build.yml" in err

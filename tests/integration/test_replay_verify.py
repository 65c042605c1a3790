"""toolmatrix replay-verify on SGLang's installed release with small real diffs of its repository: one that fixes a
fixture (SGLang's GLM-4.5 reasoning parser keeping the ``\\n<think>`` a GLM-4.5 turn opens with: triage E11), one
that breaks one (Qwen2.5's call opener misspelt), the same fix as a source checkout, and a diff with nothing in the
package. Skipped where SGLang's parser env is missing, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI)."""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toolmatrix.cli import main
from toolmatrix.replay.fixtures import dump_fixtures, load_fixtures
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import adapters
from toolmatrix.replay.verify import site_packages
from toolmatrix.serving.registry import data_root

FIX = """\
--- a/python/sglang/srt/parser/reasoning_parser.py
+++ b/python/sglang/srt/parser/reasoning_parser.py
@@ -170,3 +170,3 @@
         think_start_text = self.think_start_token + self.think_start_self_label
-        processed_text = text
+        processed_text = text.lstrip("\\n") if text.lstrip("\\n").startswith(think_start_text) else text
         while processed_text.startswith(think_start_text):
"""
BREAK = """\
--- a/python/sglang/srt/function_call/qwen25_detector.py
+++ b/python/sglang/srt/function_call/qwen25_detector.py
@@ -37,3 +37,3 @@
         super().__init__()
-        self.bot_token = "<tool_call>\\n"
+        self.bot_token = "<tool_calls>\\n"
         self.eot_token = "\\n</tool_call>"
"""
DOCS = "--- a/docs/index.md\n+++ b/docs/index.md\n@@ -1 +1 @@\n-a\n+b\n"
FIXTURES = ("glm45.choose.time_not_weather.think", "hermes.choose.time_not_weather.plain")


@pytest.fixture(scope="module")
def sglang():
    (adapter,) = adapters(["sglang"])
    if adapter.ready() is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(adapter.ready())
        pytest.skip(adapter.ready())
    return adapter


@pytest.fixture
def fixtures(tmp_path: Path) -> Path:
    chosen = [f for f in load_fixtures(data_root() / "results" / "replay" / "fixtures.jsonl") if f.id in FIXTURES]
    dump_fixtures(chosen, tmp_path / "fx.jsonl")
    return tmp_path / "fx.jsonl"


def verify(tmp_path: Path, capsys, *change: str) -> tuple[int, str, str]:
    status = main(["replay-verify", "--engine", "sglang", *change, "--fixtures", str(tmp_path / "fx.jsonl"),
                   "--results-dir", str(tmp_path / "out"), "--chunking", "token"])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_diff_that_fixes_a_fixture_says_so_and_exits_0(sglang, fixtures, tmp_path, capsys) -> None:
    (tmp_path / "fix.diff").write_text(FIX)
    status, out, _ = verify(tmp_path, capsys, "--patch", str(tmp_path / "fix.diff"))
    assert status == 0, out
    assert "fixed: glm45.choose.time_not_weather.think (nonstream, stream:token)" in out
    assert "1 fixed, 0 broken, 1 unchanged of 2 fixtures" in out
    assert (tmp_path / "out" / "base" / "sglang" / "results.jsonl").is_file()
    # The cached environment is never changed: the installed file is as it was.
    installed = site_packages(sglang) / "sglang" / "srt" / "parser" / "reasoning_parser.py"
    assert "processed_text = text\n" in installed.read_text()


def test_a_diff_that_breaks_a_fixture_that_passed_exits_1(sglang, fixtures, tmp_path, capsys) -> None:
    (tmp_path / "break.diff").write_text(BREAK + DOCS)
    status, out, err = verify(tmp_path, capsys, "--patch", str(tmp_path / "break.diff"))
    assert status == 1
    assert "broken: hermes.choose.time_not_weather.plain (nonstream, stream:token)" in out
    assert "not applied (not in sglang's sglang): b/docs/index.md" in err


def test_a_source_checkout_with_the_fix_is_verified_the_same(sglang, fixtures, tmp_path, capsys) -> None:
    checkout = tmp_path / "sglang-checkout"
    shutil.copytree(site_packages(sglang) / "sglang", checkout / "python" / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["patch", "-p1", "-s", "-d", str(checkout)], input=FIX, text=True, check=True)
    status, out, _ = verify(tmp_path, capsys, "--source", str(checkout))
    assert status == 0 and "fixed: glm45.choose.time_not_weather.think" in out


def test_a_diff_with_nothing_in_the_package_is_refused_in_one_line(sglang, fixtures, tmp_path, capsys) -> None:
    (tmp_path / "docs.diff").write_text(DOCS)
    status, _, err = verify(tmp_path, capsys, "--patch", str(tmp_path / "docs.diff"))
    assert status == 2
    assert err.startswith("toolmatrix replay-verify: ") and "none of its files is in sglang's installed" in err


# engine -> (its file, as the package lays it out, the line to change, the change): each misspells the opener of
# the parser that reads Hermes calls on that engine, a one-line diff of the engine's own repository.
BREAKS = {
    "vllm": ("vllm/tool_parsers/hermes_tool_parser.py", 'tool_call_start_token: str = "<tool_call>"',
             'tool_call_start_token: str = "<tool_calls>"'),
    "lmdeploy": ("lmdeploy/serve/openai/tool_parser/qwen3_parser.py", "self.tool_start_token = '<tool_call>'",
                 "self.tool_start_token = '<tool_calls>'"),
    "mlxlm": ("mlx_lm/tool_parsers/json_tools.py", 'tool_call_start = "<tool_call>"',
              'tool_call_start = "<tool_calls>"'),
    "transformers": ("transformers/cli/serving/utils.py", '"open_pattern": r"\\s*<tool_call>",',
                     '"open_pattern": r"\\s*<tool_calls>",'),
}


@pytest.mark.parametrize("engine", sorted(BREAKS))
def test_every_python_engine_takes_a_change_that_breaks_its_hermes_calls(engine, fixtures, tmp_path, capsys) -> None:
    """The same on each Python engine: a copy of its installed package, the diff laid over it, the break found."""
    (adapter,) = adapters([engine])
    if adapter.ready() is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(adapter.ready())
        pytest.skip(adapter.ready())
    path, old, new = BREAKS[engine]
    lines = (site_packages(adapter) / path).read_text(encoding="utf-8").splitlines(keepends=True)
    assert sum(old in line for line in lines) == 1, f"{engine}: the line to change moved in its release"
    changed = [line.replace(old, new) for line in lines]
    (tmp_path / "break.diff").write_text("".join(difflib.unified_diff(lines, changed, f"a/src/{path}", f"b/src/{path}")))
    status = main(["replay-verify", "--engine", engine, "--patch", str(tmp_path / "break.diff"), "--fixtures",
                   str(fixtures), "--results-dir", str(tmp_path / "out"), "--chunking", "whole"])
    out = capsys.readouterr().out
    assert status == 1 and "broken: hermes.choose.time_not_weather.plain (" in out, out  # LMDeploy: streamed only
    # The same change as a source folder: a checkout of the package with that one line changed.
    top = path.split("/")[0]
    shutil.copytree(site_packages(adapter) / top, tmp_path / "checkout" / top, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "checkout" / path).write_text("".join(changed), encoding="utf-8")
    status = main(["replay-verify", "--engine", engine, "--source", str(tmp_path / "checkout"), "--fixtures",
                   str(fixtures), "--results-dir", str(tmp_path / "out2"), "--chunking", "whole"])
    assert status == 1 and "broken: hermes.choose.time_not_weather.plain (" in capsys.readouterr().out


# engine -> (the release a public fix came after, the one it shipped in (None: the pinned one), the parser folder of
# the package, a fixture it fixed (from the public bug fixtures, else generated from the case library), the chunking
# that shows it)
PUBLIC_FIXES = {
    "sglang": ("0.5.9", "0.5.10", "sglang/srt/function_call", "sglang-18102.qwen25.parallel_stream", "token"),
    "mlxlm": ("0.32.0", "0.32.1", "mlx_lm/tool_parsers", "qwen3_coder.fuzz.1.29.plain", "token"),
    # transformers 5.23's serve hands the request's tools to its response parser, which types Qwen3-Coder values
    "transformers": ("5.22.0", None, "transformers/cli/serving", "qwen3_coder.variant.nested", "token"),
    # LMDeploy 0.12.1's streaming cursor: several calls in one streamed step
    "lmdeploy": ("0.12.0", None, "lmdeploy/serve/openai", "hermes.variant.three_calls", "random"),
}


def _fixture(fixture_id: str) -> list:
    bugs = load_fixtures(Path(__file__).parents[2] / "src" / "toolmatrix" / "data" / "bugs.jsonl")
    found = [f for f in bugs if f.id == fixture_id]
    return found or [f for f in generate([data_root() / "cases"], [fixture_id.split(".")[0]]) if f.id == fixture_id]


@pytest.mark.parametrize("engine", sorted(PUBLIC_FIXES))
def test_a_public_fix_is_reproduced_from_its_diff(engine: str, tmp_path: Path, capsys) -> None:
    """The old release with its parsers' diff to the fixing one reads the fixture the fixing one reads right:
    sgl-project/sglang#18102 (results/verify/sglang-18102/ shows it), MLX-LM 0.32.1's Qwen3-Coder fix,
    transformers 5.23's typed Qwen3-Coder values and LMDeploy 0.12.1's streaming cursor."""
    old_version, new_version, folder, fixture_id, chunking = PUBLIC_FIXES[engine]
    old, new = (adapters([f"{engine}@{v}" if v else engine])[0] for v in (old_version, new_version))
    why = old.ready() or new.ready()
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    for side, adapter in (("a", old), ("b", new)):
        shutil.copytree(site_packages(adapter) / folder, tmp_path / side / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    diff = subprocess.run(["diff", "-ruN", f"a/{folder}", f"b/{folder}"], cwd=tmp_path, capture_output=True,
                          text=True).stdout
    (tmp_path / "fix.diff").write_text(diff)
    dump_fixtures(_fixture(fixture_id), tmp_path / "fx.jsonl")
    status = main(["replay-verify", "--engine", f"{engine}@{old_version}", "--patch", str(tmp_path / "fix.diff"),
                   "--fixtures", str(tmp_path / "fx.jsonl"), "--results-dir", str(tmp_path / "out"),
                   "--chunking", chunking])
    out = capsys.readouterr().out
    assert status == 0 and f"fixed: {fixture_id} (" in out and "0 broken" in out, out
    # The same as a source folder: a checkout holding the fixing release's package.
    top = folder.split("/")[0]
    shutil.copytree(site_packages(new) / top, tmp_path / "checkout" / "src" / top,
                    ignore=shutil.ignore_patterns("__pycache__"))
    status = main(["replay-verify", "--engine", f"{engine}@{old_version}", "--source", str(tmp_path / "checkout"),
                   "--fixtures", str(tmp_path / "fx.jsonl"), "--results-dir", str(tmp_path / "out2"),
                   "--chunking", chunking])
    out = capsys.readouterr().out
    assert status == 0 and f"fixed: {fixture_id} (" in out, out


def test_a_diff_that_does_not_apply_to_the_release_is_refused_in_one_line(sglang, fixtures, tmp_path, capsys) -> None:
    """A pull request made against another release: patch's own words, nothing replayed."""
    (tmp_path / "stale.diff").write_text(BREAK.replace("-        self.bot_token", "-        self.start_token"))
    status, _, err = verify(tmp_path, capsys, "--patch", str(tmp_path / "stale.diff"))
    assert status == 2 and err.startswith("toolmatrix replay-verify: ") and "does not apply" in err, err
    assert not (tmp_path / "out").exists()

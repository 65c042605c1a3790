"""replay-verify's verify.json and page from a real verification: SGLang's installed release with one diff that fixes
a fixture (GLM-4.5's ``\\n<think>``: triage E11) and breaks another (Qwen2.5's call opener misspelt), and a third
fixture neither touches, so that one run has a broken, a fixed and an unchanged fixture. Skipped where SGLang's
parser env is missing, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI). The page in a real browser:
tests/browser/test_verify_page.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest

from tests.integration.test_replay_verify import BREAK, FIX
from toolmatrix.cli import main
from toolmatrix.replay.fixtures import dump_fixtures, load_fixtures
from toolmatrix.replay.session import adapters
from toolmatrix.serving.registry import data_root

BROKEN, FIXED = "hermes.choose.time_not_weather.plain", "glm45.choose.time_not_weather.think"
UNCHANGED = "qwen3_coder.choose.time_not_weather.plain"  # neither diff touches SGLang's Qwen3-Coder parser


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> tuple[int, str, Path]:
    """(exit status, standard output, the results folder) of one replay-verify run."""
    why = adapters(["sglang"])[0].ready()
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    work = tmp_path_factory.mktemp("verify")
    wanted = (BROKEN, FIXED, UNCHANGED)
    dump_fixtures([f for f in load_fixtures(data_root() / "results" / "replay" / "fixtures.jsonl") if f.id in wanted],
                  work / "fx.jsonl")
    (work / "change.diff").write_text(FIX + BREAK)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["replay-verify", "--engine", "sglang", "--patch", str(work / "change.diff"), "--fixtures",
                       str(work / "fx.jsonl"), "--results-dir", str(work / "out"), "--chunking", "token"])
    return status, printed.getvalue(), work / "out"


def test_verify_json_says_what_the_command_printed(verified) -> None:
    status, out, folder = verified
    report = json.loads((folder / "verify.json").read_text())
    printed = re.search(r"(\d+) fixed, (\d+) broken, (\d+) unchanged of (\d+) fixtures", out)
    assert printed is not None, out
    assert [int(n) for n in printed.groups()] == [report["counts"][k] for k in ("fixed", "broken", "unchanged",
                                                                                 "fixtures")] == [1, 1, 1, 3]
    assert status == report["exit_status"] == 1
    assert report["engine"] == "sglang" and report["release"] == adapters(["sglang"])[0].version
    assert report["change"] == {"applied": ["b/python/sglang/srt/parser/reasoning_parser.py",
                                            "b/python/sglang/srt/function_call/qwen25_detector.py"], "not_applied": []}
    assert [(f["id"], f["outcome"]) for f in report["fixtures"]] == [(BROKEN, "broken"), (FIXED, "fixed"),
                                                                     (UNCHANGED, "unchanged")]
    assert report["fixtures"][0]["broken"] == ["nonstream", "stream:token"]
    # The page's path, last.
    assert out.splitlines()[-1].startswith(f"the page: {folder / 'index.html'}")
    assert out.index(f"broken: {BROKEN}") < out.index(f"fixed: {FIXED}")


def test_each_fixtures_lines_are_its_records_on_both_sides(verified) -> None:
    _, _, folder = verified
    report = json.loads((folder / "verify.json").read_text())
    for entry in report["fixtures"]:
        for side in ("base", "change"):
            assert entry[side]["results"] == f"{side}/sglang/results.jsonl"
            lines = (folder / entry[side]["results"]).read_text().splitlines()
            assert list(entry[side]["lines"]) == ["nonstream", "stream:token"]  # --chunking token
            for mode, number in entry[side]["lines"].items():
                record = json.loads(lines[number - 1])
                assert (record["case_id"], record["mode"], record["verdict"]) == (
                    entry["id"], mode, entry[side]["verdicts"][mode])


def test_the_page_lists_the_broken_fixture_first_and_links_both_records(verified) -> None:
    _, _, folder = verified
    page = (folder / "index.html").read_text()
    report = json.loads((folder / "verify.json").read_text())
    assert "1 fixed, 1 broken, 1 unchanged of 3 fixtures; exit status 1" in page
    where = {fixture: page.index(f'data-fixture="{fixture}"') for fixture in (BROKEN, FIXED, UNCHANGED)}
    assert where[BROKEN] < where[FIXED] < where[UNCHANGED]
    assert page.index('<section id="broken">') < where[BROKEN] and page.index('<section id="fixed">') < where[FIXED]
    # The unchanged ones are collapsed: inside a closed <details>.
    assert re.search(r'<section id="unchanged"><details>', page)
    broken = page[where[BROKEN]:where[FIXED]]
    for side in ("base", "change"):
        for mode, number in report["fixtures"][0][side]["lines"].items():
            link = f'href="{side}/sglang/results.jsonl" title="line {number} of {side}/sglang/results.jsonl"'
            assert link in broken, (side, mode)
    # Both sides' parser output, side by side: the release's calls, and the change's text with no call.
    assert broken.count('class="output response"') == 2 and broken.count('class="output chunks"') == 2
    assert "get_time" in broken and "&lt;tool_call&gt;" in broken
    assert 'data-mode="stream:token"' in broken and "flip-broken" in broken

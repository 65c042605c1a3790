"""``toolmatrix demo`` end to end: the real command, its stand-in engine and the suite under pytest, into a fresh
directory. Each named engine bug is blamed on the engine, the small model's mistake on the model (where the wire
alone says engine), the right answers pass, nothing else fails, and the page is written."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.cli import main
from toolmatrix.library.cases import load_cases
from toolmatrix.cli.demo import ENGINE_BUGS, MODEL_MISTAKE, unanswered
from toolmatrix.serving.registry import data_root
from toolmatrix.records import read_records

# bug category -> the check its failures fail first
FIRST_CHECK = {"parallel": "stream_consistency", "unicode": "ascii_escaping", "nested": "arguments_schema"}


ROOT = Path(__file__).parents[2]


def readme_demo() -> list[str]:
    """The README's first-result command as a reader copies it (tests/unit/test_docs.py leaves running it here)."""
    line = re.search(r"^pip install -e \. && (toolmatrix demo\b.*)$", (ROOT / "README.md").read_text(), re.M)
    assert line, "the README has no `pip install -e . && toolmatrix demo` line"
    return shlex.split(line[1])[1:]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The README's line, into a fresh directory (`-o`) with the workers the tests may use (`-j 2`)."""
    out = tmp_path_factory.mktemp("demo") / "fresh"
    proc = subprocess.run([sys.executable, "-m", "toolmatrix.cli", *readme_demo(), "-o", str(out), "-j", "2"],
                          capture_output=True, text=True, timeout=300)
    return proc, out


def test_the_demo_says_it_is_one_and_where_its_page_is(demo):
    proc, out = demo
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "NO MODEL RUNS" in proc.stdout
    page = out / "matrix" / "index.html"
    assert f"The page: {page}" in proc.stdout and page.stat().st_size > 0
    assert "no model runs" in page.read_text(encoding="utf-8")


def test_the_page_names_the_stand_in_not_an_engine_that_did_not_run(demo):
    """The stand-in speaks vLLM's evidence protocol; its column, pair and engine spec title still say it is the demo."""
    _, out = demo
    page = (out / "matrix" / "index.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="toolmatrix-data">(.*?)</script>', page, re.S)[1])
    assert [e["id"] for e in data["engines"]] == ["demo"]
    assert {c["pair"] for c in data["cells"]} == {"demo-no-model@demo"}
    assert "vllm" not in json.dumps([data["engines"], data["models"], data["title"]]).lower()
    spec = (out / "data" / "engines" / "demo.yaml").read_text(encoding="utf-8")
    assert "title: toolmatrix demo stand-in (vLLM-like)" in spec and "same_generation: vllm_token_ids" in spec


def test_each_bug_is_blamed_where_it_belongs_and_nothing_else_fails(demo):
    proc, out = demo
    records = list(read_records(out / "results"))
    named = set(unanswered(load_cases([data_root() / "cases"])))
    assert all(case_id in proc.stdout for case_id in named)  # named to the user, and they fail as the model's
    assert {r.blame.value for r in records if r.case_id in named} == {"model"}
    assert any(r.verdict.value == "pass" for r in records)
    failed = [r for r in records if r.verdict.value != "pass" and r.case_id not in named]
    by_category = {category: [r for r in failed if r.category == category] for category in {r.category for r in failed}}
    assert set(by_category) == {*ENGINE_BUGS, MODEL_MISTAKE[0]}, sorted(by_category)
    for category, check in FIRST_CHECK.items():
        firsts = {(next(c for c in r.checks if c.failed).name, r.blame.value) for r in by_category[category]}
        assert firsts == {(check, "engine")}, category
    evidenced = by_category["unicode"] + by_category["nested"]  # the model's own text shows the engine changed it
    assert all(r.blamed_by.value == "evidence" and r.evidence.raw_text for r in evidenced)
    mistakes = by_category[MODEL_MISTAKE[0]]
    assert {(r.blame.value, r.blamed_by.value, r.wire_blame.value) for r in mistakes} == {("model", "evidence", "engine")}


def test_jobs_must_be_a_positive_number(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "-j", "0"])
    assert exit_info.value.code == 2 and "must be above 0" in capsys.readouterr().err

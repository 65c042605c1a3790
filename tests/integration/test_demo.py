"""``toolmatrix demo`` end to end: the real command, its stand-in engine and the suite under pytest, into a fresh
directory. The stand-in answers every case of the library; each named engine bug is blamed on the engine, the small
model's mistake on the model (where the wire alone says engine), every failing record is one of them (its case in
the bug's category, its first failing check the bug's), the right answers pass, and the page is written. After the
demo, its repro lines run against the stand-in started again; ``--open`` with no display says where the page is."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.cli import demo as demo_module
from toolmatrix.cli import main
from toolmatrix.cli.demo import ENGINE_BUGS, MODEL_MISTAKE, DemoRun, unanswered
from toolmatrix.library.cases import load_cases
from toolmatrix.records import read_records
from toolmatrix.serving.registry import data_root

# bug or mistake category -> the check its failures fail first, and the modes it shows in (the stream bug's only
# in the stream)
FIRST_CHECK = {"parallel": "stream_consistency", "unicode": "ascii_escaping", "nested": "arguments_schema",
               MODEL_MISTAKE[0]: "arguments_schema"}
MODES = {"parallel": {"stream"}}


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


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    return json.loads(re.search(r'<script type="application/json" id="toolmatrix-data">(.*?)</script>', text, re.S)[1])


def test_the_stand_in_answers_every_case_of_the_library():
    """Every expectation form of the library (regexes, JSON Schema matchers, $ref'd and anyOf'd tool schemas) gets
    a right answer: none fails for want of one, as 15 cases did."""
    assert unanswered(load_cases([data_root() / "cases"])) == []


def test_each_bug_is_blamed_where_it_belongs_and_nothing_else_fails(demo):
    proc, out = demo
    records = list(read_records(out / "results"))
    assert len(records) == 2 * len(load_cases([data_root() / "cases"]))
    assert "has no answer for" not in proc.stdout
    assert any(r.verdict.value == "pass" for r in records)
    failed = [r for r in records if r.verdict.value != "pass"]
    # each failing record is a named bug's or the mistake's: by its case's category, its first failing check, its mode
    named = [r for r in failed if r.category in FIRST_CHECK
             and next(c for c in r.checks if c.failed).name == FIRST_CHECK[r.category]
             and r.mode in MODES.get(r.category, {"nonstream", "stream"})]
    assert [(r.case_id, r.mode, [c.name for c in r.checks if c.failed]) for r in failed if r not in named] == []
    by_category = {category: [r for r in failed if r.category == category] for category in FIRST_CHECK}
    assert all(by_category.values()), {category: len(found) for category, found in by_category.items()}
    for category in ENGINE_BUGS:
        assert {r.blame.value for r in by_category[category]} == {"engine"}, category
    evidenced = by_category["unicode"] + by_category["nested"]  # the model's own text shows the engine changed it
    assert all(r.blamed_by.value == "evidence" and r.evidence.raw_text for r in evidenced)
    mistakes = by_category[MODEL_MISTAKE[0]]
    assert {(r.blame.value, r.blamed_by.value, r.wire_blame.value) for r in mistakes} == {("model", "evidence", "engine")}


def test_its_repro_lines_work_after_the_demo_with_the_stand_in_started_again(demo, tmp_path):
    """The page's repro lines send to the stand-in's URL; the demo has stopped it. The page's title and the demo's
    output name the command that starts it again there, and with it a failing case's repro line runs that case
    again and fails it again, a passing case's passes."""
    proc, out = demo
    data = page_data(out / "matrix" / "index.html")
    serve = re.search(r"toolmatrix demo --serve --port (\d+)", data["title"])
    assert serve and f"start it again first: {serve[0]}" in proc.stdout
    failure = next(f for cell in data["cells"] for f in cell["failures"] if f["case_id"] == "unicode.latin_accents")
    assert f"--base-url=http://127.0.0.1:{serve[1]}/v1" in failure["repro"]
    server = subprocess.Popen([sys.executable, "-m", "toolmatrix.cli", *shlex.split(serve[0])[1:]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "is listening at" in server.stdout.readline(), server.stderr.read() if server.poll() is not None else ""
        runs = {}
        for line in (failure["repro"], failure["repro"].replace("unicode.latin_accents", "single.get_weather_paris")):
            words = shlex.split(line)
            assert words[0] == "pytest"
            runs[line] = subprocess.run([sys.executable, "-m", *words, "-p", "no:cacheprovider"], cwd=tmp_path,
                                        capture_output=True, text=True, timeout=120)
        (failed, passed) = runs.values()
        assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout[-2000:] + failed.stderr[-2000:]
        assert passed.returncode == 0 and "1 passed" in passed.stdout, passed.stdout[-2000:] + passed.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_serve_refuses_a_port_it_cannot_listen_at(capsys):
    """A port already taken is one line and exit 2, never a traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["demo", "--serve", "--port", str(port)]) == 2
    assert f"cannot listen at 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.fixture
def finished(demo, monkeypatch) -> Path:
    """The demo's run, handed to the command again without running the suite a second time."""
    _, out = demo
    run = DemoRun(out / "results", out / "matrix" / "index.html", list(read_records(out / "results")), 1.0, 1, "", [],
                  8000)
    monkeypatch.setattr(demo_module, "run_demo", lambda *args: run)
    return run.page


def test_open_with_no_display_says_where_the_page_is_and_opens_nothing(finished, monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    opened = []
    monkeypatch.setattr(demo_module.webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    assert main(["demo", "--open"]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert opened == []  # where no display is, a console browser would take the terminal over
    assert said.startswith("--open: no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
    assert f"The page is {finished}" in said


def test_open_says_where_the_page_is_when_no_browser_starts(finished, monkeypatch, capsys):
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(demo_module.webbrowser, "open", lambda url, *a, **k: False)
    assert main(["demo", "--open"]) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("--open: no browser could be started") and f"The page is {finished}" in said


def test_open_says_nothing_more_where_the_browser_opened(finished, monkeypatch, capsys):
    monkeypatch.setenv("DISPLAY", ":0")
    opened = []
    monkeypatch.setattr(demo_module.webbrowser, "open", lambda url, *a, **k: opened.append(url) or True)
    assert main(["demo", "--open"]) == 0
    assert opened == [finished.as_uri()] and "--open:" not in capsys.readouterr().out


def test_jobs_must_be_a_positive_number(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "-j", "0"])
    assert exit_info.value.code == 2 and "must be above 0" in capsys.readouterr().err

"""The README's exit-status table is what the suite and the ``toolmatrix`` commands do: every exit code of a suite
run has its row, and a few commands run here end with the status their row says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd
from tests.helpers_malformed import MALFORMED_CASES
from toolmatrix.base.exitcodes import SEVERITY
from toolmatrix.testing.fake import FakeServer, first_tool

ROOT = Path(__file__).parents[2]
TWO_CALLS = """schema_version: 1
category: mine
cases:
  - id: mine.two_cities
    tools: [travel.get_weather]
    messages: [{role: user, content: "Weather in Paris and in Tokyo?"}]
    expect: {calls: [{name: get_weather, arguments: {city: Paris}}, {name: get_weather, arguments: {city: Tokyo}}]}
"""


def table() -> dict[int, tuple[str, str]]:
    """status -> (what it means under pytest, what it means for a toolmatrix command), from the README."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- toolmatrix exit status: start -->\n(.*?)<!-- toolmatrix exit status: end -->", text, re.S)
    rows = [line.strip("|").split("|") for line in block.group(1).splitlines()[2:]]
    return {int(status): (suite.strip(), command.strip()) for status, suite, command in rows}


def test_every_exit_code_of_a_suite_run_has_its_row():
    assert sorted(status for status, (suite, _) in table().items() if suite) == sorted(map(int, SEVERITY))


def toolmatrix(*args: str) -> int:
    return subprocess.run([sys.executable, "-c", "import sys; from toolmatrix.cli import main; sys.exit(main())",
                           *args], capture_output=True, timeout=120).returncode


@pytest.mark.parametrize(("args", "status", "row_says"), [
    (["validate"], 0, "done"),
    (["validate", "{bad}"], 2, "an invalid case file"),
    (["check-results", "/nonexistent"], 2, "a path that is not there"),
    (["check-results", "{tmp}"], 1, "`check-results` found problems"),
    (["plan", "--engine", "nope", "--model", "qwen3"], 2, "an unknown option or id"),
    (["no-such-command"], 2, "an unknown option or id"),
])
def test_a_command_ends_as_its_row_says(tmp_path, args, status, row_says):
    (tmp_path / "bad.yaml").write_text(MALFORMED_CASES["matcher_misspelled"][0])
    args = [a.format(bad=tmp_path / "bad.yaml", tmp=tmp_path) for a in args]
    assert row_says in table()[status][1]
    assert toolmatrix(*args) == status


def test_a_suite_run_ends_as_its_row_says(tmp_path):
    (tmp_path / "mine.yaml").write_text(TWO_CALLS)
    with FakeServer(first_tool) as fake:  # one call where two are due: the case fails
        def suite(*args: str) -> int:
            return subprocess.run(pytest_cmd("--base-url", fake.base_url, "--model", "m", "--only-cases", *args),
                                  cwd=tmp_path, capture_output=True, timeout=120).returncode

        runs = {1: suite("--cases", "mine.yaml"), 4: suite(), 5: suite("--cases", "mine.yaml", "-k", "nothing")}
    rows = table()
    assert "some cases failed" in rows[1][0] and "no case to run" in rows[4][0] and "selected no case" in rows[5][0]
    assert runs == {1: 1, 4: 4, 5: 5}

"""Every ``toolmatrix`` command that cannot go on says so once, in one line ``toolmatrix SUBCOMMAND: message`` on
stderr, and exits with the status the README's table gives it: the subcommands raise a ``ToolmatrixError``, and
``cli.main`` alone prints it (issue 45)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers_malformed import MALFORMED_CASES
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import CommandExit
from toolmatrix.cli import main

ROOT = Path(__file__).parents[2]
FIXTURE = {"id": "hermes.one.1", "family": "hermes", "model": "qwen3", "text": "x",
           "tools": [{"type": "function", "function": {"name": "f"}}],
           "expected": {"tool_calls": [], "content": "x", "reasoning": None}}


def command_column() -> dict[int, str]:
    """status -> what the README's exit-status table says it means for a ``toolmatrix`` command."""
    block = re.search(r"<!-- toolmatrix exit status: start -->\n(.*?)<!-- toolmatrix exit status: end -->",
                      (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    rows = [line.strip("|").split("|") for line in block.group(1).splitlines()[2:]]
    return {int(status): command.strip() for status, _, command in rows}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A good fixture file, a fixture file with a bad line, a case file that is no case file, a plain file."""
    (tmp_path / "fx.jsonl").write_text(json.dumps(FIXTURE) + "\n")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    (tmp_path / "bad.yaml").write_text(MALFORMED_CASES["matcher_misspelled"][0])  # one problem
    (tmp_path / "file.txt").write_text("not a results directory\n")
    return tmp_path


# (the command line, its status, a word of its message); {tmp}: the folder `files` filled
ERRORS = [
    (["validate", "{tmp}/bad.yaml"], CommandExit.USAGE, "bad.yaml"),
    (["cases", "{tmp}/bad.yaml"], CommandExit.USAGE, "bad.yaml"),
    (["check-results", "{tmp}/missing"], CommandExit.USAGE, "not a directory"),
    (["install", "nope"], CommandExit.USAGE, "no process launcher for engine 'nope'"),
    (["releases", "--engine", "nope"], CommandExit.USAGE, "unknown engine nope"),
    (["plan", "--engine", "nope", "--model", "qwen3"], CommandExit.USAGE, "unknown engine 'nope'"),
    (["plan", "--engine", "llamacpp", "--model", "nope"], CommandExit.USAGE, "unknown model 'nope'"),
    (["matrix", "build", "-o", "{tmp}/page"], CommandExit.USAGE, "name a RESULTS directory"),
    (["matrix", "build", "{tmp}/missing", "-o", "{tmp}/page"], CommandExit.USAGE, "no usable results directory"),
    (["gate", "--baseline", "{tmp}/missing", "--results", "{tmp}/missing"], CommandExit.USAGE, "baseline"),
    (["show", "{tmp}/missing", "single.weather"], CommandExit.USAGE, "missing"),
    (["fuzz-keep", "{tmp}/file.txt"], CommandExit.USAGE, "file.txt"),
    (["replay", "--fixtures", "{tmp}/missing.jsonl", "--results-dir", "{tmp}/out"], CommandExit.USAGE, "missing"),
    (["replay", "--fixtures", "{tmp}/bad.jsonl", "--results-dir", "{tmp}/out"], CommandExit.USAGE, "bad.jsonl"),
    (["replay", "--fixtures", "{tmp}/fx.jsonl", "--results-dir", "{tmp}/out", "--engine", "nope"], CommandExit.USAGE,
     "--engine nope: no replay adapter"),
    (["replay-sweep", "--engine", "nope", "--versions", "1", "--fixtures", "{tmp}/fx.jsonl", "--results-dir",
      "{tmp}/out"], CommandExit.USAGE, "--engine nope: no replay adapter"),
    (["replay-bisect", "--fixtures", "{tmp}/fx.jsonl"], CommandExit.USAGE, "name what to bisect"),
    (["replay-repro", "--fixtures", "{tmp}/fx.jsonl", "--fixture", "hermes.one.1", "--engine", "nope"],
     CommandExit.USAGE, "--engine nope: no replay adapter"),
    (["replay-repro", "--fixtures", "{tmp}/fx.jsonl", "--fixture", "nope", "--engine", "sglang"], CommandExit.USAGE,
     "no fixture with id 'nope'"),
    (["replay-repro", "--triage", "{tmp}/triage.yaml"], CommandExit.USAGE, "-o DIR"),
    (["replay-install"], CommandExit.USAGE, "name what to install"),
    (["replay-install", "tokenizers", "--model", "nope"], CommandExit.USAGE, "not in engines/models.yaml"),
    (["replay-bugs", "--fixtures", "{tmp}/bad.jsonl"], CommandExit.USAGE, "bad.jsonl"),
    (["replay-triage", "{tmp}", "--triage", "{tmp}/missing.yaml"], CommandExit.USAGE, "missing.yaml"),
    (["replay-versions", "{tmp}/missing"], CommandExit.USAGE, "missing"),
]


@pytest.mark.parametrize(("argv", "status", "says"), ERRORS, ids=[" ".join(a[:2]) for a, _, _ in ERRORS])
def test_every_command_error_is_one_line_and_its_tables_status(files, capsys, monkeypatch, argv, status, says):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(files / "cache"))  # replay-install finds no env: installs nothing
    argv = [a.format(tmp=files) for a in argv]
    assert main(argv) == status
    lines = capsys.readouterr().err.splitlines()
    prog = "toolmatrix " + " ".join(argv[:2] if argv[0] == "matrix" else argv[:1])
    said = [n for n, line in enumerate(lines) if line.startswith(f"{prog}: ")]
    assert len(said) == 1, lines  # said once; before it, what the command reported (skipped: ...)
    error, *problems = lines[said[0]:]
    if problems:  # a data file's every problem, one a line, under the line that names the file's kind
        assert error.endswith(" file:"), lines
    assert says in "\n".join([error, *problems]), lines
    assert command_column()[status], f"the README's table has no command meaning for {status}"


def test_the_status_a_command_error_carries_is_its_own_where_it_says_so(capsys):
    class Refused(ToolmatrixError):
        status = CommandExit.NO

    assert Refused("x").status == CommandExit.NO and Refused("x", status=CommandExit.CANNOT_RUN).status == 4
    assert ToolmatrixError("x").status == CommandExit.USAGE == 2  # argparse's usage error, as the table says


def test_a_value_error_subclass_stays_catchable_as_one():
    from toolmatrix.replay.fixtures import FixtureError
    from toolmatrix.serving.launchers import LaunchError

    assert issubclass(FixtureError, ValueError) and issubclass(FixtureError, ToolmatrixError)
    assert issubclass(LaunchError, RuntimeError) and issubclass(LaunchError, ToolmatrixError)

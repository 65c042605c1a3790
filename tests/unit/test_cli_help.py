"""Every ``--help`` says what its command does: each subcommand of ``toolmatrix`` (nested ones too, ``matrix build``)
opens with a sentence after its usage, and the stand-in servers name themselves as users start them, with a help
text for every option (issue 43)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from toolmatrix.cli import build_parser

WIDTH = "100"  # argparse wraps at $COLUMNS: a fixed width makes the help the same on every machine


def _subcommands(parser: argparse.ArgumentParser,
                 path: tuple[str, ...] = ()) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every subparser under ``parser``, depth first, as ("matrix build", its parser)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((" ".join((*path, name)), sub))
                found += _subcommands(sub, (*path, name))
    return found


def _words(text: str) -> str:
    """The text without its whitespace: argparse rewraps a description, breaking lines at spaces and hyphens."""
    return "".join(text.split())


def _help(parser: argparse.ArgumentParser, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", WIDTH)
    return parser.format_help()


SUBCOMMANDS = _subcommands(build_parser())


def test_the_walk_finds_every_subcommand_and_the_nested_ones():
    names = [name for name, _ in SUBCOMMANDS]
    assert len(names) >= 25 and len(names) == len(set(names))
    assert {"validate", "demo", "gate", "matrix", "matrix build", "replay", "replay-bugs"} <= set(names)


@pytest.mark.parametrize("name, parser", SUBCOMMANDS, ids=[name for name, _ in SUBCOMMANDS])
def test_each_subcommand_help_opens_with_a_sentence_of_what_it_does(name, parser, monkeypatch):
    description = parser.description
    assert description and description.strip(), f"toolmatrix {name}: no description="
    assert description[0].isupper() and description.rstrip().endswith("."), \
        f"toolmatrix {name}: the description is not a sentence: {description!r}"
    # The usage block, a blank line, then the description: the first thing a reader sees after how to call it.
    text = _help(parser, monkeypatch)
    assert text.startswith(f"usage: toolmatrix {name}"), text[:200]
    after_usage = text.split("\n\n", 2)[1]
    assert _words(after_usage).startswith(_words(description)[:60]), \
        f"toolmatrix {name} --help: after the usage comes {after_usage[:200]!r}, not the description"
    assert _words(description) in _words(text)


def test_the_top_level_help_says_what_toolmatrix_is(monkeypatch):
    parser = build_parser()
    assert parser.description and parser.description.rstrip().endswith(".")
    assert _words(parser.description) in _words(_help(parser, monkeypatch))


def _options_without_help(text: str) -> list[str]:
    """The option lines of a ``--help`` that carry no help text (argparse leaves the line with the flag alone)."""
    missing = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        flag = line.strip()
        if not line.startswith("  ") or line.startswith("   ") or not flag or "  " in flag:
            continue  # not an option line, or one with its help beside it
        follows = lines[index + 1] if index + 1 < len(lines) else ""
        if not follows.startswith(" " * 4) or follows.startswith("  -"):
            missing.append(flag)  # no help text on the lines under it either
    return missing


@pytest.mark.parametrize("module", ["toolmatrix.fake", "toolmatrix.hostile",  # the paths users type
                                    "toolmatrix.testing.fake", "toolmatrix.testing.hostile"])  # the docs' paths
def test_a_stand_in_help_names_the_command_users_typed_and_explains_every_option(module):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": WIDTH})
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"usage: python -m {module} "), text[:200]
    description = text.split("\n\n", 2)[1]
    assert description.strip() and not description.lstrip().startswith(("options:", "positional arguments:")), text
    assert _words(description).endswith("."), description
    assert "--port N" in text
    assert _options_without_help(text) == [], text


def test_the_option_check_sees_an_option_without_help():
    parser = argparse.ArgumentParser(prog="x", description="X.")
    parser.add_argument("--port", type=int)
    parser.add_argument("--delay", help="seconds")
    assert _options_without_help(parser.format_help()) == ["--port PORT"]

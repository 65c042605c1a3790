"""The CLI reference's generated half (mkdocs-gen-files runs this at build time): the README's exit-status table,
every ``toolmatrix`` subcommand's ``--help`` from the parser ``toolmatrix.cli.build_parser`` builds, and the pytest
options of toolmatrix's plugin as ``pytest --help`` prints them, appended to docs/cli.md so the page cannot drift
from the code (or from the table a test holds to it)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import mkdocs_gen_files

from toolmatrix.cli import build_parser

WIDTH = "100"  # argparse and pytest wrap help at $COLUMNS: a fixed width makes the page the same on every machine
PLUGIN_GROUP = "tool-calling compatibility suite:"  # the title toolmatrix.plugin gives its option group
README = Path(__file__).resolve().parents[1] / "README.md"
EXIT_TABLE = re.compile(r"<!-- toolmatrix exit status: start -->\n(.*?)<!-- toolmatrix exit status: end -->", re.S)


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every subparser of ``toolmatrix`` by its full name (``matrix build`` too), in the order ``--help`` lists
    them, each followed by its own subcommands."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(subcommands(sub, f"{prefix}{name} "))
    return found


def pytest_options() -> str:
    """The plugin's option group from ``pytest --help``, run outside any project (no conftest or ini of ours)."""
    with tempfile.TemporaryDirectory() as empty:
        out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=empty,
                             capture_output=True, text=True, env={**os.environ, "COLUMNS": WIDTH}, check=True).stdout
    lines = out.splitlines()
    if PLUGIN_GROUP not in lines:
        raise SystemExit(f"docs/gen_cli.py: `pytest --help` has no {PLUGIN_GROUP!r} group: is toolmatrix installed?")
    start = lines.index(PLUGIN_GROUP)
    end = lines.index("", start)
    return "\n".join(lines[start:end])


def exit_table() -> str:
    """The README's exit-status table (tests/integration/test_exit_status.py reads the same markers)."""
    found = EXIT_TABLE.search(README.read_text())
    if found is None:
        raise SystemExit(f"docs/gen_cli.py: {README} has no exit-status table between its markers")
    return found.group(1)


def fenced(text: str) -> str:
    return f"```text\n{text.rstrip()}\n```\n"


def main() -> None:
    os.environ["COLUMNS"] = WIDTH
    parser = build_parser()
    with mkdocs_gen_files.open("cli.md", "a") as page:
        page.write("\n## Exit status\n\n" + exit_table())
        page.write("\n## `toolmatrix`\n\n" + fenced(parser.format_help()))
        for name, sub in subcommands(parser).items():
            page.write(f"\n### `toolmatrix {name}`\n\n" + fenced(sub.format_help()))
        page.write("\n## `pytest` options\n\nThe options toolmatrix's pytest plugin adds (`pytest --help`, "
                   "its own group):\n\n" + fenced(pytest_options()))


main()

"""The docs site builds strictly (every page in the nav, every internal link and anchor found) with the CLI
reference generated from the code; the README's links into it resolve."""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def require_mkdocs() -> None:
    """mkdocs comes with the `docs` extra: skip without it, unless CI (which installs it) says it must be there."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocs_gen_files") is None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("mkdocs is not installed: pip install -e '.[docs]'")
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")


def test_the_site_builds_strictly_with_the_generated_cli_reference(tmp_path):
    require_mkdocs()
    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                            "--site-dir", str(site)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text()
    # Generated, not typed: a subcommand's own options and the plugin's pytest options are on the page.
    assert "toolmatrix gate</code>" in cli and "--min-conformance" in cli and "--junit-xml" in cli
    assert "--engine=ENGINE" in cli and "--case-shard=I/N" in cli
    assert (site / "github-actions-gate.yml").is_file() and (site / "matrix-page.png").is_file()


def test_every_page_is_in_the_nav():
    """mkdocs only warns of a page left out of the nav under --strict; this says which, without mkdocs."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert pages and [p for p in pages if f": {p}\n" not in nav] == []


def test_the_readme_links_resolve():
    """The README's relative links (into docs/, which GitHub renders too) name files that exist."""
    links = re.findall(r"\]\(((?!https?:)[^)#\s]+)", (ROOT / "README.md").read_text())
    assert any(link.startswith("docs/") for link in links)
    assert [link for link in links if not (ROOT / link).exists()] == []


def documented_commands() -> list[tuple[str, str]]:
    """Every `toolmatrix …` command line of a shell block in the README and the docs pages (continuation lines
    joined, `&&` chains split, comments dropped), with the file it is in."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for info, block in re.findall(r"^```([\w-]*)\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M):
            if info not in ("", "bash", "sh", "console"):
                continue
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                for part in re.split(r"\s+&&\s+", line.strip()):
                    if part.startswith("toolmatrix "):
                        found.append((page.name, re.split(r"\s+#", part)[0]))
    return found


def test_every_documented_toolmatrix_command_is_one_the_cli_takes():
    """A command a reader copies must exist with the options it shows: each is parsed by the CLI's own parser
    (not run). A line written as a syntax sketch (`[--engine E]`, `…`) is read as such and left out."""
    from toolmatrix.cli import build_parser

    commands = documented_commands()
    assert len(commands) >= 20
    for page, command in commands:
        if re.search(r"\[|…|\.\.\.|\|", command):
            continue
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"{page}: `{command}` is not a command toolmatrix takes")

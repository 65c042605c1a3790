"""The README opens with the two commands, and CI runs the second one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
DEFAULT = "qwen2.5-coder-0.5b"  # the embedded default (engines/models.yaml says so in its title)


def fenced_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)]


def test_readme_opens_with_main_job_then_tests():
    main, tests = fenced_blocks((ROOT / "README.md").read_text())[:2]
    assert f"--engine=llamacpp --model={DEFAULT}" in main and main.startswith("pip install")
    assert tests.startswith("pip install") and "pytest" in tests


def test_readme_is_short():
    """The README is the way in (at most 10 KB); the reference is the docs site (docs/, tests/unit/test_docs.py)."""
    assert len((ROOT / "README.md").read_bytes()) <= 10_240


def test_ci_runs_the_readme_test_command():
    tests = fenced_blocks((ROOT / "README.md").read_text())[1]
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_default_is_the_registry_model_that_says_so():
    from toolmatrix.serving.registry import load_models

    defaults = [model.id for model in load_models().values() if "the embedded default" in model.title]
    assert defaults == [DEFAULT]


def test_ci_runs_it_in_a_new_virtual_environment():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    command = lines.index(fenced_blocks((ROOT / "README.md").read_text())[1])
    made, entered = lines.index("python3 -m venv .venv"), lines.index(". .venv/bin/activate")
    assert made < entered < command
    assert not any(re.match(r"\s*(python3 -m )?pip3? install", line) for line in lines[:entered]), \
        "nothing is installed into the machine's own Python"


def test_ci_runs_it_as_a_new_user_then_with_every_optional_environment():
    """Once before anything optional is installed (a test that needs an optional engine or replay environment and
    does not skip without it fails there), in a cache of its own; once after, where a missing one fails."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    command = fenced_blocks((ROOT / "README.md").read_text())[1]
    first = lines.index(f'TOOLMATRIX_CACHE="$PWD/.ci-cache" bash -c "{command}"')
    second = lines.index(command)
    optional = [n for n, line in enumerate(lines)
                if re.match(r"(for engine in .*; do )?toolmatrix (replay-)?install (?!llamacpp$)", line)
                or "start-dockerd" in line or "bfcl-eval" in line]
    assert optional and first < min(optional) and max(optional) < second
    assert first < lines.index("export TOOLMATRIX_REQUIRE_ENGINES=1") < second
    assert lines[first - 1] == ('rm -rf .ci-cache && mkdir .ci-cache && cp -a "${TOOLMATRIX_CACHE:-$HOME/.cache/toolmatrix}/bin" '
                                '.ci-cache/')


def test_the_demo_paragraph_names_what_the_demo_does():
    """The README's demo paragraph counts the demo's engine bugs and model mistake as the demo has them, and names
    the command that starts its stand-in again for the page's repro lines (the demo's test holds the rest)."""
    from toolmatrix.cli.demo import ENGINE_BUGS

    text = " ".join((ROOT / "README.md").read_text().split("## A first result in a minute", 1)[1].split("\n## ")[0].split())
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    assert f"{words[len(ENGINE_BUGS)]} named engine bugs" in text and "one small-model mistake" in text
    assert "answers every case of the library right" in text and "no other failure" in text
    assert "`toolmatrix demo --serve --port N`" in text

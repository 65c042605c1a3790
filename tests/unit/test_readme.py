"""The README opens with the two commands, and CI runs the second one verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def fenced_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)]


def test_readme_opens_with_main_job_then_tests():
    main, tests = fenced_blocks((ROOT / "README.md").read_text())[:2]
    assert "--engine=llamacpp --model=gemma3-270m" in main and main.startswith("pip install")
    assert tests.startswith("pip install") and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    tests = fenced_blocks((ROOT / "README.md").read_text())[1]
    assert tests in (ROOT / ".ci" / "run").read_text().splitlines()

"""What a new virtual environment holds is what pyproject.toml declares: deptry finds an undeclared import, and
evidence that lacks its Jinja renderer stops the run loudly instead of falling back to the wire rules."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from toolmatrix.live import evidence

ROOT = Path(__file__).parents[2]


def deptry(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("deptry") or "deptry", "--no-ansi", "."], cwd=project, capture_output=True,
                          text=True, timeout=120)


def test_every_import_is_declared_and_every_declared_package_used():
    proc = deptry(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_undeclared_import_fails_the_check(tmp_path):
    for name in ("src", "tests", "benchmarks", "docs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    with (tmp_path / "src" / "toolmatrix" / "report" / "gate.py").open("a") as module:
        module.write("\nimport requests_toolbelt  # not declared\n")
    proc = deptry(tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "DEP001 'requests_toolbelt' imported but missing" in proc.stderr and "Found 1 dependency issue" in proc.stderr


def test_a_missing_renderer_package_is_named(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jinja2" else real(name, *a))
    with pytest.raises(evidence.MissingDependency, match=r"needs jinja2: not installed.*--evidence off"):
        evidence.require_renderer()
    monkeypatch.undo()
    evidence.require_renderer()  # all there: nothing said

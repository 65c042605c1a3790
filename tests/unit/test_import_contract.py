"""The import layers written in pyproject.toml ([tool.importlinter]) hold on the tree, and ``lint-imports`` fails a
copy of the package in which a module reaches up a layer, closes a cycle, or imports the stand-in servers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LAYERS = "A module imports only from the layers below its own"
WIRE = "The wire layer: the answer's types, then the readers that fill them, then the"
ACYCLIC = "No import cycle between the modules of one package"
PLUGIN = "The plugin: its hooks (the package itself) call the controller, which reads the"
STAND_INS = "The stand-in servers are the tests' and the demo's: no other product module"
PYTEST = "pytest is the plugin's: no module outside plugin, suite and testing imports it"
PYTEST_HOMES = {"plugin", "suite", "testing"}  # the packages that may import pytest


def lint_imports(project: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on ``project``'s own package and contracts (its src first on the path), with no cache."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "NO_COLOR": "1"}
    return subprocess.run([shutil.which("lint-imports") or "lint-imports", "--no-cache"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_tree_keeps_every_contract():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 7 kept, 0 broken." in proc.stdout


@pytest.mark.parametrize(("module", "added", "contract", "named"), [
    ("wire/answer.py", "from toolmatrix import records", LAYERS, "toolmatrix.wire.answer -> toolmatrix.records"),
    ("wire/base.py", "from toolmatrix.wire import exchange", WIRE, "toolmatrix.wire.base -> toolmatrix.wire.exchange"),
    ("matrix/replay.py", "from toolmatrix.matrix import page", ACYCLIC, ".replay -> .page"),
    ("report/summary.py", "from toolmatrix.testing import fake", STAND_INS,
     "toolmatrix.report.summary -> toolmatrix.testing.fake"),
    ("plugin/keys.py", "from toolmatrix.plugin import state", PLUGIN, "toolmatrix.plugin.keys -> toolmatrix.plugin.state"),
    ("base/exitcodes.py", "import pytest", PYTEST, "toolmatrix.base.exitcodes -> pytest"),
], ids=["upward", "wire-readers-up", "cycle", "stand-in", "plugin-keys-up", "pytest-outside-the-plugin"])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, added, contract, named):
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "src" / "toolmatrix" / module).open("a") as source:
        source.write(f"\n{added}  # the import the contract forbids\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{contract}" in proc.stdout and "BROKEN" in proc.stdout and named in proc.stdout, proc.stdout


def test_the_pytest_contract_covers_every_package_but_the_plugin_the_suite_and_the_stand_ins():
    """A package added later is named in the contract too: only plugin, suite and testing may import pytest."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == PYTEST]
    packages = {p.parent.name for p in (ROOT / "src" / "toolmatrix").glob("*/__init__.py")}
    assert {m.removeprefix("toolmatrix.") for m in contract["source_modules"]} == packages - PYTEST_HOMES

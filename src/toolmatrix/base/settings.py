"""toolmatrix's own settings, each read here and nowhere else: where its data and its cache live, and the
``TOOLMATRIX_*`` variables a user sets (docs/engines.md names them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def data_root() -> Path:
    """Where cases/ and engines/ live: $TOOLMATRIX_DATA, the source checkout, or the installed share dir."""
    if os.environ.get("TOOLMATRIX_DATA"):
        return Path(os.environ["TOOLMATRIX_DATA"])
    checkout = Path(__file__).resolve().parents[3]  # src/toolmatrix/base/settings.py
    if (checkout / "cases").is_dir() and (checkout / "engines").is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "toolmatrix"


def cache_dir() -> Path:
    return Path(os.environ.get("TOOLMATRIX_CACHE", Path.home() / ".cache" / "toolmatrix"))


def default_family() -> str:
    """The native format given to a model outside the registry: $TOOLMATRIX_FAMILY, default hermes."""
    return os.environ.get("TOOLMATRIX_FAMILY", "hermes")


def batch() -> str | None:
    """The fan-out a run is a shard of: $TOOLMATRIX_BATCH (the plugin's --batch default)."""
    return os.environ.get("TOOLMATRIX_BATCH") or None


def binary_override_var(engine_id: str) -> str:
    """The environment variable that names an engine's binary instead of the one toolmatrix finds or builds."""
    return f"TOOLMATRIX_{engine_id.upper().replace('-', '_')}_BIN"


def binary_override(engine_id: str) -> Path | None:
    """The binary $TOOLMATRIX_<ENGINE>_BIN names, if set."""
    value = os.environ.get(binary_override_var(engine_id))
    return Path(value) if value else None

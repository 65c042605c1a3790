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

"""A fake engine binary for end-to-end tests, and the pytest command line that runs the suite from outside.

The stand-in is a script that runs ``python -m toolmatrix.fake`` with the engine's own arguments; pointed at by
``TOOLMATRIX_<ENGINE>_BIN``, it is started, health-checked and stopped by the process launcher exactly as the
engine's binary would be.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from toolmatrix.launchers.process import binary_override_var

ROOT = Path(__file__).parents[1]


def stand_in(folder: Path, engine_id: str, *fake_args: str) -> dict[str, str]:
    """Environment variables that make ``engine_id``'s binary the fake server, started with ``fake_args``."""
    script = folder / f"{engine_id}-stand-in"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m toolmatrix.fake {shlex.join(fake_args)} "$@"\n')
    script.chmod(0o755)
    return {binary_override_var(engine_id): str(script)}


def pytest_cmd(*args: str) -> list[str]:
    """``python -m pytest`` with this checkout's configuration, from any working directory."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
            str(ROOT / "pyproject.toml"), *args]

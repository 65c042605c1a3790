"""Makes the toolmatrix plugin active for runs from a checkout that was not pip-installed."""

import sys
from importlib.metadata import entry_points
from pathlib import Path

if not any(ep.value == "toolmatrix.plugin" for ep in entry_points(group="pytest11")):
    sys.path.insert(0, str(Path(__file__).parent / "src"))
    pytest_plugins = ["toolmatrix.plugin"]

"""``--base-url``, an option toolmatrix shares with another pytest plugin where that one is installed."""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import pytest


def base_url_shared(plugins: pytest.PytestPluginManager) -> bool:
    """Whether pytest-base-url (which pytest-playwright and pytest-selenium install) defines ``--base-url`` in this
    run: its option means the same, the URL of the server under test, and pytest refuses a second definition
    (``option dest 'base_url' already used``), so toolmatrix then reads that one instead of defining its own. Its
    plugin may register after this one: an installed entry point counts, unless autoloading is off or ``-p
    no:base_url`` blocks it."""
    if plugins.is_blocked("base_url"):
        return False
    if plugins.has_plugin("base_url"):
        return True
    autoload = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    return autoload and any(entry.name == "base_url" and entry.value.startswith("pytest_base_url")
                            for entry in entry_points(group="pytest11"))


def base_url(config: pytest.Config) -> str | None:
    """``--base-url``, ours or pytest-base-url's (None where neither is defined: that plugin installed but off)."""
    return config.getoption("--base-url", None)

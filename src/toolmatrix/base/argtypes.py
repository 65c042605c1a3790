"""Command-line value types shared by the pytest options and the ``toolmatrix`` subcommands: one check each, one
wording of its error; and ``--base-url``, an option toolmatrix shares with another plugin where it is installed."""

from __future__ import annotations

import argparse
import math
import os
from importlib.metadata import entry_points

import pytest


def positive_seconds(text: str) -> float:
    """A duration in seconds: finite and above zero (``nan``, ``inf``, 0 and negatives would never time out)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number of seconds above 0")
    return value


def temperature(text: str) -> float:
    """A sampling temperature: finite and not below zero (0 is greedy)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be a finite temperature of 0 or more")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be above 0")
    return value


def seed(text: str) -> int:
    """A random seed: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be 0 or more")
    return value


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

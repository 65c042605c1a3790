"""Command-line value types shared by the pytest options and the ``toolmatrix`` subcommands: one check each, one
wording of its error (``--base-url``, which the plugin may share with another one, is ``plugin.baseurl``'s)."""

from __future__ import annotations

import argparse
import math


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

"""The compatibility matrix: result directories in, ``index.html`` + ``matrix.md`` + ``matrix.json`` out.

``build_matrix`` is the library entry point (the pytest plugin calls it after a run, ``toolmatrix matrix build``
from ``toolmatrix.cli.matrix``).
"""

from __future__ import annotations

from toolmatrix.matrix.build import BuildReport, CellReport, Skipped, build_matrix

__all__ = ["BuildReport", "CellReport", "Skipped", "build_matrix"]

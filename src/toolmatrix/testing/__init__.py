"""Stand-in servers for toolmatrix's own tests, demo and benchmarks: never imported by the product but the demo."""

__all__ = ["fake", "fakesurfaces", "hostile"]  # imported by name, not here: ``python -m`` runs each without a warning

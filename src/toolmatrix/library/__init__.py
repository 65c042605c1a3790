"""The case library: case files and their table, BFCL categories converted, generated cases and kept failures."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["bfcl", "cases", "casetable", "fuzz", "fuzzkeep"]

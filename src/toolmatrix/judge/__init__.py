"""Judging an answer, live or replayed: the checks, the verdict, and who is to blame."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["blame", "checks"]

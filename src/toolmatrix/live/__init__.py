"""Asking a live engine: the client, the runner that asks and judges a case, evidence, sampling, the engine watch."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["client", "enginewatch", "evidence", "runner", "sampling"]

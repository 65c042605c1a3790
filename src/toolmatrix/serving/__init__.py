"""Serving a model: the engine and model specs (registry), weights, launchers, placeholders, and the run's machine."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["launchers", "placeholders", "registry", "runinfo", "weights"]

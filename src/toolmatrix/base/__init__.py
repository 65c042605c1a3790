"""The ground floor: strict JSON text, YAML data, schema-checked specs, atomic writes, features, exit codes, the
error root (``errors.ToolmatrixError``) and command-line value types."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["argtypes", "atomic", "errors", "exitcodes", "features", "jsontext", "specs", "yamldata"]

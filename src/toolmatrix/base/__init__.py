"""The ground floor: strict JSON text, YAML data, schema-checked specs, atomic writes, features, exit codes."""

# The modules by name, not imported here: importing the room loads none of them.
__all__ = ["atomic", "exitcodes", "features", "jsontext", "specs", "yamldata"]

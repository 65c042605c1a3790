"""Typing argument values that a format writes as plain text, from the tool's JSON Schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._scan import json_or_text

_NOT_CONVERTED = object()


def param_schemas(tools: list[dict[str, Any]] | None, name: str) -> dict[str, Any]:
    """The `properties` of the offered tool called `name`; {} when absent or malformed."""
    for tool in tools if isinstance(tools, (list, tuple)) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            return properties if isinstance(properties, dict) else {}
    return {}


def coerce(text: str, schema: Any, *, literal: bool = False) -> Any:
    """Convert `text` to the first type of `schema` it fits, trying non-string types first.

    Args:
        text: the value as the model wrote it.
        schema: the parameter's JSON Schema, or None when the tool is unknown.
        literal: when no schema type fits, return the JSON value `text` spells
            (for bare values such as Gemma 4's `n:3`) instead of the text.
    """
    for kind in _types(schema):
        value = _CONVERTERS.get(kind, _no_conversion)(text)
        if value is not _NOT_CONVERTED:
            return value
    return json_or_text(text) if literal else text


def _types(schema: Any) -> list[str]:
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    kinds = list(declared) if isinstance(declared, list) else [declared]
    for key in ("anyOf", "oneOf"):
        alternatives = schema.get(key)
        for alternative in alternatives if isinstance(alternatives, list) else ():
            kinds.extend(_types(alternative))
    # A string always fits, so it must be tried last or it would hide the others.
    return sorted((kind for kind in kinds if isinstance(kind, str)), key=lambda kind: kind == "string")


def _no_conversion(text: str) -> Any:
    return _NOT_CONVERTED


def _json_of_type(*types: type) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        value = json_or_text(text)
        fits = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        return value if fits else _NOT_CONVERTED

    return convert


def _boolean(text: str) -> Any:
    return {"true": True, "false": False}.get(text.strip().lower(), _NOT_CONVERTED)


def _null(text: str) -> Any:
    return None if text.strip().lower() in ("null", "none") else _NOT_CONVERTED


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "string": lambda text: text,
    "integer": _json_of_type(int),
    "number": _json_of_type(int, float),
    "boolean": _boolean,
    "null": _null,
    "object": _json_of_type(dict),
    "array": _json_of_type(list),
}

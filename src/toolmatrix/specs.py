"""YAML data files validated by JSON Schema, with errors that point at file, line and field.

Cases, engine specs and model specs are all loaded through here, so every data error reads the same way:
``cases/parallel.yaml:14: parallel.two_cities: $.expect.calls[0].name: 'get_wether' is not an offered tool``.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import attrs
import jsonschema
import yaml

from toolmatrix.features import fill_vocabulary

JsonPath = tuple[str | int, ...]


@attrs.frozen
class SpecError:
    """One problem in one data file."""

    file: str
    line: int | None
    where: str  # the item id (case id, engine id) when known, else ""
    json_path: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        item = f" {self.where}:" if self.where else ""
        return f"{loc}:{item} {self.json_path}: {self.message}"


class SpecErrors(Exception):
    """All problems found in a set of data files (never only the first)."""

    def __init__(self, errors: Iterable[SpecError]):
        self.errors = tuple(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


def format_path(path: Iterable[str | int]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


@attrs.frozen
class YamlDoc:
    """A parsed YAML file plus the source line of every node, keyed by JSON path."""

    path: Path
    data: Any
    lines: dict[JsonPath, int]

    def line(self, path: JsonPath) -> int | None:
        # The deepest known ancestor: a missing key has no line of its own, its parent does.
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return self.lines[path[:cut]]
        return None

    def error(self, path: JsonPath, message: str, where: str = "") -> SpecError:
        return SpecError(str(self.path), self.line(path), where, format_path(path), message)


def _node_lines(node: yaml.Node, path: JsonPath, out: dict[JsonPath, int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _node_lines(value, path + (key.value,), out)
            out[path + (key.value,)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _node_lines(item, path + (index,), out)


def read_yaml(path: Path) -> YamlDoc:
    """Parse one YAML file; a syntax error becomes a SpecErrors naming file and line."""
    try:
        text = path.read_text(encoding="utf-8")
        # One parse gives both the nodes (for line numbers) and the data; the C parser when it is built.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except OSError as exc:
        raise SpecErrors([SpecError(str(path), None, "", "$", f"cannot read: {exc.strerror}")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecErrors([SpecError(str(path), line, "", "$", f"invalid YAML: {problem}")]) from None
    lines: dict[JsonPath, int] = {}
    if node is not None:
        _node_lines(node, (), lines)
    return YamlDoc(path, data, lines)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped in ``toolmatrix/schemas/``, with the feature vocabulary filled in."""
    return fill_vocabulary(json.loads(resources.files("toolmatrix.schemas").joinpath(name).read_text(encoding="utf-8")))


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown field(s)")
    if error.validator == "required":
        return error.message
    value = json.dumps(error.instance, ensure_ascii=False, default=str)
    if error.validator == "enum" and len(error.message) >= 120:  # a vocabulary: name what would do, readably
        return f"{error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    if len(value) > 60:
        value = value[:57] + "..."
    return f"{error.message if len(error.message) < 120 else error.validator + ' failed'} (got {value})"


def schema_errors(doc: YamlDoc, schema_name: str, where_of=None) -> list[SpecError]:
    """Every schema violation in ``doc``; ``where_of(path)`` names the item (e.g. the case id) at a path."""
    errors = []
    for error in sorted(_validator(schema_name).iter_errors(doc.data), key=lambda e: list(map(str, e.path))):
        # anyOf/oneOf failures: report the most specific sub-error, it names the real field.
        best = jsonschema.exceptions.best_match([error]) if error.context else error
        path = tuple(best.absolute_path)
        where = where_of(path) if where_of else ""
        errors.append(doc.error(path, _describe(best), where))
    return errors


def validate_instance(instance: Any, schema_name: str) -> list[str]:
    """Schema violations of an in-memory object (results records, run info), as ``$.path: message`` lines."""
    return [
        f"{format_path(e.absolute_path)}: {_describe(e)}"
        for e in _validator(schema_name).iter_errors(instance)
    ]

"""Families: a native format's markers and its reference parser, loaded from `families.yaml`."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import yaml

from ._model import ParseResult
from ._parsers import PARSERS

FAMILIES_PATH = Path(__file__).with_name("families.yaml")
SCHEMA_PATH = Path(__file__).with_name("families.schema.json")

_MIN_PARTIAL = 5
"""Shorter opener prefixes (`<too`) are too common in ordinary text to mean a held-back call."""


class FamiliesError(ValueError):
    """`families.yaml` is invalid; `problems` holds one `path:line: $.json_path: message` per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid families file:\n" + "\n".join(problems))
        self.problems = tuple(problems)


@attrs.frozen
class Family:
    """A native tool-call format."""

    id: str
    title: str
    call_markers: tuple[str, ...]
    """The call syntax: strings that must never appear in a parsed content, tool name, arguments or reasoning."""
    reasoning_markers: tuple[str, ...]
    """Reasoning tags: an engine splits them off; left in content they are its doing, never a malformed call."""
    other_markers: tuple[str, ...]
    """Turn, end and tool-result tokens: as forbidden as call syntax."""
    call_openers: tuple[str, ...]
    """Strings that start a call in raw text; their prefixes betray a held-back call."""
    parser: str
    """Name of the reference parser in `PARSERS`."""

    @property
    def markers(self) -> tuple[str, ...]:
        return self.call_markers + self.reasoning_markers + self.other_markers

    def parse(self, text: str, tools: list[dict] | None = None) -> ParseResult:
        """Find the calls in raw model text; never raises on malformed text.

        Args:
            text: raw model output (or an engine's `content`).
            tools: the OpenAI tools offered; their schemas type values the format writes as text.
        """
        return PARSERS[self.parser](text, tools)

    def find_markers(self, text: str) -> list[str]:
        """Markers in `text`, plus an opener prefix left dangling at its end, by first appearance."""
        found = {marker: index for marker in self.markers if (index := text.find(marker)) >= 0}
        for prefix in self._dangling_prefixes(text):
            found.setdefault(prefix, len(text) - len(prefix))
        return sorted(found, key=found.__getitem__)

    def _dangling_prefixes(self, text: str) -> list[str]:
        """For each opener, the longest proper prefix (at least `_MIN_PARTIAL` long) ending `text`."""
        prefixes = []
        for opener in self.call_openers:
            for length in range(len(opener) - 1, _MIN_PARTIAL - 1, -1):
                if text.endswith(opener[:length]):
                    prefixes.append(opener[:length])
                    break
        return prefixes


def load_families(path: Path | str = FAMILIES_PATH) -> tuple[Family, ...]:
    """Load and validate a families file; raises `FamiliesError` listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data, root = yaml.safe_load(text), yaml.compose(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise FamiliesError([f"{path}: {' '.join(str(error).split())}"]) from error
    problems = [_problem(path, root, data, list(e.absolute_path), e.message) for e in _validator().iter_errors(data)]
    problems += _cross_problems(path, root, data)
    if problems:
        raise FamiliesError(problems)
    return tuple(_family(entry) for entry in data["families"])


def get_family(family_id: str) -> Family:
    families = {family.id: family for family in all_families()}
    if family_id not in families:
        raise KeyError(f"unknown family {family_id!r}; known: {', '.join(families)}")
    return families[family_id]


@functools.cache
def all_families() -> tuple[Family, ...]:
    return load_families()


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


def _family(entry: dict[str, Any]) -> Family:
    return Family(
        id=entry["id"],
        title=entry["title"],
        call_markers=tuple(entry["call_markers"]),
        reasoning_markers=tuple(entry["reasoning_markers"]),
        other_markers=tuple(entry["other_markers"]),
        call_openers=tuple(entry["call_openers"]),
        parser=entry["parser"],
    )


def _cross_problems(path: Path, root: yaml.Node, data: dict) -> list[str]:
    """What the schema cannot say: unique ids, parsers that exist (on whatever entries are readable)."""
    families = data.get("families") if isinstance(data, dict) else None
    problems, seen = [], set()
    for index, entry in enumerate(families if isinstance(families, list) else []):
        family_id, parser = (entry.get("id"), entry.get("parser")) if isinstance(entry, dict) else (None, None)
        if isinstance(family_id, str) and family_id in seen:
            problems.append(_problem(path, root, data, ["families", index, "id"], f"duplicate id {family_id!r}"))
        seen.add(family_id)
        if isinstance(parser, str) and parser not in PARSERS:
            message = f"unknown parser {parser!r}; known: {', '.join(sorted(PARSERS))}"
            problems.append(_problem(path, root, data, ["families", index, "parser"], message))
    return problems


def _problem(path: Path, root: yaml.Node, data: Any, where: list, message: str) -> str:
    """`file:line: $.json_path: message (family 'id')`."""
    json_path = "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)
    family = _family_id(data, where)
    suffix = f" (family {family!r})" if family else ""
    return f"{path}:{_line(root, where)}: {json_path}: {message}{suffix}"


def _family_id(data: Any, where: list) -> str | None:
    if len(where) < 2 or where[0] != "families" or not isinstance(data, dict):
        return None
    entry = data["families"][where[1]]
    return entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else None


def _line(node: yaml.Node | None, where: list) -> int:
    """1-based line of the deepest node along `where` that exists."""
    line = node.start_mark.line + 1 if node else 1
    for part in where:
        if isinstance(node, yaml.MappingNode):
            node = next((value for key, value in node.value if key.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line + 1
    return line

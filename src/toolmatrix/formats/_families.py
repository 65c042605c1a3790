"""Families: a native format's markers and its reference parser, loaded from `families.yaml`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import SpecError, SpecErrors, YamlDoc, read_yaml, schema_errors

from ._model import ParseResult
from ._parsers import PARSERS

FAMILIES_PATH = Path(__file__).with_name("families.yaml")

_MIN_PARTIAL = 5
"""Shorter opener prefixes (`<too`) are too common in ordinary text to mean a held-back call."""


class FamiliesError(ToolmatrixError, ValueError):
    """`families.yaml` is invalid; `problems` holds one `file:line: family: $.json_path: message` per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid families file:\n" + "\n".join(problems))
        self.problems = tuple(problems)


@attrs.frozen
class Thinking:
    """How a thinking model of a family is served, and the markers that show in its text that it thinks."""

    style: str
    """The reasoning style its model cards' serve commands run: a key of the engines' ``reasoning_args``."""
    opens: str
    closes: str | None = None


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
    thinking_key: str | None = None
    """The chat_template_kwargs key a client turns its thinking on or off with; None: no such switch."""
    thinking: Thinking | None = None
    """None: no model of the family thinks."""

    @property
    def markers(self) -> tuple[str, ...]:
        return self.call_markers + self.reasoning_markers + self.other_markers

    def parse(self, text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
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
    try:
        doc = read_yaml(Path(path))
    except SpecErrors as exc:
        raise FamiliesError([str(e) for e in exc.errors]) from None
    errors = schema_errors(doc, "families.schema.json", where_of=lambda p: _family_id(doc.data, p))
    errors += _cross_problems(doc)
    if errors:
        raise FamiliesError([str(e) for e in errors])
    return tuple(_family(entry) for entry in doc.data["families"])


def get_family(family_id: str) -> Family:
    families = {family.id: family for family in all_families()}
    if family_id not in families:
        raise KeyError(f"unknown family {family_id!r}; known: {', '.join(families)}")
    return families[family_id]


@functools.cache
def all_families() -> tuple[Family, ...]:
    return load_families()


def _family(entry: dict[str, Any]) -> Family:
    return Family(
        id=entry["id"],
        title=entry["title"],
        call_markers=tuple(entry["call_markers"]),
        reasoning_markers=tuple(entry["reasoning_markers"]),
        other_markers=tuple(entry["other_markers"]),
        call_openers=tuple(entry["call_openers"]),
        parser=entry["parser"],
        thinking_key=entry.get("thinking_key"),
        thinking=Thinking(**entry["thinking"]) if "thinking" in entry else None,
    )


def _cross_problems(doc: YamlDoc) -> list[SpecError]:
    """What the schema cannot say: unique ids, parsers that exist (on whatever entries are readable)."""
    families = doc.data.get("families") if isinstance(doc.data, dict) else None
    problems, seen = [], set()
    for index, entry in enumerate(families if isinstance(families, list) else []):
        family_id, parser = (entry.get("id"), entry.get("parser")) if isinstance(entry, dict) else (None, None)
        where = family_id if isinstance(family_id, str) else ""
        if isinstance(family_id, str) and family_id in seen:
            problems.append(doc.error(("families", index, "id"), f"duplicate id {family_id!r}", where))
        seen.add(family_id)
        if isinstance(parser, str) and parser not in PARSERS:
            message = f"unknown parser {parser!r}; known: {', '.join(sorted(PARSERS))}"
            problems.append(doc.error(("families", index, "parser"), message, where))
    return problems


def _family_id(data: Any, where: tuple[str | int, ...]) -> str:
    if len(where) < 2 or where[0] != "families" or not isinstance(data, dict):
        return ""
    entry = data["families"][where[1]]
    family_id = entry.get("id") if isinstance(entry, dict) else None
    return family_id if isinstance(family_id, str) else ""

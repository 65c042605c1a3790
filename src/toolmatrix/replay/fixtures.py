"""Replay fixtures: one JSON object per line (schema: ``schemas/fixture.schema.json``), validated on load.

A file with one malformed line replays nothing: every problem is reported at once as
``path:line: $.field: message``, and the caller refuses the whole file (a half-replayed file would silently
shift a snapshot). Fields beyond the schema's are kept on ``Fixture.extra`` and written back unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import attrs

from toolmatrix.base import jsontext
from toolmatrix.base.atomic import write_text
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import validate_instance

SCHEMA = "fixture.schema.json"
_KNOWN = ("id", "family", "model", "text", "tools", "expected", "tags", "source", "reasoning_style", "token_ids",
          "tokenizer", "generation_prompt")


class FixtureError(ToolmatrixError, ValueError):
    """A fixture file that cannot be replayed; ``problems`` holds one ``file:line: $.path: message`` each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid fixture file:\n" + "\n".join(problems))
        self.problems = tuple(problems)


@attrs.frozen
class Expected:
    tool_calls: tuple[Mapping[str, Any], ...]
    """Each ``{"name", "arguments"}``, arguments a JSON object."""
    content: str | None
    reasoning: str | None


@attrs.frozen(eq=False)
class Fixture:
    """A model's raw output and what a correct parser makes of it."""

    id: str
    family: str
    model: str
    text: str
    tools: tuple[Mapping[str, Any], ...]
    expected: Expected
    tags: tuple[str, ...] = ()
    source: str = ""
    reasoning_style: str | None = None
    token_ids: tuple[int, ...] | None = None
    """The model's output as token ids of ``tokenizer`` (a path, a record's tokenizer label or a model name), when
    the fixture carries them; None: text only."""
    tokenizer: str | None = None
    generation_prompt: str | None = None
    """The rendered prompt's last part, the assistant's opening (``<|im_start|>assistant\n<think>\n``), where the
    fixture carries it: a prompt that opens (or opens and closes) the family's thinking says a thinking model wrote
    the text, and its server runs a reasoning parser."""
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    """Fields this version does not know, kept as read."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fixture:
        exp = data["expected"]
        return cls(
            id=data["id"], family=data["family"], model=data["model"], text=data["text"],
            tools=tuple(data["tools"]),
            expected=Expected(tuple(exp["tool_calls"]), exp["content"], exp["reasoning"]),
            tags=tuple(data.get("tags", ())), source=data.get("source", ""),
            reasoning_style=data.get("reasoning_style"),
            token_ids=tuple(data["token_ids"]) if "token_ids" in data else None, tokenizer=data.get("tokenizer"),
            generation_prompt=data.get("generation_prompt"),
            extra={k: v for k, v in data.items() if k not in _KNOWN},
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "family": self.family, "model": self.model, "text": self.text, "tools": list(self.tools),
            "expected": {"tool_calls": [dict(c) for c in self.expected.tool_calls],
                         "content": self.expected.content, "reasoning": self.expected.reasoning},
            "tags": list(self.tags), "source": self.source,
        }
        if self.reasoning_style is not None:
            out["reasoning_style"] = self.reasoning_style
        if self.token_ids is not None:
            out["token_ids"] = list(self.token_ids)
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.generation_prompt is not None:
            out["generation_prompt"] = self.generation_prompt
        return {**out, **self.extra}


def parse_lines(lines: Iterable[str], where: str) -> list[Fixture]:
    """Fixtures from JSONL text; raises ``FixtureError`` naming every bad line (nothing is returned then)."""
    fixtures: list[Fixture] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = jsontext.loads(line)
        except jsontext.NotJSON as exc:
            problems.append(f"{where}:{number}: $: not JSON ({exc})")
            continue
        found = validate_instance(data, SCHEMA)
        problems += [f"{where}:{number}: {p}" for p in found]
        if found:
            continue
        if data["id"] in seen:
            problems.append(f"{where}:{number}: $.id: {data['id']!r} already used on line {seen[data['id']]}")
            continue
        seen[data["id"]] = number
        fixtures.append(Fixture.from_dict(data))
    if problems:
        raise FixtureError(problems)
    return fixtures


def load_fixtures(path: Path | str) -> list[Fixture]:
    """Every fixture of a ``.jsonl`` file, or ``FixtureError`` with every problem and nothing replayed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureError([f"{path}: cannot read: {exc}"]) from None
    # split("\n"), not splitlines(): U+2028 and friends may sit raw inside a JSON string of model text.
    return parse_lines(text.split("\n"), str(path))


def dump_fixtures(fixtures: Iterable[Fixture], path: Path | str) -> int:
    """Write fixtures as JSONL (UTF-8, non-ASCII kept as is: the text is the model's bytes), whole or not at all,
    its folder made where missing; returns the count."""
    lines = [json.dumps(f.to_dict(), ensure_ascii=False) for f in fixtures]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(path), "".join(line + "\n" for line in lines))
    return len(lines)

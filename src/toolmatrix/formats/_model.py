"""What a reference parser returns."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class ParsedCall:
    """One tool call found in raw model text."""

    name: str
    arguments: dict[str, Any] | None
    """`None` when the arguments are not a JSON object or could not be decoded."""
    raw: str
    """The slice of text this call came from."""
    id: str | None = None
    """Only where the format carries an id (Kimi K2, Mistral `[CALL_ID]`)."""


@attrs.frozen
class ParseResult:
    """The calls found in a text, the text left over, and what could not be read."""

    calls: tuple[ParsedCall, ...]
    content: str
    """The text with the call blocks removed, stripped."""
    errors: tuple[str, ...]
    """One line per malformed or truncated block; parsers report, they never raise."""

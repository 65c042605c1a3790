"""The answer as every check reads it, whichever API surface it came over: one ``Message`` holding its ``Call``
objects; and ``Cut``, what is kept of an answer longer than the client keeps.

The readers (``chat``, ``responses``, ``messages``) fill these; nothing here knows any API.
"""

from __future__ import annotations

from typing import Any

import attrs

from toolmatrix.base import jsontext


@attrs.frozen
class Call:
    """A tool call as the engine returned it (``arguments`` is the raw string, or whatever non-string came)."""

    id: Any
    type: Any
    name: Any
    arguments: Any
    index: Any = None

    def parsed_arguments(self) -> dict[str, Any] | None:
        """The arguments as an object, or None when they are not a strict JSON string of an object."""
        if not isinstance(self.arguments, str):
            return None
        try:
            value = jsontext.loads(self.arguments)
        except jsontext.NotJSON:
            return None
        return value if isinstance(value, dict) else None


@attrs.frozen
class Message:
    """The assistant's answer, the same shape whether it came whole or in chunks."""

    content: str | None
    reasoning: str | None
    tool_calls: tuple[Call, ...]
    finish_reason: Any  # in the surface's own words
    cut: bool = False  # the output limit (max tokens) ended the answer


@attrs.frozen
class Cut:
    """An answer longer than the client keeps (``--max-answer-bytes``): the first ``limit_bytes`` are recorded."""

    limit_bytes: int
    received_bytes: int  # how many came: all of the answer when ``whole``, else as many as the deadline allowed
    whole: bool  # the answer ended (True), or the deadline stopped it first (False: it was longer still)

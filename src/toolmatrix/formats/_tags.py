"""Arguments written as tags around raw text (Qwen3-Coder, GLM, DeepSeek DSML, MiniMax-M2)."""

from __future__ import annotations

import re
from typing import Any

import attrs

from ._coerce import coerce
from ._scan import skip_ws


@attrs.frozen
class TagArguments:
    """A decoder (see `ItemSpec.decode`) for `<parameter=city>Paris</parameter>`-style arguments.

    The values are untyped text, typed from the tool's schema; a DSML `string="false"`
    value is JSON.
    """

    open: re.Pattern[str]
    """Opening tag of one argument; group `key`, optional group `string` (`true`/`false`)."""
    close: str
    """Closing tag of one argument."""
    call_close: str
    """Closing tag of the call, which may follow the last argument."""

    def __call__(self, text: str, pos: int, schemas: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        arguments: dict[str, Any] = {}
        pos = skip_ws(text, pos)
        while (tag := self.open.match(text, pos)) is not None:
            end = self._value_end(text, tag.end())
            if end is None:
                return None
            key = tag["key"].strip()
            literal = tag.groupdict().get("string") == "false"
            arguments[key] = coerce(_trim_newlines(text[tag.end() : end]), schemas.get(key), literal=literal)
            pos = skip_ws(text, end + len(self.close))
        return arguments, pos

    def _value_end(self, text: str, pos: int) -> int | None:
        """The closing tag followed by another argument or by the end of the call.

        A value is raw text and may itself contain a closing tag (Rapid-MLX #1515);
        falls back to the first closing tag when none is followed that way.
        """
        first = index = text.find(self.close, pos)
        while index >= 0:
            after = skip_ws(text, index + len(self.close))
            if self.open.match(text, after) or text.startswith(self.call_close, after):
                return index
            index = text.find(self.close, index + 1)
        return None if first < 0 else first


def _trim_newlines(value: str) -> str:
    """Drop the one newline templates put on each side of a value."""
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value

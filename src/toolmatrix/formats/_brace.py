"""Gemma 4 / FunctionGemma argument syntax: `{key:<|"|>text<|"|>,n:3,obj:{…},arr:[…]}`.

Not JSON: keys are bare, strings sit between a quote token, other values are bare.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from ._coerce import coerce
from ._scan import matched_end, skip_ws

_KEY = re.compile(r"\s*([^\s:{}\[\],<]+)\s*:")
_BARE = re.compile(r"[^,}\]]*")


class _Malformed(Exception):
    """Internal: the arguments cannot be read; the decoder answers None instead."""


@attrs.frozen
class BraceArguments:
    """A decoder (see `ItemSpec.decode`) for the brace syntax with string quote token `quote`."""

    quote: str

    def __call__(self, text: str, pos: int, schemas: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        pos = skip_ws(text, pos)
        if not text.startswith("{", pos):
            return None
        try:
            return self._object(text, pos, schemas)
        except (_Malformed, RecursionError):
            return None

    def _object(self, text: str, pos: int, schemas: dict[str, Any]) -> tuple[dict[str, Any], int]:
        result: dict[str, Any] = {}
        pos = skip_ws(text, pos + 1)
        if text.startswith("}", pos):
            return result, pos + 1
        while (key := _KEY.match(text, pos)) is not None:
            result[key[1]], pos = self._value(text, key.end(), schemas.get(key[1]))
            pos = skip_ws(text, pos)
            if text.startswith("}", pos):
                return result, pos + 1
            if not text.startswith(",", pos):
                break
            pos += 1
        raise _Malformed

    def _array(self, text: str, pos: int) -> tuple[list[Any], int]:
        result: list[Any] = []
        pos = skip_ws(text, pos + 1)
        if text.startswith("]", pos):
            return result, pos + 1
        while True:
            value, pos = self._value(text, pos, None)
            result.append(value)
            pos = skip_ws(text, pos)
            if text.startswith("]", pos):
                return result, pos + 1
            if not text.startswith(",", pos):
                raise _Malformed
            pos += 1

    def _value(self, text: str, pos: int, schema: Any) -> tuple[Any, int]:
        pos = skip_ws(text, pos)
        if text.startswith(self.quote, pos):
            end = text.find(self.quote, pos + len(self.quote))
            if end < 0:
                raise _Malformed
            return text[pos + len(self.quote) : end], end + len(self.quote)
        if text.startswith("{", pos):
            return self._object(text, pos, {})
        if text.startswith("[", pos):
            return self._array(text, pos)
        bare_end = matched_end(_BARE, text, pos)  # it matches everywhere, empty at worst
        bare = text[pos:bare_end].strip()
        if not bare:
            raise _Malformed
        # Bare values are numbers, booleans or null; returning them as strings is vLLM #47906.
        return coerce(bare, schema, literal=True), bare_end

"""pytest's own ``-k`` expression, for selections outside a pytest run (``replay-bisect -k``): the two select
alike, and only the plugin imports pytest."""

from __future__ import annotations

from typing import Callable, Sequence

from _pytest.mark import expression

from toolmatrix.base.errors import ToolmatrixError


def keyword_matcher(keyword: str) -> Callable[[Sequence[str]], bool]:
    """Whether ``keyword`` matches a thing by its names: each word of the expression a case-insensitive substring
    of one of them, joined by and, or, not and parentheses, as ``pytest -k`` matches test names. A
    ToolmatrixError for an expression that does not parse."""
    try:
        compiled = expression.Expression.compile(keyword)
    except (SyntaxError, getattr(expression, "ParseError", SyntaxError)) as exc:
        raise ToolmatrixError(f"-k {keyword!r}: {exc}") from None

    def matches(names: Sequence[str]) -> bool:
        lowered = [name.lower() for name in names]
        return compiled.evaluate(lambda word, /, **_: any(word.lower() in name for name in lowered))

    return matches

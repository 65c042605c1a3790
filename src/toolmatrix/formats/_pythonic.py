"""Python-call formats: `[f(a="x"), g(b=1)]` lists and ```` ```tool_code ```` fences.

Read with `ast` and `ast.literal_eval`: model output is never evaluated.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterator
from typing import Any, TypeGuard

from ._model import ParsedCall, ParseResult
from ._scan import Block, clip, find_end, gathered, scan, skip_ws

_WRAP_OPEN, _WRAP_END = "<|python_start|>", "<|python_end|>"  # Llama 4 wraps calls in these, optionally
_WRAP_CLOSE = re.compile(r"\s*" + re.escape(_WRAP_END))
# A bare list only counts as calls at the very start of the text (as vLLM's `pythonic` parser).
_LIST_OPENER = re.compile(re.escape(_WRAP_OPEN) + r"|\A\s*(?=\[)")
_CALL_LIST = re.compile(r"\[\s*[A-Za-z_]\w*\s*\(")
_FENCE = "```tool_code"
_FENCE_OPENER = re.compile(re.escape(_FENCE))
_QUOTES = "'\""


def parse_pythonic(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
    return scan(text, _LIST_OPENER, _read_list)


def parse_tool_code(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
    return scan(text, _FENCE_OPENER, _read_fence)


def _read_list(text: str, start: int) -> Block:
    wrapped = text.startswith(_WRAP_OPEN, start)
    pos = skip_ws(text, start + len(_WRAP_OPEN) if wrapped else start)
    if not _CALL_LIST.match(text, pos):
        if not wrapped:
            return Block(start, start)  # a list that is not calls is plain content
        end = find_end(text, _WRAP_END, pos)
        problem = f"no call list after {_WRAP_OPEN} at {start}: {clip(text[start:])}"
        return Block(start, len(text) if end is None else end, errors=(problem,))
    end = _bracket_end(text, pos)
    if end is None:
        return Block(start, len(text), errors=(f"truncated call list at {start}: {clip(text[start:])}",))
    close = _WRAP_CLOSE.match(text, end) if wrapped else None
    return _python_block(start, close.end() if close else end, text[pos:end])


def _read_fence(text: str, start: int) -> Block:
    body = start + len(_FENCE)
    end = text.find("```", body)
    if end < 0:
        return Block(start, len(text), errors=(f"unclosed {_FENCE} fence at {start}: {clip(text[start:])}",))
    return _python_block(start, end + 3, text[body:end])


def _bracket_end(text: str, pos: int) -> int | None:
    """Index just past the bracket closing the one at `pos`; brackets in string literals do not count."""
    depth = 0
    while pos < len(text):
        char = text[pos]
        if char in _QUOTES:
            string_end = _string_end(text, pos)
            if string_end is None:
                return None
            pos = string_end
            continue
        depth += (char in "([{") - (char in ")]}")
        pos += 1
        if depth == 0:
            return pos
    return None


def _string_end(text: str, pos: int) -> int | None:
    quote, pos = text[pos], pos + 1
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == quote:
            return pos + 1
        else:
            pos += 1
    return None


def _python_block(start: int, end: int, source: str) -> Block:
    source = source.strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes in model text are not our warnings
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # MemoryError: parser stack overflow
        return Block(start, end, errors=(f"not Python calls at {start}: {clip(source)}",))
    segments = _Segments(source)
    return gathered(start, end, (_call(node, segments) for node in _call_nodes(tree)))


class _Segments:
    """The source text of AST nodes. ``ast.get_source_segment`` splits the whole source into lines on every call,
    which made a list of n calls cost n^2 (40 s for 4,000); here the lines are found once."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()  # ast's column offsets count UTF-8 bytes
        # The line ends ast counts (as get_source_segment splits them): \r\n, \r or \n.
        self.line_starts = [0] + [m.end() for m in re.finditer(rb"\r\n|\r|\n", self.data)]

    def of(self, node: ast.expr | ast.stmt) -> str:
        # ast.parse sets every node's end; the type says None only for nodes made by hand.
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset
        return self.data[start:end].decode()


def _call_nodes(tree: ast.Module) -> Iterator[ast.expr | ast.stmt]:
    """The calls of each statement: a call, a list of calls, or `print(call)` (Google's tool_code)."""
    for statement in tree.body:
        node: ast.expr | ast.stmt = statement.value if isinstance(statement, ast.Expr) else statement
        if _is_print(node):
            node = node.args[0]
        yield from node.elts if isinstance(node, ast.List) else [node]


def _is_print(node: ast.AST) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "print"
        and len(node.args) == 1
        and not node.keywords
    )


def _call(node: ast.expr | ast.stmt, segments: _Segments) -> tuple[ParsedCall | None, str | None]:
    raw = segments.of(node)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None, f"not a function call: {clip(raw)}"
    name = node.func.id
    if node.args or any(keyword.arg is None for keyword in node.keywords):
        return ParsedCall(name, None, raw), f"call {name!r} has positional arguments: {clip(raw)}"
    try:
        literals = {keyword.arg: ast.literal_eval(keyword.value) for keyword in node.keywords}
        # The round trip turns tuples into lists and rejects what JSON cannot hold (sets, bytes).
        arguments = json.loads(json.dumps(literals))
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return ParsedCall(name, None, raw), f"arguments of {name!r} are not literals: {clip(raw)}"
    return ParsedCall(name, arguments, raw), None

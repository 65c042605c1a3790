"""One reader of results: no module outside ``toolmatrix.records`` opens a results.jsonl itself. It asks the reader
(``scan_records``, ``scan_fields``, ``read_records``), so every reader of records gets their migration, their checks
and a damaged line named by file and line. A source scan: a call that opens, reads or globs a path built from
``RECORDS`` or a ``"results.jsonl"`` literal, or from a name bound to one, is reading records itself."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from toolmatrix.records import RECORDS

PACKAGE = Path(__file__).parents[2] / "src" / "toolmatrix"
OPENING = {"open", "read_text", "read_bytes", "glob", "rglob"}  # calls that read a file, or find files to read


def _names_records(node: ast.AST, bound: set[str]) -> bool:
    """Whether an expression holds the records file's name: ``RECORDS``, a literal naming it, or a name in ``bound``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and RECORDS in sub.value:
            return True
        if isinstance(sub, ast.Name) and (sub.id == "RECORDS" or sub.id in bound):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "RECORDS":
            return True
    return False


def _bindings(tree: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(value, target) of every binding: an assignment, a loop, a comprehension, a ``with ... as``."""
    found: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [(node.value, target) for target in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            found.append((node.value, node.target))
        elif isinstance(node, (ast.For, ast.comprehension)):
            found.append((node.iter, node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            found.append((node.context_expr, node.optional_vars))
    return found


def opens_records(source: str) -> list[int]:
    """The lines of ``source`` where a call opens, reads or globs a records file (by module: a name bound to the
    records file's path anywhere in it counts everywhere in it, which errs towards naming a line)."""
    tree = ast.parse(source)
    bindings, bound = _bindings(tree), set()
    while True:  # a path bound to a name, then that name bound on (``path = d / RECORDS; for line in path.open()``)
        more = {n.id for value, target in bindings if _names_records(value, bound)
                for n in ast.walk(target) if isinstance(n, ast.Name)} - bound
        if not more:
            break
        bound |= more
    return sorted({node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in OPENING)
        or (isinstance(node.func, ast.Name) and node.func.id == "open")) and _names_records(node, bound)})


@pytest.mark.parametrize("source", [
    """
    for path in sorted(results_dir.glob("*/results.jsonl")):
        records = [json.loads(line) for line in path.open()]
    """,
    """
    with (directory / RECORDS).open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    """,
    """
    where = run / records.RECORDS
    lines = where.read_text().splitlines()
    """,
    """
    for run in runs:
        with open(run / "results.jsonl") as handle:
            first = handle.readline()
    """,
], ids=["glob", "open", "bound-name", "builtin-open"])
def test_the_scan_names_a_module_that_reads_records_itself(source):
    assert opens_records(textwrap.dedent(source))


def test_the_scan_passes_a_path_named_only_in_a_message():
    source = 'raise ResultsError(f"{directory / RECORDS}:{number}: not a replay record")\nhandle = run_json.open()\n'
    assert opens_records(source) == []


def test_no_module_outside_records_opens_a_results_file():
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if "records" not in path.relative_to(PACKAGE).parts[:1]
             for line in opens_records(path.read_text(encoding="utf-8"))]
    assert found == [], f"read records through toolmatrix.records.reader (scan_fields, scan_records): {found}"

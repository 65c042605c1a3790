"""BFCL's single-turn categories as toolmatrix cases, converted from the pinned ``bfcl-eval`` package's own data.

The Berkeley Function Calling Leaderboard ships its questions (``bfcl_eval/data/BFCL_v4_CATEGORY.json``, one JSON
object a line) and accepted answers (``possible_answer/BFCL_v4_CATEGORY.json``) inside its wheel. Only those files
are read: not one module of bfcl-eval is imported (its runtime pulls torch, several vendors' SDKs and a pinned
numpy), so ``pip install --no-deps bfcl-eval==BFCL_EVAL`` is all it takes. Nothing is copied into the repo: a
``bfcl:CATEGORY`` case source is converted when a run starts (``case_source``), and ``toolmatrix bfcl-export``
writes the same document as an ordinary case file.

What changes on the way, and why:

- Function docs are BFCL's "Gorilla" schemas: ``dict``, ``float``, ``tuple``, ``any``, ``optional: true`` on a
  property, ``required: true`` on a property. ``json_schema`` turns them into JSON Schema (draft 2020-12): dict ->
  object, float -> number, tuple/list -> array, bool -> boolean, any -> no ``type`` (any value); ``optional`` and
  a non-list ``required`` are dropped (the object's ``required`` list says what is required). An ``enum`` whose
  values do not fit the declared type (a string enum on an integer, boolean or array) would make every value of
  that type invalid: on an array it moves to ``items``; elsewhere it is dropped, because BFCL's checker enforces
  the type, not the enum.
- Tool names: BFCL replaces ``.`` with ``_`` for every OpenAI-style function-calling model (``math.factorial``
  -> ``math_factorial``); so does this conversion, in the tools and in the expected calls.
- Accepted answers: each argument of an expected call lists its acceptable values, ``""`` meaning "may be left
  out". ``argument_matcher`` maps them onto the case matchers so that any accepted value passes: numbers, booleans
  and null are ``any_of`` (3 == 3.0 as in BFCL); strings are a ``regex`` that ignores what BFCL's
  ``standardize_string`` removes (case, spaces and ``,./-_*^``, ``'`` vs ``"``); lists and dicts become a
  ``schema`` matcher built the same way (a dict answer refuses keys BFCL's ``dict_checker`` would refuse);
  ``""`` wraps the matcher in ``optional``; an argument whose only accepted value is ``""`` is ``absent``, and so
  is every parameter of the tool that the answer does not name (BFCL fails an unexpected parameter).
- Several expected calls (parallel categories) match order-free, as BFCL's parallel checker does.
- irrelevance and live_irrelevance expect no call; live_relevance expects some call, any tool and arguments.

Case ids are ``bfcl_CATEGORY.BFCL_ID`` and the category ``bfcl_CATEGORY``: the loader wants every id to start
with its file's category.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

from toolmatrix.base.atomic import write_text
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.serving.registry import cache_dir

BFCL_EVAL = "2026.3.23"  # the bfcl-eval release these categories and counts were read from (pyproject's bfcl extra)
INSTALL = f"pip install --no-deps bfcl-eval=={BFCL_EVAL}"
SOURCE_PREFIX = "bfcl:"

# toolmatrix category -> BFCL's file stem. BFCL v4 split "simple" by language; Java's and JavaScript's answers are
# source text of those languages, not JSON arguments, so only the Python one is taken.
CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
    "live_irrelevance": "live_irrelevance",
    "live_relevance": "live_relevance",
}
NO_CALL = frozenset({"irrelevance", "live_irrelevance"})  # any call is wrong
ANY_CALL = frozenset({"live_relevance"})  # BFCL scores a call to any offered tool as right

_TYPES = {"dict": "object", "object": "object", "float": "number", "number": "number", "integer": "integer",
          "string": "string", "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array",
          "tuple": "array"}
_UNTYPED = frozenset({"any"})
_SEPARATORS = "[ ,./_*^-]*"  # what standardize_string (bfcl_eval/eval_checker/ast_eval/ast_checker.py) removes


class BfclUnavailable(ToolmatrixError):
    """bfcl-eval is not installed, or the category is not one of ``CATEGORIES``: a usage error, one line."""


def data_dir() -> Path:
    """bfcl-eval's data folder, found through its installed distribution (importing it would load its runtime)."""
    try:
        distribution = importlib.metadata.distribution("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        raise BfclUnavailable(f"bfcl-eval is not installed; its data is what bfcl: cases are made of: {INSTALL}") from None
    return Path(str(distribution.locate_file("bfcl_eval/data")))


def _bfcl_stem(category: str) -> str:
    if category not in CATEGORIES:
        raise BfclUnavailable(f"unknown BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    return CATEGORIES[category]


def _json_lines(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a JSON line: {exc.msg}") from None


def tool_name(name: str) -> str:
    return name.replace(".", "_")


def _fits(value: Any, kind: str) -> bool:
    return jsonschema.Draft202012Validator({"type": kind}).is_valid(value)


def json_schema(node: dict, where: str = "") -> dict:
    """One BFCL parameter schema (or a property of one) as JSON Schema; see the module docstring for the rules."""
    out: dict = {}
    for key, value in node.items():
        if key == "type":
            if value in _UNTYPED:
                continue
            if value not in _TYPES:
                raise ValueError(f"{where}: unknown BFCL type {value!r}")
            out["type"] = _TYPES[value]
        elif key == "properties":
            out["properties"] = {name: json_schema(sub, f"{where}.{name}") for name, sub in value.items()}
        elif key == "items":
            out["items"] = json_schema(value, f"{where}[]")
        elif key == "optional" or (key == "required" and not isinstance(value, list)):
            continue
        else:
            out[key] = value
    kind = out.get("type")
    if "enum" in out and kind and not all(_fits(v, kind) for v in out["enum"]):
        enum = out.pop("enum")
        if kind == "array":
            out["items"] = {**out.get("items", {}), "enum": enum}
    return out


def _spelled(text: str) -> str:
    """A regex for every string BFCL's standardize_string maps to the same text as ``text``."""
    standard = re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')
    return _SEPARATORS.join("['\"]" if ch == '"' else re.escape(ch) for ch in standard)


def string_regex(options: list[str]) -> str:
    spelled = [_spelled(o) for o in dict.fromkeys(options)]
    body = spelled[0] if len(spelled) == 1 else "(?:" + "|".join(spelled) + ")"
    return f"(?i)^{_SEPARATORS}{body}{_SEPARATORS}$"


def _value_schema(value: Any) -> dict:
    """A JSON Schema accepting what BFCL accepts for one literal answer value."""
    if isinstance(value, str):
        return {"type": "string", "pattern": string_regex([value])}
    if isinstance(value, list):
        items = [_answer_object(v) if isinstance(v, dict) else _value_schema(v) for v in value]
        exact = {"minItems": len(items), "maxItems": len(items)}
        return {"type": "array", "prefixItems": items, **exact} if items else {"type": "array", **exact}
    if isinstance(value, dict):  # a literal object (BFCL's answers nest one level of accepted lists, not two)
        return _answer_object({k: [v] for k, v in value.items()})
    return {"const": value}


def _any_of_schemas(values: list) -> dict | bool:
    schemas = [_value_schema(v) for v in values]
    if not schemas:
        return False  # only "" accepted: the key must not be there
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def _answer_object(answer: dict) -> dict:
    """A dict answer, ``{key: [accepted values]}``: BFCL's dict_checker refuses unknown keys and missing ones
    whose list has no ``""``."""
    accepted = {k: v if isinstance(v, list) else [v] for k, v in answer.items()}
    return {
        "type": "object",
        "properties": {k: _any_of_schemas([x for x in v if x != ""]) for k, v in accepted.items()},
        "required": [k for k, v in accepted.items() if "" not in v],
        "additionalProperties": False,
    }


def argument_matcher(accepted: list) -> Any:
    """The case matcher that passes any value BFCL accepts for one argument (``""`` in the list: may be left out)."""
    present = [v for v in accepted if v != ""]
    if not present:
        return {"absent": True}
    if all(isinstance(v, str) for v in present):
        matcher: Any = {"regex": string_regex(present)}
    elif all(v is None or isinstance(v, (bool, int, float)) for v in present):
        matcher = present[0] if len(present) == 1 else {"any_of": present}
    else:
        schemas = [_answer_object(v) if isinstance(v, dict) else _value_schema(v) for v in present]
        matcher = {"schema": schemas[0] if len(schemas) == 1 else {"anyOf": schemas}}
    return {"optional": matcher} if len(present) < len(accepted) else matcher


def _expected_call(answer: dict, tools: dict[str, dict]) -> dict:
    (name, arguments), = answer.items()
    offered = tools.get(tool_name(name), {}).get("function", {}).get("parameters", {}).get("properties", {})
    matchers = {arg: argument_matcher(values) for arg, values in arguments.items()}
    matchers.update({p: {"absent": True} for p in offered if p not in arguments})
    return {"name": tool_name(name), "arguments": matchers}


def _tool(function: dict, where: str) -> dict:
    body = {"name": tool_name(function["name"]), "description": function.get("description", ""),
            "parameters": json_schema(function["parameters"], f"{where}.{function['name']}")}
    return {"type": "function", "function": body}


def _case(category: str, question: dict, answer: dict | None) -> dict:
    where = f"BFCL {category} {question['id']}"
    if len(question["question"]) != 1:
        raise ValueError(f"{where}: {len(question['question'])} turns; the single-turn categories have one")
    tools = {t["function"]["name"]: t for t in (_tool(f, where) for f in question["function"])}
    if category in NO_CALL:
        expect: dict = {"no_call": True}
    elif category in ANY_CALL:
        expect = {"any_call": True}
    else:
        if answer is None:
            raise ValueError(f"{where}: no possible answer")
        expect = {"calls": [_expected_call(a, tools) for a in answer["ground_truth"]]}
    return {
        "id": f"bfcl_{category}.{question['id']}",
        "description": f"BFCL {CATEGORIES[category]} {question['id']} (bfcl-eval {BFCL_EVAL})",
        "tools": list(tools.values()),
        "messages": [{"role": m["role"], "content": m["content"]} for m in question["question"][0]],
        "expect": expect,
    }


def case_document(category: str) -> dict:
    """One BFCL category as a case-file document (what ``toolmatrix bfcl-export`` writes)."""
    stem = _bfcl_stem(category)
    data = data_dir()
    questions = data / f"BFCL_v4_{stem}.json"
    answers_file = data / "possible_answer" / f"BFCL_v4_{stem}.json"
    answers = {a["id"]: a for a in _json_lines(answers_file)} if answers_file.exists() else {}
    return {
        "schema_version": 1,
        "category": f"bfcl_{category}",
        "description": f"BFCL {stem}, converted from bfcl-eval {BFCL_EVAL}'s data by toolmatrix.library.bfcl",
        "cases": [_case(category, q, answers.get(q["id"])) for q in _json_lines(questions)],
    }


def _dump(document: dict) -> str:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True, width=10**6)


def write_case_file(category: str, path: Path) -> int:
    """Write one category as a case file (atomically: a concurrent reader sees the old file or the new one)."""
    document = case_document(category)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, _dump(document))
    return len(document["cases"])


def case_source(spec: str, convert: bool = True) -> Path:
    """A ``--cases`` value as a path: ``bfcl:CATEGORY`` is a case file in the cache, converted now unless
    ``convert`` is false (an xdist worker, whose controller has just written it); anything else is a path."""
    if not spec.startswith(SOURCE_PREFIX):
        return Path(spec)
    category = spec[len(SOURCE_PREFIX):]
    _bfcl_stem(category)
    path = cache_dir() / "bfcl" / BFCL_EVAL / f"bfcl_{category}.yaml"
    if convert:
        write_case_file(category, path)
    return path


def category_table() -> str:
    """The BFCL categories toolmatrix converts, with their case counts in the installed bfcl-eval (Markdown)."""
    rows = ["| `--cases` | BFCL file | cases | expectation |", "|---|---|---:|---|"]
    for category, stem in CATEGORIES.items():
        count = sum(1 for _ in _json_lines(data_dir() / f"BFCL_v4_{stem}.json"))
        expect = "no call" if category in NO_CALL else "any call" if category in ANY_CALL else "accepted calls"
        rows.append(f"| `bfcl:{category}` | `BFCL_v4_{stem}.json` | {count} | {expect} |")
    return "\n".join(rows)

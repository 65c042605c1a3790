"""Fuzzed cases (``--fuzz N``): tool schemas, and the values to call them with, drawn by hypothesis from a seed.

Each case offers one to three generated tools (parameters: nested objects and arrays, enums of strings and of
numbers, ``anyOf``, nullable types, integers past 2^53 and 2^64, floats, unicode text, ``additionalProperties:
false``, a required subset of the properties) and asks the model to call one of them with values drawn for its
schema; the expectation holds exactly those values (``checks.value_matches``: 3 == 3.0, an object compared whole,
an optional property left out must stay out). Engines break on schema shapes nobody wrote a case for: a grammar
built from the schema, a parser that turns a 20-digit integer into a double, an ``anyOf`` a converter refuses.

The cases are written as an ordinary case file (YAML text) and loaded by the case loader like any other: what
runs is exactly what ``toolmatrix fuzz-keep`` writes out for a failure, which then reproduces it without
hypothesis, forever.

Drawing outside a test, reproducibly: hypothesis's own runner, ``@given`` under its ``@seed`` decorator (the
documented way to make hypothesis draw a given sequence), with the example database off, the generate phase
only (no shrinking: the examples are wanted, not a minimal failure), no deadline and no health checks; the test
body collects the examples. Case N of seed S is the second example under ``@seed("S.N")`` (the first is
hypothesis's simplest, the same for every seed). One thing would still make a draw differ between processes:
hypothesis's own provider now and then puts in a literal it collected from the source of the *local* modules
loaded at that moment (toolmatrix's, when it is installed editable; a user's conftest), so a controller and its
xdist workers, or two versions of toolmatrix, would draw other cases for one seed. The draws therefore go
through that same provider less that pool, registered as a backend (``settings(backend=...)``, hypothesis's
documented, if experimental, extension point); the edge values it would have added are drawn on purpose here
(2^53, 2^64, markup in text). For one seed and one hypothesis version the case ``fuzz.S.N`` is always the same;
run.json keeps the version.
"""

from __future__ import annotations

import json
import secrets
import warnings
from typing import Any

import attrs
import hypothesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning
from hypothesis.internal.conjecture.providers import AVAILABLE_PROVIDERS, HypothesisProvider

from toolmatrix.library.cases import Case, load_case_text

CATEGORY = "fuzz"
SEED_LIMIT = 2**32  # a fresh seed is below this: short enough to type again
BACKEND = "toolmatrix-fuzz"


class _SourceBlindProvider(HypothesisProvider):
    """hypothesis's own provider, less the constants it takes from the source of whatever local modules are loaded
    (which differ between processes and versions, and would change the draw of a seed)."""

    def _maybe_draw_constant(self, choice_type: Any, constraints: Any, *, p: float = 0.05) -> None:
        return None


AVAILABLE_PROVIDERS[BACKEND] = _SourceBlindProvider

Shape = tuple[dict, st.SearchStrategy]  # a JSON Schema and a strategy of values it accepts

# Text the model is asked to copy: letters, marks, digits, punctuation, symbols and spaces of every script (no
# control, format, surrogate or unassigned code points: those test the transport, not tool calling).
# Some text that means something to a parser: markup of the tool-call formats, JSON, strings that look like numbers.
TRICKY = ("</tool_call>", "<tool_call>", '{"a": 1}', '"', "\\", "null", "true", "12", "1e5", "\\u00e9", "𝄞", "٣")
TEXT = st.one_of(st.text(st.characters(codec="utf-8", categories=("L", "M", "N", "P", "S", "Zs")), min_size=1,
                         max_size=12), st.sampled_from(TRICKY))
# Small ones, any 64-bit one and beyond, and the neighbourhood of 2^53 where a double stops holding every integer.
INTEGERS = st.one_of(st.integers(-1000, 1000), st.integers(-(2**65), 2**65), st.integers(2**53 - 2, 2**53 + 3),
                     st.sampled_from((-(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**53) - 1)))
FLOATS = st.one_of(st.floats(-1e6, 1e6).map(lambda x: round(x, 3)),
                   st.floats(allow_nan=False, allow_infinity=False))
NUMBER_OPTIONS = st.one_of(st.integers(-100, 100), st.floats(-100, 100).map(lambda x: round(x, 2)))
KEY = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
TOOL_NAME = st.from_regex(r"[a-z][a-z0-9]{1,8}([_.-][a-z0-9]{1,8}){0,2}", fullmatch=True)
CHOICES = ("auto", "required", "named")


def _string_enum(options: list[str]) -> Shape:
    return {"type": "string", "enum": options}, st.sampled_from(options)


def _number_enum(options: list[int | float], typed: bool) -> Shape:
    schema: dict = {"enum": options}
    if typed:
        schema = {"type": "integer" if all(isinstance(o, int) for o in options) else "number", **schema}
    return schema, st.sampled_from(options)


LEAVES: st.SearchStrategy[Shape] = st.one_of(
    st.just(({"type": "string"}, TEXT)),
    st.lists(TEXT, min_size=1, max_size=4, unique=True).map(_string_enum),
    st.just(({"type": "integer"}, INTEGERS)),
    st.just(({"type": "number"}, st.one_of(FLOATS, INTEGERS))),
    st.builds(_number_enum, st.lists(NUMBER_OPTIONS, min_size=1, max_size=4, unique=True), st.booleans()),
    st.just(({"type": "boolean"}, st.booleans())),
)


def _nullable(shape: Shape, as_type_list: bool) -> Shape:
    schema, values = shape
    if as_type_list and isinstance(schema.get("type"), str) and "enum" not in schema:
        schema = {**schema, "type": [schema["type"], "null"]}
    else:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema, st.one_of(st.none(), values)


def _any_of(shapes: list[Shape]) -> Shape:
    return {"anyOf": [s for s, _ in shapes]}, st.one_of(*(v for _, v in shapes))


def _array(shape: Shape, min_items: int) -> Shape:
    schema = {"type": "array", "items": shape[0], **({"minItems": min_items} if min_items else {})}
    return schema, st.lists(shape[1], min_size=min_items, max_size=min_items + 2)


@st.composite
def objects(draw: st.DrawFn, children: st.SearchStrategy[Shape], min_keys: int = 0, max_keys: int = 4) -> Shape:
    """An object schema: named properties, some of them required, maybe closed (``additionalProperties:
    false``); its values hold every required property and some of the others."""
    keys = draw(st.lists(KEY, min_size=min_keys, max_size=max_keys, unique=True))
    shapes = {key: draw(children) for key in keys}
    required = [key for key in keys if draw(st.booleans())]
    schema: dict = {"type": "object", "properties": {key: s for key, (s, _) in shapes.items()}}
    if required:
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    values = st.fixed_dictionaries({k: shapes[k][1] for k in required},
                                   optional={k: v for k, (_, v) in shapes.items() if k not in required})
    return schema, values


def _extend(children: st.SearchStrategy[Shape]) -> st.SearchStrategy[Shape]:
    return st.one_of(
        st.builds(_nullable, children, st.booleans()),
        st.builds(_any_of, st.lists(children, min_size=2, max_size=3)),
        st.builds(_array, children, st.integers(0, 2)),
        objects(children, max_keys=3),
    )


SHAPES: st.SearchStrategy[Shape] = st.recursive(LEAVES, _extend, max_leaves=6)


@attrs.frozen
class Drawn:
    """One generated scenario: the tools offered, which one to call with what, and the tool_choice sent."""

    tools: tuple[tuple[str, dict], ...]  # (name, parameters schema)
    target: int
    arguments: dict
    choice: str  # auto | required | named


@st.composite
def scenarios(draw: st.DrawFn) -> Drawn:
    """A whole case: one to three tools with their parameter schemas, the call wanted and the tool_choice."""
    names = draw(st.lists(TOOL_NAME, min_size=1, max_size=3, unique=True))
    shapes = [draw(objects(SHAPES, min_keys=1)) for _ in names]
    target = draw(st.integers(0, len(names) - 1))
    return Drawn(tuple(zip(names, (s for s, _ in shapes))), target, draw(shapes[target][1]),
                 draw(st.sampled_from(CHOICES)))


def draw_scenario(seed: int, number: int) -> Drawn:
    """Case ``number`` of ``seed``: the example hypothesis draws under ``@seed("SEED.NUMBER")`` after its simplest one
    (a case does not depend on how many are asked for, so ``--fuzz 5`` runs the first five of ``--fuzz 30``)."""
    drawn: list[Drawn] = []

    @hypothesis.seed(f"{seed}.{number}")
    @settings(max_examples=2, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False, backend=BACKEND)
    @given(scenarios())
    def collect(scenario: Drawn) -> None:
        drawn.append(scenario)

    with warnings.catch_warnings():
        # A run draws its cases while pytest configures, on purpose: hypothesis warns of strategies built then
        # (a plugin's import should not slow every test run; only a fuzzed run draws), with the strategy's repr,
        # which warns again of its own size.
        warnings.simplefilter("ignore", HypothesisWarning)
        collect()
    return drawn[-1]  # the first is hypothesis's simplest example, the same for every seed


def _matcher(value: Any) -> Any:
    # A literal matcher cannot be an object (one key would read as an operator): an object is compared whole.
    return {"equals": value} if isinstance(value, dict) else value


def prompt(name: str, arguments: dict) -> str:
    return (f"Call the tool {name} exactly once, with exactly these arguments (JSON). Copy every value exactly as "
            f"written, every digit and every character:\n{json.dumps(arguments, ensure_ascii=False)}")


def case_entry(drawn: Drawn, seed: int, number: int) -> dict:
    """The case-file form of one scenario: inline tools, the user's request, the exact call expected."""
    name, schema = drawn.tools[drawn.target]
    expected = {key: _matcher(value) for key, value in drawn.arguments.items()}
    expected.update({key: {"absent": True} for key in schema["properties"] if key not in drawn.arguments})
    entry: dict = {
        "id": f"{CATEGORY}.{seed}.{number}",
        "description": f"generated: --fuzz-seed {seed}, case {number} (hypothesis {hypothesis.__version__})",
        "tools": [{"type": "function", "function": {"name": tool, "description": f"Generated tool {i + 1}.",
                                                    "parameters": parameters}}
                  for i, (tool, parameters) in enumerate(drawn.tools)],
        "messages": [{"role": "user", "content": prompt(name, drawn.arguments)}],
    }
    if drawn.choice != "auto":
        entry["tool_choice"] = "required" if drawn.choice == "required" else {"function": name}
    entry["expect"] = {"calls": [{"name": name, "arguments": expected}]}
    return entry


def case_file(entries: list[dict], description: str) -> str:
    """A case file of category ``fuzz`` holding ``entries``, as YAML text."""
    doc = {"schema_version": 1, "category": CATEGORY, "description": description, "cases": entries}
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors: a schema shared by two places is written out twice, as a person would."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def fuzz_entries(seed: int, count: int) -> list[dict]:
    """The case-file entries of ``--fuzz count --fuzz-seed seed``, numbered from 0."""
    return [case_entry(draw_scenario(seed, n), seed, n) for n in range(count)]


def fuzz_cases(seed: int, count: int, validate: bool = True) -> list[Case]:
    """The generated cases, loaded from their case-file text; each carries its seed for its records."""
    text = case_file(fuzz_entries(seed, count), f"Generated by toolmatrix --fuzz {count} --fuzz-seed {seed}.")
    cases = load_case_text(text, f"<--fuzz {count} --fuzz-seed {seed}>", validate)
    return [attrs.evolve(case, fuzz_seed=seed) for case in cases]


def fresh_seed() -> int:
    return secrets.randbelow(SEED_LIMIT)


@attrs.frozen
class FuzzRun:
    """What run.json keeps of a fuzzed run: enough to draw the same cases again."""

    seed: int
    count: int
    hypothesis: str = hypothesis.__version__

    def to_dict(self) -> dict:
        return attrs.asdict(self)

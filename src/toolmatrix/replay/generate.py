"""Generated fixtures: every case's expected answer in each family's native format, plus the variants real models
produce, each with the result a correct parser gives.

Case expectations are matchers (``regex``, ``any_of`` ...); a fixture needs concrete arguments, so each matcher
gets a witness value that the matcher itself accepts (``checks.value_matches``). A case whose matchers have no
witness here is skipped and counted, never guessed.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from toolmatrix.judge.checks import value_matches
from toolmatrix.library.cases import Case, load_cases

from .fixtures import Expected, Fixture
from .writers import TURNS, Call, Style, answer, llama3_tagged

# family -> (model id, reasoning style): registered ids of engines/models.yaml where one exists, so the
# reasoning parser comes from the same place as on the live tier; the style is written on each fixture.
FAMILY_MODELS: dict[str, tuple[str, str | None]] = {
    "hermes": ("qwen3", "qwen3"),
    "qwen3_coder": ("qwen3-coder", None),
    "llama3_json": ("llama3.1", None),
    "pythonic": ("llama3.2-pythonic", None),
    "llama4": ("llama4-scout", None),
    "mistral_v11": ("mistral-small3.2", None),
    "harmony": ("gpt-oss-20b", "harmony"),
    "deepseek_v3": ("deepseek-r1-0528", "deepseek_v3"),
    "deepseek_v31": ("deepseek-v3.1", "deepseek_v3"),
    "kimi_k2": ("kimi-k2", None),
    "glm45": ("glm4.5-air", "glm45"),
    "glm47": ("glm4.7", "glm45"),
    "minimax_m2": ("minimax-m2", "minimax_m2"),
    "gemma4": ("gemma4", "gemma4"),
    "granite": ("granite3.3", None),
    "phi4_mini": ("phi4-mini", None),
}

THOUGHT = "The user wants the weather, so I call the tool."
PREAMBLE = "Let me check that for you."
AFTER = "I will report back."

# The replay's own tool set, for variants no case of the library has (nested and empty arguments, unicode).
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}, "filters": {"type": "object"},
                                         "limit": {"type": "integer"}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]
WEATHER = ("get_weather", {"city": "Paris"})
UNICODE = ("get_weather", {"city": "Zürich «東京» \"Nord\" \\ tab\tend – 🌧", "unit": "°C"})
NESTED = ("search", {"query": "hotels", "filters": {"stars": [4, 5], "area": {"name": "Old Town", "near": None},
                                                    "pool": True}, "limit": 3})
EMPTY: Call = ("ping", {})


def _regex_witness(pattern: str) -> str | None:
    """A string the pattern matches, for the simple patterns cases use; None when this reading fails."""
    text = re.sub(r"\(\?[a-z]+\)", "", pattern)
    text = re.sub(r"\\s\*|\\s\+|\\b|\^|\$|\.\*|\.\+", "", text)
    text = re.sub(r"\(([^()|]*)(\|[^()]*)?\)\??", r"\1", text)  # first alternative of each group
    text = re.sub(r"\[([^\]])[^\]]*\]", r"\1", text)  # first character of each class
    text = text.replace("\\", "")
    return text if text and re.search(pattern, text) else None


def _witness(matcher: Any) -> tuple[bool, Any]:
    if isinstance(matcher, dict) and len(matcher) == 1:
        (op, arg), = matcher.items()
        if op in ("any_of",) and arg:
            return True, arg[0]
        if op in ("equals", "const"):
            return True, arg
        if op == "contains":
            return True, arg
        if op == "regex":
            value = _regex_witness(arg)
            return value is not None, value
        if op == "schema" and isinstance(arg, dict) and "const" in arg:
            return True, arg["const"]
        if op == "schema" and arg == {"type": "null"}:
            return True, None
        if op in ("schema", "absent"):
            return False, None
    return True, matcher


# A value of each JSON type for a required property no matcher names (a case that checks the call's name only).
_TYPE_WITNESS: dict[str, Any] = {"string": "x", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}


def _required_fill(case: Case, name: str, args: dict) -> dict | None:
    """The tool schema's required properties the matchers left out, given a value of their type: a model's call
    carries them, and without them every parser's correct answer fails the live ``arguments_schema`` check."""
    tool: dict[str, Any] = next((t["function"] for t in case.tools if t.get("function", {}).get("name") == name), {})
    params = tool.get("parameters") or {}
    fill = {}
    for key in params.get("required", ()):
        if key in args:
            continue
        prop = (params.get("properties") or {}).get(key, {})
        if prop.get("enum"):
            fill[key] = prop["enum"][0]
        elif prop.get("type") in _TYPE_WITNESS:
            fill[key] = _TYPE_WITNESS[prop["type"]]
        else:
            return None  # no honest witness: the case is skipped, not guessed
    return fill


def case_calls(case: Case) -> list[tuple[str, dict]] | None:
    """Concrete calls that satisfy the case's expectation, or None when no witness is known."""
    calls = []
    for expected in case.expect.calls:
        args = {}
        for key, matcher in expected.arguments.items():
            if matcher == {"absent": True}:
                continue  # a correct call leaves the key out
            ok, value = _witness(matcher)
            if not ok or not value_matches(matcher, value):
                return None
            args[key] = value
        fill = _required_fill(case, expected.name, args)
        if fill is None:
            return None
        calls.append((expected.name, {**args, **fill}))
    return calls


def _fixture(fid: str, family: str, text: str, tools: Iterable[dict], calls: Sequence[Call], content: str | None,
             reasoning: str | None, tags: list[str], source: str) -> Fixture:
    model, style = FAMILY_MODELS[family]
    return Fixture(id=fid, family=family, model=model, text=text, tools=tuple(tools),
                   expected=Expected(tuple({"name": n, "arguments": a} for n, a in calls), content, reasoning),
                   tags=tuple(tags), source=source, reasoning_style=style)


class _Family:
    """One family's fixture maker: every answer laid out as its template does (``answer``), a model that always
    reasons given its thought, and forms no template writes made robustness probes (source ``probe:``)."""

    def __init__(self, family: str) -> None:
        self.family, self.turn = family, TURNS[family]
        self.thought = THOUGHT if self.turn.always_reasons else None

    def make(self, fid: str, tools: Iterable[dict], calls: Sequence[Call], tags: list[str], variant: str,
             content: str | None = None, reasoning: str | None = None, *, text: str | None = None,
             probe: bool = False, thinks: bool = True, **how: Any) -> Fixture:
        if reasoning is None and thinks:
            reasoning = self.thought
        if text is None:
            text = answer(self.family, calls, content, reasoning, **how)
        source = f"probe:{variant}" if probe else f"generated:{variant}"
        return _fixture(fid, self.family, text, tools, calls, content, reasoning,
                        [*tags, "robustness"] if probe else tags, source)


def family_fixtures(family: str, cases: list[Case]) -> Iterator[Fixture]:
    """Every fixture of one family: the cases' answers (plain, text beside the calls, reasoning), their loose-spaced
    probes, then the variants."""
    maker, turn = _Family(family), TURNS[family]
    for case in cases:
        calls = case_calls(case)
        if not calls:
            continue
        base, tools = f"{family}.{case.id}", case.tools
        if turn.one_call and len(calls) > 1:
            if family == "llama3_json":  # engines accept `; `-joined calls: a probe, never what the template writes
                yield maker.make(f"{base}.tagged", tools, calls, ["case", "parallel"], "tagged", probe=True,
                                 write=llama3_tagged)
            continue
        yield maker.make(f"{base}.plain", tools, calls, ["case"], "plain")
        yield maker.make(f"{base}.loose", tools, calls, ["case", "whitespace"], "loose", probe=True,
                         style=Style(loose=True))
        if turn.text_gap is not None:
            yield maker.make(f"{base}.text_before", tools, calls, ["case", "text_before"], "text_before", PREAMBLE)
        if turn.think is not None and not turn.always_reasons:
            yield maker.make(f"{base}.think", tools, calls, ["case", "reasoning"], "think", reasoning=THOUGHT)
    yield from _variants(maker, turn)


def _variants(maker: _Family, turn) -> Iterator[Fixture]:
    family, base = maker.family, f"{maker.family}.variant"
    plain = answer(family, [WEATHER], reasoning=maker.thought)
    yield maker.make(f"{base}.text_only", TOOLS, [], ["no_call"], "text_only", "It is sunny in Paris.")
    yield maker.make(f"{base}.unicode", TOOLS, [UNICODE], ["unicode", "escapes"], "unicode")
    yield maker.make(f"{base}.nested", TOOLS, [NESTED], ["nested"], "nested")
    yield maker.make(f"{base}.empty_args", TOOLS, [EMPTY], ["empty_args"], "empty_args")
    stock = ("get_stock", {"ticker": "ACME"})
    yield maker.make(f"{base}.unknown_tool", TOOLS, [stock], ["unknown_tool", "contested"], "unknown_tool")
    # A call cut off mid-arguments (max_tokens): no call can be recovered; what reaches content is policy.
    yield maker.make(f"{base}.truncated", TOOLS, [], ["truncated", "contested"], "truncated",
                     text=plain[: max(1, len(plain) * 2 // 3)])
    if turn.text_after:  # the template's own place for text beside calls
        yield maker.make(f"{base}.text_after", TOOLS, [WEATHER], ["text_after"], "text_after", AFTER,
                         text=f"{plain}{AFTER}")
    elif family != "harmony":
        yield maker.make(f"{base}.text_after", TOOLS, [WEATHER], ["text_after", "contested"], "text_after", AFTER,
                         text=f"{plain}\n{AFTER}", probe=True)
    if family == "llama3_json":
        yield maker.make(f"{base}.python_tag", TOOLS, [WEATHER], ["python_tag"], "python_tag", probe=True,
                         write=llama3_tagged)
        yield maker.make(f"{base}.text_before", TOOLS, [WEATHER], ["text_before"], "text_before", PREAMBLE,
                         text=f"{PREAMBLE}\n\n{plain}", probe=True)
    if turn.history is not None:  # the template's layout of a past call, which the model does not generate
        yield maker.make(f"{base}.history_layout", TOOLS, [WEATHER], ["history_layout"], "history_layout",
                         write=turn.history)
    if family == "harmony":
        # gpt-oss rarely calls without an analysis message first; one variant keeps that path, in each layout.
        yield maker.make(f"{base}.call_first", TOOLS, [WEATHER], [], "call_first", thinks=False)
        yield maker.make(f"{base}.history_layout_call_first", TOOLS, [WEATHER], ["history_layout"],
                         "history_layout_call_first", thinks=False, write=turn.history)
    three: list[Call] = [WEATHER, ("get_weather", {"city": "Tokyo"}), NESTED]
    if not turn.one_call:
        yield maker.make(f"{base}.three_calls", TOOLS, three, ["parallel"], "three_calls")
        yield maker.make(f"{base}.three_calls_loose", TOOLS, three, ["parallel", "whitespace"], "three_calls_loose",
                         probe=True, style=Style(loose=True))
    if turn.think is not None:
        yield maker.make(f"{base}.think_unicode", TOOLS, [UNICODE], ["reasoning", "unicode"], "think_unicode",
                         reasoning="Zürich? «東京»!")
        # The call written inside the thinking block: reasoning, not a call (vLLM #39056 shows both readings).
        inner = f"{THOUGHT}\n{answer(family, [WEATHER])}"
        yield maker.make(f"{base}.call_in_think", TOOLS, [], ["reasoning", "call_in_reasoning", "contested"],
                         "call_in_think", reasoning=inner)


def in_sample(case_id: str, every: int) -> bool:
    """Whether a case is in the 1-in-``every`` sample: chosen by a hash of its id, so a case stays in or out as the
    library grows and two snapshots of the sample stay comparable."""
    return int.from_bytes(hashlib.sha256(case_id.encode()).digest()[:8], "big") % every == 0


def generate(case_paths: Iterable[Path], families: Iterable[str] | None = None, every: int = 1) -> list[Fixture]:
    """All generated fixtures, families in ``FAMILY_MODELS`` order (ids stable across runs); with ``every`` > 1
    the cases' fixtures of one case in ``every`` (``in_sample``) and every variant."""
    cases = [case for case in load_cases(list(case_paths)) if in_sample(case.id, every)]
    wanted = list(families) if families is not None else list(FAMILY_MODELS)
    return [fixture for family in wanted for fixture in family_fixtures(family, cases)]

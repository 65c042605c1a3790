"""Generated fixtures: every case's expected answer in each family's native format, plus the variants real models
produce, each with the result a correct parser gives.

Case expectations are matchers (``regex``, ``any_of`` ...); a fixture needs concrete arguments, so each matcher
gets a witness value that the matcher itself accepts (``checks.value_matches``). A case whose matchers have no
witness here is skipped and counted, never guessed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from toolmatrix.cases import Case, load_cases
from toolmatrix.checks import value_matches

from .fixtures import Expected, Fixture
from .writers import WRITERS, Style, final_text, think_wrap

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
EMPTY = ("ping", {})


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
    tool = next((t["function"] for t in case.tools if t.get("function", {}).get("name") == name), {})
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


def _fixture(fid: str, family: str, text: str, tools: Iterable[dict], calls: list, content: str | None,
             reasoning: str | None, tags: list[str], variant: str) -> Fixture:
    model, style = FAMILY_MODELS[family]
    if family == "harmony":  # the generation prompt ends with <|start|>assistant: a completion never repeats it
        text = text.removeprefix("<|start|>assistant")
    return Fixture(id=fid, family=family, model=model, text=text, tools=tuple(tools),
                   expected=Expected(tuple({"name": n, "arguments": a} for n, a in calls), content, reasoning),
                   tags=tuple(tags), source=f"generated:{variant}", reasoning_style=style)


def family_fixtures(family: str, cases: list[Case]) -> Iterator[Fixture]:
    """Every fixture of one family: the cases' answers (plain, text before, loose spacing), then the variants."""
    write, (_, style) = WRITERS[family], FAMILY_MODELS[family]
    one_call = family == "harmony"  # <|call|> ends a Harmony completion: one call each
    for case in cases:
        calls = case_calls(case)
        if not calls or (one_call and len(calls) > 1):
            continue
        base = f"{family}.{case.id}"
        yield _fixture(f"{base}.plain", family, write(calls, Style()), case.tools, calls, None, None,
                       ["case"], "plain")
        yield _fixture(f"{base}.loose", family, write(calls, Style(loose=True)), case.tools, calls, None, None,
                       ["case", "whitespace"], "loose")
        if family != "harmony":
            yield _fixture(f"{base}.text_before", family, f"{PREAMBLE}\n\n{write(calls, Style())}", case.tools,
                           calls, PREAMBLE, None, ["case", "text_before"], "text_before")
        if style:
            yield _fixture(f"{base}.think", family, think_wrap(style, THOUGHT, write(calls, Style())), case.tools,
                           calls, None, THOUGHT, ["case", "reasoning"], "think")
    yield from _variants(family, write, style, one_call)


def _variants(family: str, write, style: str | None, one_call: bool) -> Iterator[Fixture]:
    base = f"{family}.variant"
    plain = write([WEATHER], Style())
    yield _fixture(f"{base}.text_only", family, final_text(family, "It is sunny in Paris."), TOOLS, [],
                   "It is sunny in Paris.", None, ["no_call"], "text_only")
    yield _fixture(f"{base}.unicode", family, write([UNICODE], Style()), TOOLS, [UNICODE], None, None,
                   ["unicode", "escapes"], "unicode")
    yield _fixture(f"{base}.nested", family, write([NESTED], Style()), TOOLS, [NESTED], None, None,
                   ["nested"], "nested")
    yield _fixture(f"{base}.empty_args", family, write([EMPTY], Style()), TOOLS, [EMPTY], None, None,
                   ["empty_args"], "empty_args")
    yield _fixture(f"{base}.unknown_tool", family, write([("get_stock", {"ticker": "ACME"})], Style()), TOOLS,
                   [("get_stock", {"ticker": "ACME"})], None, None, ["unknown_tool", "contested"], "unknown_tool")
    # A call cut off mid-arguments (max_tokens): no call can be recovered; what reaches content is policy.
    yield _fixture(f"{base}.truncated", family, plain[: max(1, len(plain) * 2 // 3)], TOOLS, [], None, None,
                   ["truncated", "contested"], "truncated")
    if family != "harmony":
        yield _fixture(f"{base}.text_after", family, f"{plain}\n{AFTER}", TOOLS, [WEATHER], AFTER, None,
                       ["text_after", "contested"], "text_after")
    if not one_call:
        three = [WEATHER, ("get_weather", {"city": "Tokyo"}), NESTED]
        yield _fixture(f"{base}.three_calls", family, write(three, Style()), TOOLS, three, None, None,
                       ["parallel"], "three_calls")
        yield _fixture(f"{base}.three_calls_loose", family, write(three, Style(loose=True)), TOOLS, three, None,
                       None, ["parallel", "whitespace"], "three_calls_loose")
    if style:
        yield _fixture(f"{base}.think_unicode", family, think_wrap(style, "Zürich? «東京»!", write([UNICODE], Style())),
                       TOOLS, [UNICODE], None, "Zürich? «東京»!", ["reasoning", "unicode"], "think_unicode")
        # The call written inside the thinking block: reasoning, not a call (vLLM #39056 shows both readings).
        inner = f"{THOUGHT}\n{plain}"
        yield _fixture(f"{base}.call_in_think", family, think_wrap(style, inner, "") if style != "harmony"
                       else f"<|channel|>analysis<|message|>{inner}<|end|>", TOOLS, [], None, inner,
                       ["reasoning", "call_in_reasoning", "contested"], "call_in_think")


def generate(case_paths: Iterable[Path], families: Iterable[str] | None = None) -> list[Fixture]:
    """All generated fixtures, families in ``FAMILY_MODELS`` order (ids stable across runs)."""
    cases = load_cases(list(case_paths))
    wanted = list(families) if families is not None else list(FAMILY_MODELS)
    return [fixture for family in wanted for fixture in family_fixtures(family, cases)]

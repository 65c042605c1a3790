"""toolmatrix.formats: the literal examples of reference/formats.md, robustness on broken text,
markers, value typing from tool schemas, and the families data file."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolmatrix.base.specs import load_schema
from toolmatrix.formats import FamiliesError, Family, ParsedCall, ParseResult, all_families, get_family, load_families
from toolmatrix.formats._families import FAMILIES_PATH

REQUIRED_IDS = (
    "hermes", "qwen3_coder", "llama3_json", "pythonic", "llama4", "mistral_v3", "mistral_v11", "harmony",
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "kimi_k2", "glm45", "glm47", "granite", "gemma3", "gemma4",
    "functiongemma", "minimax_m2", "phi4_mini",
)  # fmt: skip
FAMILY_IDS = tuple(family.id for family in all_families())

WEATHER = ("get_weather", {"city": "Paris"})
TIME = ("get_time", {"tz": "Europe/Paris"})
WEATHER_JSON = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
TIME_JSON = '{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}'
LLAMA_WEATHER = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
LLAMA_TIME = '{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}'
PYTHONIC_TWO = '[get_weather(city="Paris"), get_time(tz="Europe/Paris")]'
HERMES_WEATHER = f"<tool_call>\n{WEATHER_JSON}\n</tool_call>"
HERMES_TIME = f"<tool_call>\n{TIME_JSON}\n</tool_call>"
QWEN_CODER_WEATHER = "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
KIMI_WEATHER = (
    '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
)
KIMI_TIME = '<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{"tz": "Europe/Paris"}<|tool_call_end|>'
HARMONY_ARGS = '<|constrain|>json<|message|>{"city":"Paris"}<|call|>'
DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS3_WEATHER = (
    '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>'
)
DS3_TIME = '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{"tz": "Europe/Paris"}\n```<｜tool▁call▁end｜>'
DS31_WEATHER = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>'
DS31_TIME = '<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{"tz": "Europe/Paris"}<｜tool▁call▁end｜>'
DSML_WEATHER = (
    '<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
)
DSML_TIME = (
    '<｜DSML｜invoke name="get_time">\n'
    '<｜DSML｜parameter name="tz" string="true">Europe/Paris</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
)
GLM45_WEATHER = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
GLM45_TIME = "<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>Europe/Paris</arg_value>\n</tool_call>"
GEMMA4_WEATHER = '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'
GEMMA4_TIME = '<|tool_call>call:get_time{tz:<|"|>Europe/Paris<|"|>}<tool_call|>'
MINIMAX_WEATHER = '<invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>'
MINIMAX_TIME = '<invoke name="get_time"><parameter name="tz">Europe/Paris</parameter></invoke>'


def example(case_id: str, family: str, text: str, calls: list, content: str = ""):
    return pytest.param(family, text, calls, content, id=case_id)


# The literal examples of reference/formats.md (one call; two parallel calls where the format has them).
EXAMPLES = [
    example("hermes-one", "hermes", HERMES_WEATHER, [WEATHER]),
    example("hermes-two", "hermes", HERMES_WEATHER + "\n" + HERMES_TIME, [WEATHER, TIME]),
    example(
        "hermes-reversed-keys",
        "hermes",
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
        [WEATHER],
    ),
    example("hermes-parameters-key", "hermes", f"<tool_call>\n{LLAMA_WEATHER}\n</tool_call>", [WEATHER]),
    example("qwen3_coder-one", "qwen3_coder", f"<tool_call>\n{QWEN_CODER_WEATHER}\n</tool_call>", [WEATHER]),
    example(
        "qwen3_coder-two-llamacpp-spacing",
        "qwen3_coder",
        "<tool_call>\n<function=special_function> <parameter=arg1>1\n</parameter>\n</function> </tool_call>"
        "<tool_call>\n<function=get_weather> <parameter=city>Paris\n</parameter>\n</function> </tool_call>",
        [("special_function", {"arg1": "1"}), WEATHER],
    ),
    example("qwen3_coder-no-opening-tag", "qwen3_coder", QWEN_CODER_WEATHER, [WEATHER]),
    example("llama3_json-tag", "llama3_json", "<|python_tag|>" + LLAMA_WEATHER, [WEATHER]),
    example("llama3_json-bare", "llama3_json", LLAMA_WEATHER, [WEATHER]),
    example("llama3_json-two-semicolon", "llama3_json", f"{LLAMA_WEATHER}; {LLAMA_TIME}", [WEATHER, TIME]),
    example("json_lines-two", "json_lines", f"{WEATHER_JSON}\n{TIME_JSON}", [WEATHER, TIME]),
    example("json_lines-after-words", "json_lines",
            f"Checking.\n  {WEATHER_JSON}", [WEATHER], "Checking."),
    example("pythonic-one", "pythonic", '[get_weather(city="Paris")]', [WEATHER]),
    example("pythonic-two", "pythonic", PYTHONIC_TWO, [WEATHER, TIME]),
    example("llama4-one", "llama4", '[get_weather(city="Paris")]', [WEATHER]),
    example("llama4-two", "llama4", PYTHONIC_TWO, [WEATHER, TIME]),
    example("llama4-wrapped", "llama4", f"<|python_start|>{PYTHONIC_TWO}<|python_end|>", [WEATHER, TIME]),
    example("mistral_v3-one", "mistral_v3", f"[TOOL_CALLS] [{WEATHER_JSON}]", [WEATHER]),
    example("mistral_v3-two", "mistral_v3", f"[TOOL_CALLS] [{WEATHER_JSON}, {TIME_JSON}]", [WEATHER, TIME]),
    example("mistral_v11-one", "mistral_v11", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', [WEATHER]),
    example(
        "mistral_v11-two",
        "mistral_v11",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{"tz": "Europe/Paris"}',
        [WEATHER, TIME],
    ),
    example(
        "mistral_v11-call-id",
        "mistral_v11",
        '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}',
        [WEATHER],
    ),
    example(
        "harmony-channel",
        "harmony",
        "<|channel|>analysis<|message|>Need the weather for Paris.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather " + HARMONY_ARGS,
        [WEATHER],
        "<|channel|>analysis<|message|>Need the weather for Paris.<|end|>",
    ),
    example(
        "harmony-role-header",
        "harmony",
        "<|start|>assistant to=functions.get_weather<|channel|>commentary " + HARMONY_ARGS,
        [WEATHER],
    ),
    example(
        "harmony-analysis-recipient",
        "harmony",
        '<|channel|>analysis to=functions.get_weather code<|message|>{"city": "Paris"}<|call|>',
        [WEATHER],
    ),
    example("deepseek_v3-one", "deepseek_v3", DS_BEGIN + DS3_WEATHER + DS_END, [WEATHER]),
    example("deepseek_v3-two", "deepseek_v3", DS_BEGIN + DS3_WEATHER + "\n" + DS3_TIME + DS_END, [WEATHER, TIME]),
    example("deepseek_v31-one", "deepseek_v31", DS_BEGIN + DS31_WEATHER + DS_END, [WEATHER]),
    example("deepseek_v31-two", "deepseek_v31", DS_BEGIN + DS31_WEATHER + DS31_TIME + DS_END, [WEATHER, TIME]),
    example(
        "deepseek_v32-one",
        "deepseek_v32",
        "<｜DSML｜function_calls>\n" + DSML_WEATHER + "</｜DSML｜function_calls>",
        [WEATHER],
    ),
    example(
        "deepseek_v32-two-v4-spelling",
        "deepseek_v32",
        "<｜DSML｜tool_calls>\n" + DSML_WEATHER + DSML_TIME + "</｜DSML｜tool_calls>",
        [WEATHER, TIME],
    ),
    example(
        "kimi_k2-one", "kimi_k2", "<|tool_calls_section_begin|>" + KIMI_WEATHER + "<|tool_calls_section_end|>", [WEATHER]
    ),
    example(
        "kimi_k2-two",
        "kimi_k2",
        "<|tool_calls_section_begin|>" + KIMI_WEATHER + KIMI_TIME + "<|tool_calls_section_end|>",
        [WEATHER, TIME],
    ),
    example("glm45-one", "glm45", GLM45_WEATHER, [WEATHER]),
    example("glm45-two", "glm45", GLM45_WEATHER + "\n" + GLM45_TIME, [WEATHER, TIME]),
    example("glm47-one", "glm47", GLM45_WEATHER.replace("\n", ""), [WEATHER]),
    example("glm47-two", "glm47", (GLM45_WEATHER + GLM45_TIME).replace("\n", ""), [WEATHER, TIME]),
    example("granite-3.0", "granite", f"<|tool_call|>[{WEATHER_JSON}]", [WEATHER]),
    example("granite-3.1-two", "granite", f"<tool_call>[{WEATHER_JSON}, {TIME_JSON}]", [WEATHER, TIME]),
    example("gemma3-template", "gemma3", HERMES_WEATHER + "\n" + HERMES_TIME, [WEATHER, TIME]),
    example("gemma3-pythonic", "gemma3", PYTHONIC_TWO, [WEATHER, TIME]),
    example("gemma3-tool_code", "gemma3", '```tool_code\nprint(get_weather(city="Paris"))\n```', [WEATHER]),
    example("gemma4-one", "gemma4", GEMMA4_WEATHER, [("get_weather", {"location": "Paris"})]),
    example("gemma4-two", "gemma4", GEMMA4_WEATHER + GEMMA4_TIME, [("get_weather", {"location": "Paris"}), TIME]),
    example(
        "functiongemma-one",
        "functiongemma",
        "<start_function_call>call:get_weather{location:<escape>London<escape>}<end_function_call>",
        [("get_weather", {"location": "London"})],
    ),
    example("minimax_m2-one", "minimax_m2", f"<minimax:tool_call>{MINIMAX_WEATHER}</minimax:tool_call>", [WEATHER]),
    example(
        "minimax_m2-two",
        "minimax_m2",
        f"<minimax:tool_call>{MINIMAX_WEATHER}\n{MINIMAX_TIME}</minimax:tool_call>",
        [WEATHER, TIME],
    ),
    example("phi4_mini-vllm", "phi4_mini", f"functools[{WEATHER_JSON}]", [WEATHER]),
    example(
        "phi4_mini-sglang", "phi4_mini", f"<|tool_call|>[{WEATHER_JSON}, {TIME_JSON}]<|/tool_call|>", [WEATHER, TIME]
    ),
]
EXAMPLE_TEXTS = [(param.values[0], param.values[1]) for param in EXAMPLES]
ALL_TOKENS = sorted({token for family in all_families() for token in family.markers + family.call_openers})


def names_and_arguments(result: ParseResult) -> list[tuple[str, dict | None]]:
    return [(call.name, call.arguments) for call in result.calls]


def assert_well_formed(family: Family, text: str) -> ParseResult:
    result = family.parse(text)
    assert isinstance(result, ParseResult)
    assert all(isinstance(call, ParsedCall) and isinstance(call.name, str) for call in result.calls)
    assert all(call.arguments is None or isinstance(call.arguments, dict) for call in result.calls)
    assert all(isinstance(error, str) and "\n" not in error for error in result.errors)
    assert result.content == result.content.strip()
    return result


# --- the examples -----------------------------------------------------------------------------


def test_every_required_family_exists():
    assert set(REQUIRED_IDS) <= set(FAMILY_IDS)


def test_every_family_has_an_example():
    assert {family for family, _ in EXAMPLE_TEXTS} == set(FAMILY_IDS)


@pytest.mark.parametrize(("family", "text", "calls", "content"), EXAMPLES)
def test_example_parses_to_exact_calls(family, text, calls, content):
    result = get_family(family).parse(text)
    assert names_and_arguments(result) == calls
    assert result.content == content
    assert result.errors == ()


def test_kimi_returns_the_call_ids():
    text = "<|tool_calls_section_begin|>" + KIMI_WEATHER + KIMI_TIME + "<|tool_calls_section_end|>"
    assert [call.id for call in get_family("kimi_k2").parse(text).calls] == [
        "functions.get_weather:0",
        "functions.get_time:1",
    ]


def test_mistral_call_id_variant_returns_the_id():
    (call,) = get_family("mistral_v11").parse('[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}').calls
    assert call.id == "abcDEF123"


def test_formats_without_ids_return_none():
    assert [call.id for call in get_family("hermes").parse(HERMES_WEATHER + HERMES_TIME).calls] == [None, None]


def test_text_around_calls_stays_in_content():
    result = get_family("hermes").parse("Let me check.\n" + HERMES_WEATHER + "\nDone.")
    assert result.content == "Let me check.\n\nDone."


@pytest.mark.parametrize(
    ("family", "text", "raws"),
    [
        pytest.param("hermes", HERMES_WEATHER, [WEATHER_JSON], id="json-object"),
        pytest.param("pythonic", '[get_weather(city="Paris"), get_time(tz="Europe/Paris")]',
                     ['get_weather(city="Paris")', 'get_time(tz="Europe/Paris")'], id="list-element"),
        pytest.param("glm47", "x" + GLM45_WEATHER.replace("\n", "") + "y", [GLM45_WEATHER.replace("\n", "")], id="item"),
    ],
)  # fmt: skip
def test_raw_is_the_slice_of_each_call(family, text, raws):
    assert [call.raw for call in get_family(family).parse(text).calls] == raws


@pytest.mark.parametrize(
    ("family", "text"),
    [
        pytest.param("llama3_json", '{"answer": 4}', id="llama3-json-answer"),
        pytest.param("pythonic", "[1, 2, 3] are the numbers.", id="pythonic-plain-list"),
        pytest.param("hermes", "No tools needed: 4.", id="hermes-plain"),
        pytest.param("harmony", "<|channel|>final<|message|>It is 20°C.<|return|>", id="harmony-final"),
    ],
)
def test_text_without_calls_is_content(family, text):
    assert get_family(family).parse(text) == ParseResult(calls=(), content=text, errors=())


# --- marker text inside values -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "text", "arguments"),
    [
        pytest.param(
            "hermes",
            '<tool_call>{"name":"echo","arguments":{"text":"a </tool_call> b {x}"}}</tool_call>',
            {"text": "a </tool_call> b {x}"},
            id="hermes",
        ),
        pytest.param(
            "llama3_json",
            '<|python_tag|>{"name": "echo", "parameters": {"text": "x\\"; {\\"name\\": \\"y\\"}"}}',
            {"text": 'x"; {"name": "y"}'},
            id="llama3_json",
        ),
        pytest.param(
            "mistral_v3",
            '[TOOL_CALLS] [{"name": "echo", "arguments": {"text": "]}] [TOOL_CALLS]"}}]',
            {"text": "]}] [TOOL_CALLS]"},
            id="mistral_v3",
        ),
        pytest.param(
            "mistral_v11",
            '[TOOL_CALLS]echo[ARGS]{"text": "[TOOL_CALLS]x[ARGS]{}"}',
            {"text": "[TOOL_CALLS]x[ARGS]{}"},
            id="mistral_v11",
        ),
        pytest.param(
            "qwen3_coder",
            "<tool_call>\n<function=echo>\n<parameter=text>\na </parameter> b </tool_call> c\n</parameter>\n"
            "</function>\n</tool_call>",
            {"text": "a </parameter> b </tool_call> c"},
            id="qwen3_coder",
        ),
        pytest.param(
            "harmony",
            '<|channel|>commentary to=functions.echo<|message|>{"text": "<|call|>"}<|call|>',
            {"text": "<|call|>"},
            id="harmony",
        ),
        pytest.param(
            "gemma4",
            '<|tool_call>call:echo{text:<|"|>a}<tool_call|>,b:[<|"|>}<tool_call|>',
            {"text": "a}<tool_call|>,b:["},
            id="gemma4",
        ),
        pytest.param(
            "pythonic", '[echo(text="a)], [b(")]', {"text": "a)], [b("}, id="pythonic"
        ),
    ],
)
def test_marker_text_inside_a_value_is_kept(family, text, arguments):
    result = get_family(family).parse(text)
    assert names_and_arguments(result) == [("echo", arguments)]
    assert result.content == ""


# --- broken and truncated text -----------------------------------------------------------------


@pytest.mark.parametrize(("family", "text", "calls", "content"), EXAMPLES)
def test_every_prefix_parses_without_inventing_calls(family, text, calls, content):
    expected = [tuple(call) for call in calls]
    for cut in range(len(text)):
        result = assert_well_formed(get_family(family), text[:cut])
        assert all(call in expected for call in names_and_arguments(result)), (cut, text[:cut])


@pytest.mark.parametrize(("family", "text", "calls", "content"), EXAMPLES)
def test_example_cut_by_one_character_reports_an_error(family, text, calls, content):
    """Losing the last character is an error, unless it belongs to an optional closer (`<|python_end|>`)."""
    result = get_family(family).parse(text[:-1])
    assert result.errors or names_and_arguments(result) == calls


GARBAGE = [
    "",
    "   ",
    "\x00",
    "<tool_call>",
    "<tool_call></tool_call>",
    "<tool_call>{}</tool_call>",
    "<tool_call>[1, {\"name\": 3}]</tool_call>",
    "[TOOL_CALLS]",
    "[TOOL_CALLS][ARGS]",
    "[TOOL_CALLS]x[ARGS][1]",
    "<|python_tag|>; ;",
    "<|python_tag|>" + "[" * 5000,
    "<tool_call>" + "{\"a\":" * 5000,
    "[f(a=" + "[" * 300 + "]" * 300 + ")]",
    "[f(a=x)]",
    "[f(*a, **b)]",
    "[f(1, 2)]",
    "[f(a={1, 2})]",
    "[f(a=b'x')]",
    "[f(a=1e999)]",
    "[f(a=" + "9" * 5000 + ")]",
    "<|python_start|><|python_end|>",
    "```tool_code\nimport os\n```",
    "```tool_code\n  f(\n```",
    "to=functions.",
    "<|start|>assistant to=functions.x<|message|>",
    "<|channel|>commentary to=functions.f<|message|>[]<|call|>",
    DS_BEGIN + DS_END,
    DS_BEGIN + "<｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{]```<｜tool▁call▁end｜>",
    "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" string=\"false\">{</｜DSML｜invoke>",
    "<|tool_calls_section_begin|><|tool_call_begin|>:0<|tool_call_argument_begin|>",
    "<tool_call><arg_key>a</arg_key><arg_value>",
    "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>junk</tool_call>",
    "<|tool_call>call:f{a:" + "{a:" * 3000,
    "<|tool_call>call:f{a:<|\"|>x}<tool_call|>",
    "<|tool_call>call:f{:1,,}<tool_call|>",
    "<start_function_call>call:f{a:<escape>",
    "<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">",
    "functools[",
    "<|tool_call|>[{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}]<|/tool_call|>",
]


@pytest.mark.parametrize("family", FAMILY_IDS)
def test_garbage_never_raises(family):
    for text in GARBAGE:
        assert_well_formed(get_family(family), text)


@pytest.mark.parametrize(
    ("family", "text", "name"),
    [
        pytest.param("hermes", '<tool_call>{"name": "f", "arguments": "oops"}</tool_call>', "f", id="hermes-string-args"),
        pytest.param("mistral_v3", '[TOOL_CALLS] [{"name": "f", "arguments": [1]}]', "f", id="mistral_v3-array-args"),
        pytest.param("mistral_v11", "[TOOL_CALLS]f[ARGS][1]", "f", id="mistral_v11-array-args"),
        pytest.param("harmony", "<|channel|>commentary to=functions.f<|message|>not json<|call|>", "f", id="harmony"),
        pytest.param(
            "deepseek_v31",
            DS_BEGIN + "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{oops<｜tool▁call▁end｜>" + DS_END,
            "f",
            id="deepseek_v31",
        ),
        pytest.param("gemma4", "<|tool_call>call:f{a:<|\"|>x}<tool_call|>", "f", id="gemma4-unclosed-string"),
        pytest.param("pythonic", '[f(a=__import__("os").system("true"))]', "f", id="pythonic-not-literal"),
        pytest.param(
            "glm47", "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>junk</tool_call>", "f", id="glm47-junk"
        ),
    ],
)
def test_broken_arguments_of_a_delimited_call_give_none(family, text, name):
    result = get_family(family).parse(text)
    assert names_and_arguments(result) == [(name, None)]
    assert len(result.errors) == 1


def test_double_encoded_arguments_are_decoded():
    text = '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>'
    assert names_and_arguments(get_family("hermes").parse(text)) == [("f", {"a": 1})]


def test_unclosed_hermes_block_is_an_error_not_a_call():
    result = get_family("hermes").parse('Sure. <tool_call>{"name": "f", "arguments": {}}')
    assert result.calls == ()
    assert result.content == "Sure."
    assert len(result.errors) == 1 and "never closed" in result.errors[0]


FAMILY = st.sampled_from(FAMILY_IDS)
# Markers, openers and JSON/Python fragments glued together reach the parsers' deeper branches.
FRAGMENTS = st.sampled_from(ALL_TOKENS + ['{"name": "f"', '"arguments": {', "}", "]", "(", "=", ",", "<|message|>"])
TOKEN_SOUP = st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=12).map("".join)
PREFIXES = st.sampled_from(EXAMPLE_TEXTS).flatmap(
    lambda pair: st.tuples(st.integers(0, len(pair[1])), st.text(max_size=10)).map(lambda cut: pair[1][: cut[0]] + cut[1])
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(family=FAMILY, text=st.one_of(st.text(), TOKEN_SOUP, PREFIXES))
def test_parse_never_raises_and_markers_occur_in_text(family, text):
    assert_well_formed(get_family(family), text)
    assert all(marker in text for marker in get_family(family).find_markers(text))


# --- markers ---------------------------------------------------------------------------------


def test_find_markers_lists_markers_in_order_of_first_appearance():
    text = "a </tool_call> b <think> c </tool_call> <|im_end|>"
    assert get_family("hermes").find_markers(text) == ["</tool_call>", "<think>", "<|im_end|>"]


@pytest.mark.parametrize(
    ("family", "text", "expected"),
    [
        pytest.param("hermes", "The answer is <tool_cal", ["<tool_cal"], id="hermes-9"),
        pytest.param("hermes", "x <tool", ["<tool"], id="hermes-5"),
        pytest.param("hermes", "x <too", [], id="hermes-4-too-short"),
        pytest.param("qwen3_coder", "ok <functio", ["<functio"], id="qwen3_coder-function"),
        pytest.param("mistral_v11", "[TOOL_CAL", ["[TOOL_CAL"], id="mistral"),
        pytest.param("gemma4", "<think> <|tool_ca", ["<|tool_ca"], id="gemma4"),
        pytest.param("hermes", "<tool_cal later", [], id="not-at-the-end"),
        pytest.param("hermes", "<think> x <tool_cal", ["<think>", "<tool_cal"], id="marker-then-prefix"),
    ],
)
def test_find_markers_reports_a_dangling_opener_prefix(family, text, expected):
    assert get_family(family).find_markers(text) == expected


def test_deepseek_markers_use_the_full_width_code_points():
    markers = get_family("deepseek_v3").markers
    assert "<\uff5ctool\u2581calls\u2581begin\uff5c>" in markers
    assert "<|tool_calls_begin|>" not in markers
    assert get_family("deepseek_v31").find_markers("x <\uff5ctool\u2581sep\uff5c> y") == ["<\uff5ctool\u2581sep\uff5c>"]


@pytest.mark.parametrize(("family", "text", "calls", "content"), EXAMPLES)
def test_a_leaked_example_shows_markers(family, text, calls, content):
    """Raw calls left in content are visible, except pythonic lists and bare JSON objects (Llama 3's, json_lines):
    those formats have no marker."""
    if not text.startswith(("[get_weather(", "{")) and family != "json_lines":
        assert get_family(family).find_markers(text)


# --- values typed from the tool schema ---------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "other", "parameters": {"properties": {"count": {"type": "string"}}}}},
    {
        "type": "function",
        "function": {
            "name": "configure",
            "parameters": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "opts": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "label": {"type": "string"},
                    "when": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "either": {"oneOf": [{"type": "string"}, {"type": "object"}]},
                    "maybe": {"type": ["integer", "null"]},
                    "odd": {"type": "date"},
                },
            },
        },
    },
]
RAW_VALUES = {
    "count": "3",
    "ratio": "0.5",
    "flag": "true",
    "opts": '{"depth": 2}',
    "tags": '["a", "b"]',
    "label": "42",
    "when": "7",
    "either": '{"k": 1}',
    "maybe": "null",
    "odd": "2024-01-01",
}
TYPED_VALUES = {
    "count": 3,
    "ratio": 0.5,
    "flag": True,
    "opts": {"depth": 2},
    "tags": ["a", "b"],
    "label": "42",
    "when": 7,
    "either": {"k": 1},
    "maybe": None,
    "odd": "2024-01-01",
}


def qwen3_coder_call(values: dict[str, str]) -> str:
    parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in values.items())
    return f"<tool_call>\n<function=configure>\n{parameters}</function>\n</tool_call>"


def glm47_call(values: dict[str, str]) -> str:
    arguments = "".join(f"<arg_key>{key}</arg_key><arg_value>{value}</arg_value>" for key, value in values.items())
    return f"<tool_call>configure{arguments}</tool_call>"


@pytest.mark.parametrize(("family", "render"), [("qwen3_coder", qwen3_coder_call), ("glm47", glm47_call)])
def test_values_are_typed_from_the_tool_schema(family, render):
    (call,) = get_family(family).parse(render(RAW_VALUES), TOOLS).calls
    assert call.arguments == TYPED_VALUES
    assert type(call.arguments["count"]) is int and type(call.arguments["flag"]) is bool


@pytest.mark.parametrize(("family", "render"), [("qwen3_coder", qwen3_coder_call), ("glm47", glm47_call)])
def test_values_that_do_not_fit_the_schema_stay_text(family, render):
    values = {"count": "three", "flag": "yes", "opts": "[1]", "when": "soon", "either": "plain"}
    (call,) = get_family(family).parse(render(values), TOOLS).calls
    assert call.arguments == values


@pytest.mark.parametrize(
    "tools",
    [
        pytest.param(None, id="no-tools"),
        pytest.param([TOOLS[0]], id="tool-not-offered"),
        pytest.param(
            [{"function": "x"}, 3, {"type": "function", "function": {"name": "configure", "parameters": []}}],
            id="malformed-tools",
        ),
    ],
)
def test_without_a_schema_values_stay_text(tools):
    (call,) = get_family("qwen3_coder").parse(qwen3_coder_call(RAW_VALUES), tools).calls
    assert call.arguments == RAW_VALUES


def test_dsml_string_false_is_json_even_without_tools():
    text = (
        '<｜DSML｜function_calls><｜DSML｜invoke name="configure">'
        '<｜DSML｜parameter name="tags" string="false">["a", 1]</｜DSML｜parameter>'
        '<｜DSML｜parameter name="flag" string="false">true</｜DSML｜parameter>'
        '<｜DSML｜parameter name="count" string="true">5</｜DSML｜parameter>'
        "</｜DSML｜invoke></｜DSML｜function_calls>"
    )
    family = get_family("deepseek_v32")
    assert family.parse(text).calls[0].arguments == {"tags": ["a", 1], "flag": True, "count": "5"}
    assert family.parse(text, TOOLS).calls[0].arguments == {"tags": ["a", 1], "flag": True, "count": 5}


def test_gemma4_bare_values_are_typed():
    text = (
        '<|tool_call>call:configure{label:42,count:3,flag:true,maybe:null,opts:{depth:2},tags:[<|"|>a<|"|>,b]}'
        "<tool_call|>"
    )
    family = get_family("gemma4")
    untyped = {"label": 42, "count": 3, "flag": True, "maybe": None, "opts": {"depth": 2}, "tags": ["a", "b"]}
    assert family.parse(text).calls[0].arguments == untyped
    assert family.parse(text, TOOLS).calls[0].arguments == {**untyped, "label": "42"}


# --- the families file ---------------------------------------------------------------------------


def test_families_file_validates_against_its_schema():
    schema = load_schema("families.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(FAMILIES_PATH.read_text(encoding="utf-8")))
    assert load_families(FAMILIES_PATH) == all_families()


def test_families_are_frozen():
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        get_family("hermes").markers = ()


def test_unknown_family_lists_the_known_ids():
    with pytest.raises(KeyError, match="unknown family 'qwen9'.*hermes.*phi4_mini"):
        get_family("qwen9")


def broken_copy(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    text = FAMILIES_PATH.read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "families.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    text = path.read_text(encoding="utf-8")
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(
    ("old", "new", "at", "field", "family", "says"),
    [
        pytest.param(
            "    parser: kimi_k2\n", "    parser: 5\n", "parser: 5", "$.families[11].parser", "kimi_k2", "not of type", id="wrong-type"
        ),
        pytest.param(
            "    parser: glm4\n", "    parser: glm9\n", "parser: glm9", "$.families[12].parser", "glm45", "unknown parser 'glm9'",
            id="unknown-parser",
        ),
        pytest.param(
            "    call_openers: ['<|tool_call>']\n", "    call_openers: []\n", "call_openers: []", "$.families[16].call_openers",
            "gemma4", "[]", id="empty-list",
        ),
        pytest.param(
            "  - id: minimax_m2\n", "  - id: minimax_m2\n    colour: red\n", "id: minimax_m2", "$.families[18]", "minimax_m2",
            "'colour' was unexpected", id="extra-field",
        ),
    ],
)  # fmt: skip
def test_a_broken_file_names_file_line_family_and_field(tmp_path, old, new, at, field, family, says):
    path = broken_copy(tmp_path, (old, new))
    with pytest.raises(FamiliesError) as caught:
        load_families(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{path}:{line_of(path, at)}: {family}: {field}: ")  # as every spec error reads
    assert says in problem


def test_every_problem_is_reported_at_once(tmp_path):
    path = broken_copy(tmp_path, ("  - id: glm47\n", "  - id: glm45\n"), ("    title: Gemma 4\n", "    title: ''\n"))
    with pytest.raises(FamiliesError) as caught:
        load_families(path)
    assert len(caught.value.problems) == 2
    assert "$.families[16].title: '' " in str(caught.value)  # jsonschema's wording varies by version
    assert "glm45: $.families[13].id: duplicate id 'glm45'" in str(caught.value)


def test_unreadable_yaml_names_the_file(tmp_path):
    path = tmp_path / "families.yaml"
    path.write_text("families: [\n", encoding="utf-8")
    with pytest.raises(FamiliesError, match=re.escape(str(path))):
        load_families(path)

"""The case library loads, and a malformed case file is reported with file, line, case id and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.helpers_malformed import CASE_HEAD, GOOD_TOOL, MALFORMED_CASES, case_file, expecting
from toolmatrix.base.specs import SpecErrors, load_schema, unknown_operator
from toolmatrix.library.cases import load_cases
from toolmatrix.serving.registry import data_root


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def errors_of(*paths: Path) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_cases(list(paths))
    return [str(e) for e in info.value.errors]


def test_library_is_large_and_varied():
    cases = load_cases([data_root() / "cases"])
    categories = {c.category for c in cases}
    assert len(cases) >= 60 and len(categories) >= 10
    assert len({c.id for c in cases}) == len(cases)
    assert {"single", "choose", "parallel", "irrelevance", "tool_choice", "multi_turn", "nested", "types",
            "unicode", "no_params", "many_tools"} <= categories
    assert any(len(c.tools) >= 30 for c in cases)
    kinds = {c.tool_choice_kind for c in cases}
    assert {"auto", "none", "required", "named", "invalid"} <= kinds
    assert any(c.expect.reject for c in cases) and any(c.followup for c in cases)


def test_unknown_field_names_file_line_case_and_field(tmp_path):
    path = write(tmp_path, "mine.yaml", "schema_version: 1\ncategory: mine\n" + GOOD_TOOL + """cases:
  - id: mine.one
    tools: [get_weather]
    messages: [{role: user, content: hi}]
    expect: {no_call: true, colour: red}
""")
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:12: mine.one: $.cases[0].expect")
    assert "colour" in line


def test_expectation_naming_a_tool_not_offered(tmp_path):
    path = write(tmp_path, "mine.yaml", "schema_version: 1\ncategory: mine\n" + GOOD_TOOL + """cases:
  - id: mine.one
    tools: [get_weather]
    messages: [{role: user, content: hi}]
    expect: {calls: [{name: get_wether}]}
""")
    (line,) = errors_of(path)
    assert line == f"{path}:12: mine.one: $.cases[0].expect.calls[0].name: 'get_wether' is not an offered tool"


def test_every_problem_is_reported_at_once(tmp_path):
    one = write(tmp_path, "a.yaml", "schema_version: 1\ncategory: a\ncases:\n  - id: a.x\n    messages: []\n    expect: {no_call: true}\n")
    two = write(tmp_path, "b.yaml", "schema_version: 1\ncategory: b\ncases:\n  - id: b.y\n    tools: [nowhere.tool]\n"
                                    "    messages: [{role: user, content: hi}]\n    expect: {no_call: true}\n")
    lines = errors_of(one, two)
    assert any("a.yaml:5: a.x: $.cases[0].messages" in line for line in lines)
    assert any("b.yaml:5: b.y: $.cases[0].tools[0]: unknown tool 'nowhere.tool'" in line for line in lines)


def test_duplicate_ids_and_wrong_category_prefix(tmp_path):
    text = "schema_version: 1\ncategory: a\ncases:\n" + "".join(
        f"  - id: {cid}\n    messages: [{{role: user, content: hi}}]\n    expect: {{no_call: true}}\n" for cid in ("a.x", "a.x", "b.z"))
    lines = errors_of(write(tmp_path, "a.yaml", text))
    assert any("a.x: $.cases[1].id: duplicate case id" in line for line in lines)
    assert any("b.z: $.cases[2].id: id must start with the file's category 'a'" in line for line in lines)


def test_yaml_syntax_error_names_the_line(tmp_path):
    (line,) = errors_of(write(tmp_path, "broken.yaml", "schema_version: 1\ncategory: [unclosed\n"))
    assert "broken.yaml:" in line and "invalid YAML" in line


def test_missing_file(tmp_path):
    (line,) = errors_of(tmp_path / "nope.yaml")
    assert "nope.yaml" in line and "no such file" in line


def test_tool_choice_kinds_and_features(tmp_path):
    path = write(tmp_path, "k.yaml", "schema_version: 1\ncategory: k\n" + GOOD_TOOL + """cases:
  - id: k.named
    tools: [get_weather]
    tool_choice: {function: get_weather}
    messages: [{role: user, content: hi}]
    expect: {calls: [{name: get_weather}, {name: get_weather}]}
  - id: k.not_offered
    tools: [get_weather]
    tool_choice: {type: function, function: {name: other}}
    messages: [{role: user, content: hi}]
    expect: {reject: true}
  - id: k.number
    tools: [get_weather]
    tool_choice: 42
    options: {parallel_tool_calls: false}
    messages: [{role: user, content: hi}]
    expect: {reject: true}
""")
    named, not_offered, number = load_cases([path])
    assert named.tool_choice == {"type": "function", "function": {"name": "get_weather"}}
    assert named.features == {"tool_choice.named", "parallel_calls"}
    assert not_offered.tool_choice_kind == number.tool_choice_kind == "invalid"
    assert number.features == {"tool_choice.invalid", "parallel_tool_calls.false"}
    assert named.options["temperature"] == 0


# --- malformed files: one line naming file, line, case and field; never a traceback or a hang -------------------


@pytest.mark.parametrize(("text", "at", "message"), list(MALFORMED_CASES.values()), ids=list(MALFORMED_CASES))
def test_a_malformed_case_is_one_line_naming_file_case_and_field(tmp_path, text, at, message):
    path = write(tmp_path, "mine.yaml", text)
    (line,) = errors_of(path)
    assert line.startswith(f"{path}{at}") and message in line, line
    assert "\n" not in line and "Traceback" not in line


def test_a_misspelled_matcher_names_the_matchers_of_the_case_schema(tmp_path):
    branches = load_schema("cases.schema.json")["$defs"]["matcher"]["oneOf"]
    matchers = [b["required"][0] for b in branches if "required" in b]
    (line,) = errors_of(write(tmp_path, "mine.yaml", expecting("{regx: Paris}")))
    assert line.endswith(f"unknown key 'regx': expected one of {', '.join(matchers)}"), line


@pytest.mark.parametrize(("instance", "message"), [
    ({"sizee": 3}, "unknown key 'sizee': expected one of size, name"),
    ({}, "an empty object: expected one of size, name"),
    ({"size": 3, "name": "x"}, "'size' and 'name' together: expected one of size, name"),
])
def test_any_choice_among_one_key_objects_names_its_keys(instance, message):
    schema = {"anyOf": [{"type": "string"}, *({"type": "object", "additionalProperties": False, "required": [key]}
                                               for key in ("size", "name"))]}
    (error,) = Draft202012Validator(schema).iter_errors(instance)
    assert unknown_operator(error)[1] == message


def test_a_choice_with_another_kind_of_object_is_not_read_as_one_of_operators():
    schema = {"oneOf": [{"type": "object", "additionalProperties": False, "required": ["size"]},
                        {"type": "object", "additionalProperties": False, "required": ["name"]},
                        {"type": "object", "required": ["x", "y"]}]}
    (error,) = Draft202012Validator(schema).iter_errors({"x": 1})
    assert unknown_operator(error) is None


def test_an_invalid_parameters_schema_in_the_files_tools_names_the_tool(tmp_path):
    text = case_file("").replace("properties: {city: {type: string}}", "properties: {city: {type: text}}")
    path = write(tmp_path, "mine.yaml", text)
    (line,) = errors_of(path)
    assert line.startswith(f"{path}:7: $.tools.get_weather.function.parameters.properties.city.type: not a valid JSON Schema")


@pytest.mark.parametrize(("content", "at", "message"), [
    (b"", ": $: ", "the file is empty: expected a mapping of fields"),
    (b"- schema_version: 1\n", ":1: $: ", "the top level is a list: expected a mapping of fields"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ":1: $: ", "not UTF-8 text (byte 0x89 at offset 0): a binary file?"),
    (b"schema_version: 1\ncategory: \xe9t\xe9\n", ":2: $: ", "not UTF-8 text (byte 0xe9 at offset 28)"),
    (b"schema_version: 1\ncategory: mine\x00\x01\n", ":2: $: ", "control character #x00 is not allowed in YAML"),
    (b"schema_version: 1\n---\ncategory: mine\n", ":2: $: ", "invalid YAML: expected a single document"),
], ids=["empty", "a_list", "binary", "latin_1", "nul_bytes", "two_documents"])
def test_an_unreadable_case_file_is_one_line(tmp_path, content, at, message):
    path = tmp_path / "mine.yaml"
    path.write_bytes(content)
    (line,) = errors_of(path)
    assert line.startswith(f"{path}{at}") and message in line, line


def test_an_invalid_tool_choice_is_sent_as_is_by_a_reject_case(tmp_path):
    path = write(tmp_path, "mine.yaml", CASE_HEAD + "    tools: [get_weather]\n    tool_choice: {type: function, "
                 "function: x}\n    messages: [{role: user, content: hi}]\n    expect: {reject: true}\n")
    (case,) = load_cases([path])
    assert case.tool_choice == {"type": "function", "function": "x"} and case.tool_choice_kind == "invalid"


def test_an_anchored_value_may_be_reused(tmp_path):
    """The library reuses a 36-tool list by alias (many_tools.yaml): aliases stay, only their blow-up is refused."""
    path = write(tmp_path, "mine.yaml", "schema_version: 1\ncategory: mine\n" + GOOD_TOOL + "cases:\n" + "".join(
        f"  - id: mine.{n}\n    tools: {ref}\n    messages: [{{role: user, content: hi}}]\n    expect: {{no_call: true}}\n"
        for n, ref in (("a", "&all [get_weather]"), ("b", "*all"))))
    first, second = load_cases([path])
    assert first.tool_names == second.tool_names == ("get_weather",)

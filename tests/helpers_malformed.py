"""Malformed case files, each with where its one error line points and what it says (unit and plugin tests)."""

from __future__ import annotations

GOOD_TOOL = """
tools:
  get_weather:
    type: function
    function: {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
"""

CASE_HEAD = "schema_version: 1\ncategory: mine\n" + GOOD_TOOL + "cases:\n  - id: mine.one\n"  # the case at line 9
BOMB = "".join(f"      {a}: &{a} [{', '.join([prev] * 10)}]\n"
               for a, prev in zip("bcdefghij", ["x", "*b", "*c", "*d", "*e", "*f", "*g", "*h", "*i"]))


def case_file(fields: str) -> str:
    """A file whose one case (mine.one, line 9) has these fields (indented 4) before a valid ending."""
    return CASE_HEAD + fields + "    messages: [{role: user, content: hi}]\n    expect: {no_call: true}\n"


def expecting(city: str) -> str:
    """A file whose one case expects a call with this matcher of ``city`` (at line 14)."""
    return (CASE_HEAD + "    tools: [get_weather]\n    messages: [{role: user, content: hi}]\n    expect:\n      calls:\n"
            f"        - {{name: get_weather, arguments: {{city: {city}}}}}\n")


IN_CASE = ": mine.one: $.cases[0]"
# What the file holds -> where its one line points (after the file name) and what it says.
MALFORMED_CASES = {
    "tool_choice_function_a_string": (
        case_file("    tool_choice: {type: function, function: x}\n"), f":10{IN_CASE}.tool_choice: ",
        '{"type": "function", "function": "x"} is not a valid tool_choice (auto, none, required, {function: NAME} or '
        "{type: function, function: {name: NAME}}); a case that sends one expects reject: true"),
    "tool_choice_without_type": (
        case_file("    tool_choice: {function: {name: get_weather}}\n"), f":10{IN_CASE}.tool_choice: ",
        '{"function": {"name": "get_weather"}} is not a valid tool_choice'),
    "duplicate_key": (
        case_file("    tools: [get_weather]\n    tools: [get_weather]\n"), f":11{IN_CASE}.tools: ",
        "duplicate key 'tools' (first at line 10)"),
    "options_nan": (
        case_file("    options: {temperature: .nan}\n"), f":10{IN_CASE}.options.temperature: ",
        "'.nan' is not a JSON number (NaN and Infinity cannot be sent)"),
    "options_float_overflowing_to_infinity": (
        case_file("    options:\n      max_tokens: 1.0e+999\n"), f":11{IN_CASE}.options.max_tokens: ",
        "'1.0e+999' is not a JSON number"),
    "options_date": (
        case_file("    options: {seed: 2024-01-01}\n"), f":10{IN_CASE}.options.seed: ",
        "'2024-01-01' is read by YAML as a date, which JSON has no type for: quote it to mean the text"),
    "options_binary": (
        case_file("    options: {metadata: !!binary aGVsbG8=}\n"), f":10{IN_CASE}.options.metadata: ",
        "YAML type !!binary has no JSON equivalent"),
    "key_read_as_a_boolean": (
        case_file("    options: {on: 1}\n"), f":10{IN_CASE}.options.on: ",
        "key 'on' is read by YAML as a boolean, not a string: quote it"),
    "alias_bomb": (
        case_file("    options:\n" + BOMB), f":15{IN_CASE}.options.f[7]: ", "aliases expand to more than 100,000 values"),
    "nested_5000_deep": (
        case_file("    options: {x: " + "[" * 5000 + "]" * 5000 + "}\n"), f":10{IN_CASE}.options.x" + "[0]" * 60 + ": ",
        "nested deeper than 64 levels"),
    "alias_without_anchor": (
        case_file("    options: {x: *nowhere}\n"), f":10{IN_CASE}.options.x: ", "alias *nowhere names no anchor"),
    "inline_tool_parameters_not_a_schema": (
        case_file("    tools: [{type: function, function: {name: f, parameters: {type: objekt}}}]\n"),
        f":10{IN_CASE}.tools[0].function.parameters.type: ", "not a valid JSON Schema: 'objekt' is not valid"),
    "schema_matcher_not_a_schema": (
        expecting("{schema: {type: string, minLength: -1}}"),
        f":14{IN_CASE}.expect.calls[0].arguments.city.schema.minLength: ", "not a valid JSON Schema: -1"),
    "matcher_misspelled": (
        expecting("{regx: Paris}"), f":14{IN_CASE}.expect.calls[0].arguments.city: ",
        "unknown key 'regx': expected one of any_of, regex, contains, schema, equals, absent, optional"),
    "matcher_misspelled_inside_optional": (
        expecting("{optional: {contain: Paris}}"), f":14{IN_CASE}.expect.calls[0].arguments.city.optional: ",
        "unknown key 'contain': expected one of any_of, regex, contains, schema, equals, absent, optional"),
    "two_matchers_in_one": (
        expecting("{regex: P, contains: P}"), f":14{IN_CASE}.expect.calls[0].arguments.city: ",
        "'regex' and 'contains' together: expected one of any_of, regex, contains"),
    "schema_matcher_pattern_not_a_regex": (
        expecting("{schema: {pattern: '('}}"), f":14{IN_CASE}.expect.calls[0].arguments.city.schema.pattern: ",
        "not a valid JSON Schema: '(' is not a 'regex'"),
}

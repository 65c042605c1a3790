"""A case file means the same to every command that reads it: ``toolmatrix validate``, ``pytest --cases`` and
``pytest --only-cases --cases`` accept the same files and refuse the same ones with the same lines, all of a
file's mistakes at once."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers_engine import pytest_cmd
from tests.helpers_malformed import MALFORMED_CASES, case_file
from toolmatrix.cli import main
from toolmatrix.serving.registry import data_root

ROOT = Path(__file__).parents[2]
USAGE_ERROR = {"validate": 2, "--cases": 4, "--only-cases": 4}


def docs_example() -> str:
    """The case file docs/cases.md shows (the first yaml block after the case table)."""
    text = (ROOT / "docs" / "cases.md").read_text()
    return re.search(r"<!-- toolmatrix cases: end -->.*?```yaml\n(.*?)```", text, re.S).group(1)


FIVE_MISTAKES = case_file("    tools: [travel.get_wether]\n") + """  - id: mine.two
    tools: [get_weather]
    messages: [{role: user, content: hi}]
    expect: {calls: [{name: get_time}]}
  - id: other.three
    messages: [{role: user, content: hi}]
    expect: {no_call: true}
  - id: mine.four
    tools: [{type: function, function: {name: f, parameters: {type: objekt}}}]
    messages: [{role: user, content: hi}]
    expect: {no_call: true}
  - id: mine.five
    messages: [{role: user, content: hi}]
"""
# File -> every line it gets: (where, after the file name; what it says).
REFUSED = {name: [(at, message)] for name, (_, at, message) in MALFORMED_CASES.items()} | {
    "five_mistakes": [
        (":10: mine.one: $.cases[0].tools[0]: ", "unknown tool 'travel.get_wether'"),
        (":16: mine.two: $.cases[1].expect.calls[0].name: ", "'get_time' is not an offered tool"),
        (":17: other.three: $.cases[2].id: ", "id must start with the file's category 'mine'"),
        (":21: mine.four: $.cases[3].tools[0].function.parameters.type: ", "not a valid JSON Schema"),
        (":24: mine.five: $.cases[4]: ", "'expect' is a required property")],
    "a_library_id_for_another_scenario": [
        (":8: parallel.weather_two_cities: $.cases[0].id: ",
         f"duplicate case id (first defined at {data_root() / 'cases' / 'parallel.yaml'}:8)")],
}
TEXTS = {name: text for name, (text, _, _) in MALFORMED_CASES.items()} | {
    "five_mistakes": FIVE_MISTAKES,
    "a_library_id_for_another_scenario": docs_example().replace("mine", "parallel"),
}
ACCEPTED = {  # file -> the ids of its cases
    "docs_example": (docs_example(), ["mine.weather_two_cities"]),
    "a_library_file_again": ((data_root() / "cases" / "parallel.yaml").read_text(), []),  # its cases run once
    "a_kept_fuzz_case_again": ((data_root() / "cases" / "fuzz_found.yaml").read_text().replace(
        "description: 'generated", "description: 'written again: generated"), ["fuzz.1.12", "fuzz.1.29"]),
}


def run(command: str, files: list[Path], tmp_path: Path, capsys) -> tuple[int, str, str]:
    """One of the three ways to read case files: its exit status, standard output and error."""
    if command == "validate":
        status = main(["validate", *map(str, files)])
        out, err = capsys.readouterr()
        return status, out, err
    only = ["--only-cases"] if command == "--only-cases" else []
    cases = [arg for path in files for arg in ("--cases", str(path))]
    proc = subprocess.run(pytest_cmd("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--collect-only", "-q",
                                     *only, *cases), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("command", list(USAGE_ERROR))
def test_every_command_refuses_the_same_files_with_the_same_lines(tmp_path, capsys, command):
    files = {}
    for name, text in TEXTS.items():  # each file a category of its own: no file repeats another's ids
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(text.replace("mine", name))
    status, _, err = run(command, list(files.values()), tmp_path, capsys)
    assert status == USAGE_ERROR[command], err[-3000:]
    assert "Traceback" not in err
    for name, path in files.items():
        lines = [line for line in err.splitlines() if line.startswith(f"{path}:")]
        assert len(lines) == len(REFUSED[name]), (name, lines)
        for line, (at, message) in zip(lines, REFUSED[name]):
            assert line.startswith(f"{path}{at.replace('mine', name)}"), (name, line)
            assert message.replace("mine", name) in line, (name, line)


@pytest.mark.parametrize("command", list(USAGE_ERROR))
def test_every_command_accepts_the_same_files(tmp_path, capsys, command):
    files = []
    for name, (text, _) in ACCEPTED.items():
        files.append(tmp_path / f"{name}.yaml")
        files[-1].write_text(text)
    status, out, err = run(command, files, tmp_path, capsys)
    assert status == 0, err[-3000:]
    ids = [i for _, ids in ACCEPTED.values() for i in ids]
    if command == "validate":
        assert out.startswith(f"{10 + len(ids)} cases in 3 categories: fuzz, mine, parallel")  # parallel.yaml: 10
    else:
        collected = set(re.findall(r"test_case\[(.+?)-(?:non)?stream\]", out))
        assert set(ids) <= collected and "parallel.weather_two_cities" in collected

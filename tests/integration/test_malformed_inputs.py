"""Malformed case files stop the real plugin before anything is sent or written: one line each, exit status 4."""

from __future__ import annotations

import subprocess

from tests.helpers_engine import pytest_cmd
from tests.helpers_malformed import MALFORMED_CASES
from toolmatrix.testing.fake import FakeServer, first_tool

# A few of the malformed files of the unit tests: a traceback, silent acceptance, a hang and a stack overflow before.
SENT = ("tool_choice_function_a_string", "options_date", "alias_bomb", "nested_5000_deep", "schema_matcher_not_a_schema")
USAGE_ERROR = 4


def test_malformed_case_files_are_a_usage_error_with_nothing_sent_or_written(tmp_path):
    files = {}
    for name in SENT:
        text, at, message = MALFORMED_CASES[name]
        files[tmp_path / f"{name}.yaml"] = (at, message)
        (tmp_path / f"{name}.yaml").write_text(text)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    files[binary] = (":1: $: ", "not UTF-8 text (byte 0x89 at offset 0): a binary file?")
    results = tmp_path / "results"
    with FakeServer(first_tool) as fake:
        cases = [arg for path in files for arg in ("--cases", str(path))]
        proc = subprocess.run(pytest_cmd("--base-url", fake.base_url, "--model", "m", *cases, "--results-dir",
                                         str(results)), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == USAGE_ERROR, output[-3000:]
    assert "Traceback" not in output
    for path, (at, message) in files.items():
        (line,) = [line for line in proc.stderr.splitlines() if str(path) in line]  # one line per file
        assert line.startswith(f"{path}{at}") and message in line, line
    assert fake.authorizations == []  # every POST (chat, render, completion) is counted there: none came
    assert not results.exists() or not any(results.iterdir())

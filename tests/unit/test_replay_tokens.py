"""Fixtures that carry the model's output as token ids: the format, and the token chunking streaming those ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.replay.fixtures import FixtureError, load_fixtures

GOOD = {"id": "ext.1", "family": "hermes", "model": "Qwen/Qwen3-8B",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": '<tool_call>\n{"name": "f", "arguments": {"x": "Zürich"}}\n</tool_call>',
        "expected": {"tool_calls": [{"name": "f", "arguments": {"x": "Zürich"}}], "content": None, "reasoning": None}}


def write(path: Path, *fixtures: dict) -> Path:
    path.write_text("".join(json.dumps(f, ensure_ascii=False) + "\n" for f in fixtures), encoding="utf-8")
    return path


def test_token_ids_and_tokenizer_are_read_and_written_back(tmp_path: Path) -> None:
    data = {**GOOD, "token_ids": [1, 2, 3], "tokenizer": "Qwen/Qwen3-8B", "provenance": {"kept": True}}
    (fixture,) = load_fixtures(write(tmp_path / "f.jsonl", data))
    assert fixture.token_ids == (1, 2, 3) and fixture.tokenizer == "Qwen/Qwen3-8B"
    assert fixture.to_dict() == {**data, "tags": [], "source": ""}
    (text_only,) = load_fixtures(write(tmp_path / "g.jsonl", GOOD))
    assert text_only.token_ids is None and text_only.tokenizer is None
    assert "token_ids" not in text_only.to_dict() and "tokenizer" not in text_only.to_dict()


def test_a_bad_token_id_or_tokenizer_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", GOOD, {**GOOD, "id": "ext.2", "token_ids": ["x"]},
                 {**GOOD, "id": "ext.3", "token_ids": [5, -1], "tokenizer": ""})
    with pytest.raises(FixtureError) as caught:
        load_fixtures(path)
    assert caught.value.problems[0] == f"{path}:2: $.token_ids[0]: 'x' is not of type 'integer' (got \"x\")"
    assert sorted(caught.value.problems[1:]) == [
        f"{path}:3: $.token_ids[1]: -1 is less than the minimum of 0 (got -1)",
        f"{path}:3: $.tokenizer: '' should be non-empty (got \"\")"]

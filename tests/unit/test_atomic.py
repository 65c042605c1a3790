"""A file replaced whole (``toolmatrix.base.atomic``): the old content or the new, never half, and no temporary file left."""

from __future__ import annotations

import os
import stat

import pytest

from toolmatrix.base.atomic import Replacing, write_json, write_text


def test_the_new_content_replaces_the_old_whole_and_nothing_else_is_left(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("old")
    with Replacing(path) as handle:
        handle.write("new, ")
        assert path.read_text() == "old"  # a reader meanwhile sees the old file, not half of the new one
        handle.write("whole")
    assert path.read_text() == "new, whole"
    assert list(tmp_path.iterdir()) == [path]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_one(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("old")
    with pytest.raises(ValueError), Replacing(path) as handle:
        handle.write("half")
        raise ValueError("the writer failed")
    assert path.read_text() == "old"
    assert list(tmp_path.iterdir()) == [path]


def test_the_file_gets_the_umask_mode_as_open_gives_it(tmp_path):
    previous = os.umask(0o022)
    try:
        write_text(tmp_path / "cases.yaml", "cases: []\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "cases.yaml").stat().st_mode) == 0o644  # not mkstemp's 0600


def test_two_writers_of_one_file_do_not_share_a_temporary_name(tmp_path):
    first, second = Replacing(tmp_path / "a.json"), Replacing(tmp_path / "a.json")
    assert first.partial != second.partial
    first.handle.write("1")
    second.handle.write("2")
    first.publish()
    second.publish()
    assert (tmp_path / "a.json").read_text() == "2"


def test_json_is_written_indented_into_a_folder_made_for_it(tmp_path):
    write_json(tmp_path / "deep" / "run.json", {"run_id": "r1", "note": "é"})
    assert (tmp_path / "deep" / "run.json").read_text(encoding="utf-8") == '{\n  "run_id": "r1",\n  "note": "é"\n}\n'


def test_a_binary_file_takes_bytes(tmp_path):
    with Replacing(tmp_path / "details.jsonl", binary=True) as handle:
        handle.write(b'{"a": 1}\n')
    assert (tmp_path / "details.jsonl").read_bytes() == b'{"a": 1}\n'

"""Each case's non-streamed answer is asked once, recorded, and compared with its stream, however the items are
selected (``-k``, ``--cases``, ``--only-cases``), distributed (``-n``, ``--dist``) or ordered.

Counting the requests the server saw is the proof: one more non-streamed request for a case means its stream was
compared with an answer other than the one recorded.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests.helpers_engine import pytest_cmd
from toolmatrix.library.cases import CaseShard, load_cases
from toolmatrix.records import read_records
from toolmatrix.serving.registry import data_root
from toolmatrix.testing.fake import FakeServer, first_tool

# A plugin that runs every stream item before its non-streamed twin, as a shuffling plugin may.
STREAM_FIRST = '''
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: "-nonstream]" in item.nodeid)
'''
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
OWN_CASES = {"schema_version": 1, "category": "own", "cases": [
    {"id": f"own.c{n}", "tools": [WEATHER], "expect": {"calls": [{"name": "get_weather"}]},
     "messages": [{"role": "user", "content": f"Weather in city number {n}?"}]} for n in range(5)]}


@pytest.fixture
def fake():
    with FakeServer(first_tool) as server:
        yield server


def run_suite(tmp_path: Path, fake: FakeServer, *args: str) -> tuple[list, dict[str, set[str]]]:
    """The records of a run, and the workers each case's items ran on (from pytest's verbose lines)."""
    (tmp_path / "stream_first.py").write_text(STREAM_FIRST)
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(OWN_CASES))
    proc = subprocess.run(pytest_cmd("-v", "--base-url", fake.base_url, "--model", "fake", "--results-dir",
                                     str(tmp_path / "r"), "--no-matrix", *args),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # first_tool answers wrong on purpose
    workers: dict[str, set[str]] = defaultdict(set)
    for found in re.finditer(r"\[(gw\d+)\].*?::test_case\[(.+?)-(?:non)?stream\]", proc.stdout):
        workers[found.group(2)].add(found.group(1))
    return list(read_records(tmp_path / "r")), workers


SELECTIONS = {
    "-k": ("-k", "single"),
    "--cases": ("--cases", "own.yaml", "-k", "own"),
    "--only-cases": ("--only-cases", "--cases", "own.yaml"),
    "stream first": ("-p", "stream_first", "-k", "single"),
}


@pytest.mark.parametrize("workers", [("-n", "0"), ("-n", "2"), ("-n", "2", "--dist", "loadgroup")],
                         ids=["one process", "-n 2", "-n 2 loadgroup"])
@pytest.mark.parametrize("selection", sorted(SELECTIONS))
def test_one_nonstream_request_per_case_in_every_selection(tmp_path, fake, workers, selection):
    records, ran_on = run_suite(tmp_path, fake, *workers, *SELECTIONS[selection])
    cases = {r.case_id for r in records}
    assert cases and len(records) == 2 * len(cases)
    streamed = [b for b in fake.requests if b.get("stream")]
    assert len(streamed) == len(cases), "one stream per case"
    assert len(fake.requests) == 2 * len(cases), "one non-streamed answer per case, recorded and compared"
    assert all(len(on) == 1 for on in ran_on.values()), dict(ran_on)


def test_a_stream_selected_alone_asks_for_its_own_reference(tmp_path, fake):
    records, _ = run_suite(tmp_path, fake, "-n", "2", "-k", "single and not nonstream")
    assert {r.mode for r in records} == {"stream"}
    assert len(fake.requests) == 2 * len(records)


def test_case_slices_run_exactly_their_cases_and_say_so(tmp_path, fake):
    """--case-shard I/N: the N runs hold every case of the library once between them, and each run.json its slice."""
    seen: list[tuple[str, str]] = []
    for index in (1, 2, 3):
        (tmp_path / str(index)).mkdir()
        records, _ = run_suite(tmp_path / str(index), fake, "-n", "2", f"--case-shard={index}/3")
        ids = {r.case_id for r in records}
        assert ids and all(CaseShard(index, 3).holds(i) for i in ids)
        assert json.loads((tmp_path / str(index) / "r" / "run.json").read_text())["case_shard"] == f"{index}/3"
        seen += [(r.case_id, r.mode) for r in records]
    library = [c.id for c in load_cases([data_root() / "cases"])]
    assert sorted(seen) == sorted((i, m) for i in library for m in ("nonstream", "stream"))

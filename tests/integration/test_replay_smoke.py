"""CI smoke for the parser-replay tier: a small generated subset (one plain single-call fixture per family) through
every replay engine, by the real command line, into real records.

An engine whose parser env is missing is skipped here, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI sets it after
``toolmatrix install vllm transformers``, ``toolmatrix replay-install sglang``, ``toolmatrix replay-install lmdeploy``,
``toolmatrix replay-install mlxlm`` and ``toolmatrix replay-install tokenizers``): then it fails. ~1 minute, most of
it vLLM's import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for, replay_engines
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import dump_fixtures
from toolmatrix.replay.generate import generate
from toolmatrix.serving.registry import data_root, load_engines

CASE = "single.get_weather_paris.plain"
CHUNKINGS = ["token", "special", "random"]


@pytest.fixture(scope="module")
def smoke_fixtures(tmp_path_factory) -> Path:
    fixtures = [f for f in generate([data_root() / "cases"]) if f.id.endswith("." + CASE)]
    path = tmp_path_factory.mktemp("replay") / "smoke.jsonl"
    dump_fixtures(fixtures, path)
    return path


@pytest.mark.parametrize("engine", sorted(replay_engines()))
def test_every_replay_engine_parses_the_smoke_subset(engine: str, smoke_fixtures: Path, tmp_path: Path) -> None:
    adapter = adapter_for(load_engines()[engine])
    why = adapter.ready() or (None if tokenizer_path("hermes") else "toolmatrix replay-install tokenizers")
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    toolmatrix = Path(sys.executable).with_name("toolmatrix")
    command = [str(toolmatrix), "replay", "--fixtures", str(smoke_fixtures), "--results-dir", str(tmp_path),
               "--engine", engine, *(a for c in CHUNKINGS for a in ("--chunking", c))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(read_records(tmp_path / engine))
    run = json.loads((tmp_path / engine / "run.json").read_text())
    assert run["engine"]["tier"] == "replay" and run["pair"] == f"parser-replay@{engine}"
    # Every family is either replayed (records) or an empty cell with its reason; none is lost.
    families = {r.replay.family for r in records}
    skipped = run["engine"]["skipped_families"]
    assert families | set(skipped) == {json.loads(line)["family"] for line in smoke_fixtures.read_text().splitlines()}
    assert all(reason.strip() for reason in skipped.values())
    # Every replay engine reads Hermes <tool_call> blocks: each mode of that fixture passes with the real parser.
    hermes = [r for r in records if r.case_id == "hermes." + CASE]
    modes = [(r.mode, r.verdict.value) for r in hermes]
    assert modes == [("nonstream", "pass"), *((f"stream:{c}", "pass") for c in CHUNKINGS)], [r.reason for r in hermes]

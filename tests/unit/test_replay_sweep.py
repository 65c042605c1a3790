"""``toolmatrix replay-sweep`` (toolmatrix.replay.sweep): a release that will not install or start here is a column
with its measured reason, written as a run, and the sweep goes on to the next release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolmatrix.replay import sweep as sweep_module
from toolmatrix.replay.adapters.base import Adapter, InstallError
from toolmatrix.replay.fixtures import load_fixtures
from toolmatrix.replay.protocol import WorkerError

FIXTURE = {"id": "f.1", "family": "hermes", "model": "qwen2.5",
           "tools": [{"type": "function", "function": {"name": "f"}}],
           "text": '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>',
           "expected": {"tool_calls": [{"name": "f", "arguments": {}}], "content": None, "reasoning": None}}


@pytest.fixture
def fixtures(tmp_path: Path) -> list:
    path = tmp_path / "fixtures.jsonl"
    path.write_text(json.dumps(FIXTURE) + "\n", encoding="utf-8")
    return load_fixtures(path)


def _run(directory: Path) -> dict:
    assert (directory / "results.jsonl").read_text() == ""
    return json.loads((directory / "run.json").read_text())


def test_a_release_pip_will_not_install_is_a_column_with_pips_reason(tmp_path: Path, fixtures: list,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(adapter: Adapter) -> Path:
        raise InstallError(f"sglang=={adapter.at} does not install here: ERROR: No matching distribution found")

    monkeypatch.setattr(Adapter, "install", refuse)
    (swept,) = sweep_module.sweep("sglang", ["0.0.99"], "0.5.23", fixtures, str(tmp_path), ["whole"])
    assert swept.directory == tmp_path / "sglang@0.0.99" and "No matching distribution" in swept.reason
    run = _run(swept.directory)
    assert run["engine"]["version"] == "0.0.99"
    assert run["engine"]["skipped_families"] == {"hermes": swept.reason}
    assert "sglang@0.0.99: cannot replay here: sglang==0.0.99 does not install here: ERROR: No matching" in swept.line()


def test_a_release_whose_worker_dies_at_start_is_a_column_with_its_last_words(tmp_path: Path, fixtures: list,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def dies(*args: object) -> dict:
        raise WorkerError("worker sglang_worker.py died: ModuleNotFoundError: No module named 'sglang.srt.parser'")

    monkeypatch.setattr(sweep_module, "install_at", lambda adapter: "")
    monkeypatch.setattr(sweep_module, "replay_engine", dies)
    (swept,) = sweep_module.sweep("sglang", ["0.5.1"], "0.5.23", fixtures, str(tmp_path), ["whole"])
    assert swept.reason.startswith("sglang@0.5.1 does not start here: ") and "ModuleNotFoundError" in swept.reason
    assert _run(swept.directory)["engine"]["skipped_families"]["hermes"] == swept.reason


def test_the_pinned_release_replays_in_the_pinned_env_and_others_in_an_overlay() -> None:
    assert sweep_module.adapter_at("sglang", "0.5.23", "0.5.23").overlay_dir is None
    overlay = sweep_module.adapter_at("sglang", "0.5.9", "0.5.23").overlay_dir
    assert overlay is not None and overlay.name == "0.5.9"

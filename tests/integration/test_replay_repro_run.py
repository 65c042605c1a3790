"""A triage finding's standalone repro (``toolmatrix replay-repro``) shows the bug exactly as its replay record does.

For engine-bug clusters of the committed triage (results/replay/triage.yaml), the snippet of the cluster's own repro
fixture runs in the engine's replay env by that env's python, without toolmatrix, and what it prints (the
non-streamed message, the streamed deltas) equals the committed record of that fixture, call ids aside (LMDeploy
draws them at random, as its server does). SGLang's and LMDeploy's replay envs lack torch, so the test puts the
worker's import shim before their snippets (a maintainer's install has torch and needs none), and checks the shim
changed no parser: every engine module the snippet loaded is the installed file byte for byte, none reads the
package top the shim left bare, no torch stub is left (tests/helpers_shim.py). Skipped without the engine's env or
the tokenizers, unless TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.helpers_shim import SHIM_AUDIT
from toolmatrix.serving.registry import data_root, load_engines
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import load_fixtures
from toolmatrix.replay.repro import snippet
from toolmatrix.replay.session import mode_of
from toolmatrix.replay.triage import load_triage

SNAPSHOT = data_root() / "results" / "replay"
# engine -> the distributions whose modules the audit checks, and the regular expression of a read from a package
# top its worker's install_shim() leaves bare; an engine not here (vLLM, transformers and MLX-LM replay in envs that
# import them as they are) runs the snippet alone.
SHIMS = {"sglang": (("sglang", "xgrammar"), r"^\s*from sglang import |^\s*import sglang\s*$"),
         "lmdeploy": (("lmdeploy",), r"^\s*from lmdeploy(\.serve)? import |^\s*import lmdeploy(\.serve)?\s*$")}


@cache
def _clusters() -> dict:
    return {c.id: c for c in load_triage(SNAPSHOT / "triage.yaml").clusters}


@cache
def _fixtures() -> dict:
    return {f.id: f for f in load_fixtures(SNAPSHOT / "fixtures.jsonl")}


def _records(engine: str, fixture: str) -> dict[str, dict]:
    with (SNAPSHOT / engine / "results.jsonl").open(encoding="utf-8") as handle:
        return {r["mode"]: r for r in map(json.loads, handle) if r["case_id"] == fixture}


def _without_ids(value):
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    return [_without_ids(v) for v in value] if isinstance(value, list) else value


def _run(engine: str, code: str) -> tuple[dict, list[dict], dict | None]:
    """The snippet's non-streamed message and deltas, and the shim's audit where one ran, from the engine's env."""
    adapter = adapter_for(load_engines()[engine])
    if engine in SHIMS:
        distributions, top = SHIMS[engine]
        code = (SHIM_AUDIT + f"import runpy\nrunpy.run_path({str(adapter.worker)!r}, run_name='repro-shim')"
                "['install_shim']()\n" + code
                + f"\nimport json as _json\n_audit = shim_audit({distributions!r}, {top!r})\n"
                "print(_json.dumps({'loaded': _audit[0], 'changed': _audit[1], 'top_reads': _audit[2], "
                "'torch': 'torch' in sys.modules}))\n")
    done = subprocess.run([str(adapter.python), "-c", code], capture_output=True, text=True,
                          env=dict(adapter.env()), timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    audit = json.loads(lines.pop()) if engine in SHIMS else None
    (whole,) = [line.removeprefix("non-streamed message: ") for line in lines
                if line.startswith("non-streamed message: ")]
    deltas = lines[lines.index("streamed deltas:") + 1:]
    return json.loads(whole), [json.loads(d) for d in deltas], audit


# A real engine-bug cluster per engine, and what its bug looks like in the snippet's answer.
CASES = {
    "E1": lambda whole, deltas: (  # the call whole, but streamed as one delta its arguments never follow
        whole["tool_calls"][0]["function"]["arguments"] != ""
        and [c["function"].get("arguments") for d in deltas for c in d.get("tool_calls", [])] == [""]),
    "L1": lambda whole, deltas: not whole["tool_calls"] and whole["content"].startswith('{"name": '),
    "M1": lambda whole, deltas: not whole["tool_calls"] and "</tool_call>" in whole["content"],  # the rest leaks
    "E4": lambda whole, deltas: not whole["tool_calls"] and whole["content"].startswith("<tool_call>"),
    "E5": lambda whole, deltas: "\\u00fc" in whole["tool_calls"][0]["function"]["arguments"],
}


@pytest.mark.parametrize("cluster_id", sorted(CASES))
def test_the_standalone_repro_prints_the_bug_as_the_replay_record_shows_it(cluster_id: str) -> None:
    cluster = _clusters()[cluster_id]
    engine, fixture_id, chunking = cluster.repro["engine"], cluster.repro["fixture"], cluster.repro["chunking"]
    adapter = adapter_for(load_engines()[engine])
    fixture = _fixtures()[fixture_id]
    why = adapter.ready() or (None if tokenizer_path(fixture.family, fixture.model) else
                              "toolmatrix replay-install tokenizers")
    if why is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    code = snippet(adapter, fixture, chunking)
    assert not re.search(r"^\s*(import|from) toolmatrix", code, re.M)
    whole, deltas, audit = _run(engine, code)

    records = _records(engine, fixture_id)
    message = records["nonstream"]["response"]["choices"][0]["message"]
    if whole.get("tool_calls") is None:  # mlx_lm.server leaves the key out where the record, as served, has []
        whole["tool_calls"] = []
    assert _without_ids({k: whole.get(k) for k in message if k != "role"}) == \
        _without_ids({k: v for k, v in message.items() if k != "role"})
    chunks = records[mode_of(chunking)]["chunks"]
    assert _without_ids(deltas) == _without_ids([c["choices"][0]["delta"] for c in chunks[1:-1]])
    assert CASES[cluster_id](whole, deltas), (whole, deltas)

    if audit is not None:  # the shim changed no parser: the installed files, no bare top read, no torch stub left
        assert audit["loaded"] and audit["changed"] == [] and audit["top_reads"] == [] and not audit["torch"]


def test_the_snapshot_holds_the_clusters_this_test_reproduces() -> None:
    """The clusters above are engine bugs of the committed triage, each repro'd on its own engine."""
    assert {c: _clusters()[c].kind for c in CASES} == dict.fromkeys(CASES, "engine_bug")
    assert Path(SNAPSHOT / "fixtures.jsonl").is_file()

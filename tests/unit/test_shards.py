"""The fan-out plan (shards), case slices, and the Ray executor's bookkeeping that needs no cluster."""

from __future__ import annotations

import argparse
import io
import tarfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers_results import record, write_results
from toolmatrix.library.cases import CaseShard, case_shard, load_cases
from toolmatrix.scale.executors.ray import _pack, file_results, task_options
from toolmatrix.scale.shards import PlanError, new_batch, plan_shards
from toolmatrix.serving.registry import data_root


def test_one_shard_per_pair_slice_and_repeat_each_with_its_own_command_and_folder():
    plan = plan_shards(["llamacpp", "vllm"], ["qwen2.5-coder-0.5b", "qwen3"], case_shards=2, repeat=2,
                       pytest_args=("-n", "2"))
    ids = [s.id for s in plan.shards]
    assert len(ids) == len(set(ids)) == 2 * 2 * 2  # qwen3's weights are a hub repo: no local process serves it
    assert [pair for pair, _ in plan.not_run] == ["qwen3@llamacpp", "qwen3@vllm"]
    assert all(why.startswith("the process launcher loads local weights only") for _, why in plan.not_run)
    shard = next(s for s in plan.shards if s.id == "qwen2.5-coder-0.5b@vllm.2of2.r1")
    assert shard.command == ("pytest", "-n", "2", "--engine=vllm", "--model=qwen2.5-coder-0.5b", "--launcher=process",
                             "--results-dir=results/qwen2.5-coder-0.5b@vllm.2of2.r1", "--no-matrix",
                             "--shard=qwen2.5-coder-0.5b@vllm.2of2.r1", "--case-shard=2/2")
    assert len({s.results_dir for s in plan.shards}) == len(plan.shards)


def test_gpus_come_from_the_engines_docker_spec():
    plan = plan_shards(["vllm", "llamacpp"], ["qwen3"], launcher="docker")
    gpus = {s.engine: s.gpus for s in plan.shards}
    assert gpus["vllm"] == 1  # gpus: all -> a machine with one
    assert task_options(plan.shards[0], 1) == {"num_gpus": 1, "num_cpus": 1, "max_retries": 1,
                                               "retry_exceptions": False}
    cpu = plan_shards(["llamacpp"], ["qwen2.5-coder-0.5b"]).shards[0]
    assert cpu.gpus == 0 and task_options(cpu, 0)["num_gpus"] == 0


@pytest.mark.parametrize("engines, models, words", [
    (["nope"], ["qwen3"], "unknown engine 'nope'"),
    (["llamacpp"], ["no-such-model"], "unknown model 'no-such-model'"),
    (["llamacpp"], ["qwen3"], "no pair can run: qwen3@llamacpp"),
    ([], ["qwen3"], "name at least one engine and one model"),
])
def test_a_plan_that_cannot_be_made_says_why(engines, models, words):
    with pytest.raises(PlanError, match=words):
        plan_shards(engines, models)


@pytest.fixture(scope="module")
def library_ids() -> list[str]:
    return [c.id for c in load_cases([data_root() / "cases"])]


@given(count=st.integers(1, 9))
def test_case_slices_split_the_library_exactly(library_ids, count):
    # The library is read once: reading it in every example outran hypothesis's deadline on a busy machine.
    ids = library_ids
    slices = [[i for i in ids if CaseShard(k, count).holds(i)] for k in range(1, count + 1)]
    assert sorted(i for s in slices for i in s) == sorted(ids)  # every case in exactly one slice


@pytest.mark.parametrize("text", ["0/2", "3/2", "a/b", "1", "1/0"])
def test_a_bad_case_shard_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        case_shard(text)


def test_a_filed_run_is_never_overwritten(tmp_path):
    run = write_results(tmp_path / "node", [record("single.a")], run_id="r1")
    (run / "matrix").mkdir()
    (run / "matrix" / "index.html").write_text("the node's own page")
    shard = plan_shards(["llamacpp"], ["qwen2.5-coder-0.5b"]).shards[0]
    archive = _pack(run)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert sorted(tar.getnames()) == ["results.jsonl", "run.json"]  # the driver builds the page, not the node
    filed = file_results(archive, tmp_path / "root", shard)
    assert filed == tmp_path / "root" / "qwen2.5-coder-0.5b@llamacpp" / "r1"
    before = (filed / "results.jsonl").read_bytes()
    with pytest.raises(FileExistsError):
        file_results(archive, tmp_path / "root", shard)
    assert (filed / "results.jsonl").read_bytes() == before
    assert [p.name for p in (tmp_path / "root").iterdir()] == ["qwen2.5-coder-0.5b@llamacpp"]  # no staging left


def test_a_batch_is_named_in_every_command_of_the_plan():
    plan = plan_shards(["llamacpp"], ["qwen2.5-coder-0.5b", "gemma3-270m"], batch="ray-1")
    assert all(s.command[-2:] == (f"--shard={s.id}", "--batch=ray-1") for s in plan.shards)
    assert new_batch("ray") != new_batch("ray") and new_batch("kubernetes").startswith("kubernetes-")


@pytest.mark.parametrize("member", ["../escape.txt", "/abs.txt", "link"])
def test_a_hostile_archive_from_a_node_is_refused_and_nothing_is_filed(tmp_path, member):
    """A node's archive is untrusted: a path out of the folder, an absolute path or a link stops the filing."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    shard = plan_shards(["llamacpp"], ["qwen2.5-coder-0.5b"]).shards[0]
    with pytest.raises(tarfile.TarError, match="refused archive member"):
        file_results(buffer.getvalue(), tmp_path / "root", shard)
    assert list((tmp_path / "root").iterdir()) == [] and not (tmp_path / "escape.txt").exists()

"""Several pairs in one invocation: the plan of pairs, the child's arguments, the exit code of the whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import ENGINE_DIED, worst
from toolmatrix.scale.pairs import Pair, child_args, plan_pairs
from toolmatrix.serving.launchers import default_launcher
from toolmatrix.serving.registry import load_engines


def test_cross_product_engine_by_engine_with_refusals():
    pairs = plan_pairs("llamacpp,llama-cpp-python", "gemma3-270m,qwen3", None, "process")
    assert [p.name for p in pairs] == ["gemma3-270m@llamacpp", "qwen3@llamacpp", "gemma3-270m@llama-cpp-python",
                                       "qwen3@llama-cpp-python"]
    assert [p.refusal is None for p in pairs] == [True, False, True, False]
    assert "loads local weights only" in pairs[1].refusal


def test_without_a_launcher_each_engine_gets_its_own_default():
    """SGLang runs only in its container: it is started there, as its own one-pair run would; llama.cpp keeps the
    process launcher and its refusal of hub weights (no CUDA image pulled on a CPU machine by surprise)."""
    pairs = plan_pairs("llamacpp,sglang", "qwen3", None, None)
    assert [(p.name, p.refusal is None) for p in pairs] == [("qwen3@llamacpp", False), ("qwen3@sglang", True)]
    assert "loads local weights only" in pairs[0].refusal
    assert default_launcher(None, load_engines()["sglang"]) == "docker"
    assert default_launcher(None, load_engines()["vllm"]) == "process" and default_launcher("http://h/v1") == "external"


def test_a_model_may_be_given_by_its_source():
    [pair] = plan_pairs("llamacpp", "gguf:/models/mine.gguf", None, "process")
    assert pair.refusal is None and pair.results_dir(Path("r")) == Path("r/gguf_models_mine.gguf@llamacpp")


# "url", not "base_url": pytest-base-url (installed beside the tests) owns a session fixture of that name.
@pytest.mark.parametrize(("engines", "models", "url", "message"), [
    ("llamacpp,nope", "gemma3-270m", None, "--engine 'nope': unknown engine"),
    ("llamacpp", "gemma3-270m,nope", None, "--model 'nope': unknown model"),
    ("llamacpp,vllm", "a,b", "http://gpu:8000/v1", "--base-url reaches one server"),
])
def test_unknown_ids_and_several_engines_at_one_url_are_usage_errors(engines, models, url, message):
    with pytest.raises(ToolmatrixError, match=message):  # the plugin makes it pytest's usage error
        plan_pairs(engines, models, url, "external" if url else "process")


def test_one_url_serves_several_model_names():
    pairs = plan_pairs(None, "Qwen/Qwen3-8B,llama3.1", "http://gpu:8000/v1", "external")
    assert [(p.name, p.refusal) for p in pairs] == [("Qwen/Qwen3-8B@external", None), ("llama3.1@external", None)]
    assert pairs[0].results_dir(Path("r")) == Path("r/Qwen_Qwen3-8B@external")


def test_child_gets_one_engine_one_model_and_its_own_results_dir():
    args = ["-n", "2", "--engine", "a,b", "--model=m1,m2", "--results-dir", "out", "-k", "single", "--results-dir=x"]
    pair = Pair("m2", "b")
    assert child_args(args, pair, Path("out/m2@b")) == ["-n", "2", "-k", "single", "--model=m2", "--engine=b",
                                                        "--results-dir=out/m2@b"]
    assert child_args(["--base-url=u", "--model", "x,y"], Pair("y", None), None) == ["--base-url=u", "--model=y"]


def test_worst_exit_code():
    assert worst([0, 1, ENGINE_DIED, 5]) == ENGINE_DIED
    assert worst([ENGINE_DIED, 2]) == 2
    assert worst([1, 4]) == 4
    assert worst([0, 5]) == 5
    assert worst([1, -9]) == 3  # a child killed by a signal: an internal error, never a pass
    assert worst([]) == 0


def test_case_files_travel_to_a_shard_as_absolute_paths(tmp_path):
    from toolmatrix.scale.pairs import absolute_cases

    args = ["-k", "single", "--cases", "mine.yaml", "--cases=sub/other.yaml", "--cases", "/abs/x.yaml"]
    assert absolute_cases(args, tmp_path) == ["-k", "single", "--cases", str(tmp_path / "mine.yaml"),
                                              f"--cases={tmp_path / 'sub/other.yaml'}", "--cases", "/abs/x.yaml"]

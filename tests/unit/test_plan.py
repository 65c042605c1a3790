"""``toolmatrix plan`` and ``toolmatrix engines``: every engine x every model either gets a launch with the right
tool-call flags or one clear line saying why not; a few exact command lines are pinned."""

from __future__ import annotations

import json
import os
import re
import shlex

import attrs
import pytest

from toolmatrix.cli import main
from toolmatrix.serving.launchers.docker import container_config
from toolmatrix.serving.registry import data_root, load_registry

ENGINES, MODELS = load_registry()
TEMPLATES = data_root() / "engines" / "templates"
PAIRS = [(engine, model) for engine in sorted(ENGINES) for model in sorted(MODELS)]


@pytest.fixture(autouse=True)
def fixed_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", "/hf")
    monkeypatch.setenv("TOOLMATRIX_CACHE", "/cache")
    monkeypatch.delenv("TOOLMATRIX_LLAMACPP_BIN", raising=False)


def plan(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def contains_run(items: list[str], run: tuple[str, ...]) -> bool:
    return any(tuple(items[i:i + len(run)]) == run for i in range(len(items) - len(run) + 1))


def main_launcher(engine_id: str) -> str:
    return ENGINES[engine_id].launchers[0]  # docker where the spec has it: most engines are GPU containers


@pytest.mark.parametrize(("engine_id", "model_id"), PAIRS, ids=[f"{m}@{e}" for e, m in PAIRS])
def test_every_pair_is_planned_or_refused_with_a_reason(capsys, engine_id, model_id):
    engine, model = ENGINES[engine_id], MODELS[model_id]
    launcher = main_launcher(engine_id)
    code, out, err = plan(capsys, "--engine", engine_id, "--model", model_id, "--launcher", launcher)
    if code == 0:
        assert not re.search(r"\{[a-z_]+\}", out), "every placeholder was filled"
        assert err == ""
        if launcher == "process":
            command = shlex.split(out.strip().splitlines()[-1])
            assert contains_run(command, engine.tool_args(model)), "the tool-call flags are in the command"
            return
        command = container_config(engine, model, run_id="<run-id>").command
        assert contains_run(list(command), engine.tool_args(model)), "the tool-call flags are in the command"
        docker_run = out[out.index("docker run"):]
        assert shlex.join(command) in docker_run.replace(" \\\n    ", " ")
        assert f"--name toolmatrix-{model_id}-{engine_id}-" in docker_run
    else:
        assert code == 2 and out == ""
        (line,) = err.splitlines()
        assert line.startswith(f"toolmatrix plan: {model_id}@{engine_id} cannot be served: ")
        reason = line.split("cannot be served: ", 1)[1]
        assert reason == engine.refusal(model, launcher) and len(reason) > 40


# Flags written down independently of the specs (reference/engines.md), so a wrong spec fails here.
EXPECTED_FLAGS = {
    ("vllm", "qwen3"): "--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3",
    ("vllm", "qwen3-coder"): "--enable-auto-tool-choice --tool-call-parser qwen3_xml",
    ("vllm", "llama3.1"): "--tool-call-parser llama3_json --chat-template /vllm-workspace/examples/tool_chat_template_llama3.1_json.jinja",
    ("vllm", "llama4-scout"): "--tool-call-parser llama4_pythonic --chat-template /vllm-workspace/examples/tool_chat_template_llama4_pythonic.jinja",
    ("vllm", "mistral-small3.2"): "--tool-call-parser mistral --tokenizer-mode mistral --config-format mistral --load-format mistral",
    ("vllm", "gpt-oss-20b"): "--tool-call-parser openai --reasoning-parser openai_gptoss",
    ("vllm", "deepseek-v3.1"): "--tool-call-parser deepseek_v31 --reasoning-parser deepseek_v3 --chat-template /vllm-workspace/examples/tool_chat_template_deepseekv31.jinja",
    ("vllm", "kimi-k2"): "--tool-call-parser kimi_k2",
    ("vllm", "glm4.5-air"): "--tool-call-parser glm45 --reasoning-parser glm45",
    ("vllm", "granite3.3"): "--tool-call-parser granite",
    ("vllm", "granite4"): "--tool-call-parser granite4",
    ("vllm", "gemma3-27b"): "--tool-call-parser hermes --chat-template /toolmatrix/templates/gemma3-tools.jinja",
    ("sglang", "qwen3"): "--tool-call-parser qwen25 --reasoning-parser qwen3",
    ("sglang", "qwen3-coder"): "--tool-call-parser qwen3_coder",
    ("sglang", "llama3.3"): "--tool-call-parser llama3",
    ("sglang", "gpt-oss-120b"): "--tool-call-parser gpt-oss --reasoning-parser gpt-oss",
    ("sglang", "deepseek-v3.1"): "--tool-call-parser deepseekv31",
    ("sglang", "hermes3"): "--tool-call-parser hermes",
    ("lmdeploy", "qwen3-coder"): "--tool-call-parser qwen3coder",
    ("lmdeploy", "llama3.1"): "--tool-call-parser llama3",
    ("lmdeploy", "qwen3"): "--tool-call-parser qwen3 --reasoning-parser qwen-qwq",
    ("trtllm", "qwen3"): "--tool_parser qwen3",
    ("trtllm", "deepseek-v3.1"): "--tool_parser deepseek_v31 --reasoning_parser deepseek-r1",
    ("ovms", "hermes3"): "--tool_parser hermes3",
    ("ovms", "qwen3"): "--tool_parser hermes3 --reasoning_parser qwen3",
    ("dynamo", "deepseek-v3.1"): "--dyn-tool-call-parser deepseek_v3_1",
    ("dynamo", "gpt-oss-20b"): "--dyn-tool-call-parser harmony --dyn-reasoning-parser gpt_oss",
    ("llamacpp", "qwen3"): "--jinja",
}


@pytest.mark.parametrize(("engine_id", "model_id"), sorted(EXPECTED_FLAGS), ids=[f"{m}@{e}" for e, m in sorted(EXPECTED_FLAGS)])
def test_known_launch_lines_carry_the_right_flags(capsys, engine_id, model_id):
    code, out, _ = plan(capsys, "--engine", engine_id, "--model", model_id, "--launcher", main_launcher(engine_id))
    assert code == 0
    assert EXPECTED_FLAGS[engine_id, model_id] in out.replace(" \\\n    ", " ")


EXPECTED_REFUSALS = {
    ("tgi", "gemma3-27b"): "needs its chat template gemma3-tools.jinja",
    ("ollama", "gemma3-27b"): "gemma3 models carry no tools capability",
    ("llama-cpp-python", "qwen3"): "the process launcher loads local weights only",
    ("transformers", "gpt-oss-20b"): "the process launcher loads local weights only",
    ("trtllm", "llama3.1"): "cannot parse the 'llama3_json' tool-call format",
    ("tabbyapi", "qwen3-coder"): "needs a local `path`",
    ("lmdeploy", "mistral-small3.2"): "LMDeploy has no --tool-call-parser",
    ("trtllm", "glm4.5-air"): "TensorRT-LLM 1.3.0rc5 has no glm4 --tool_parser",
}


@pytest.mark.parametrize(("engine_id", "model_id"), sorted(EXPECTED_REFUSALS), ids=[f"{m}@{e}" for e, m in sorted(EXPECTED_REFUSALS)])
def test_known_refusals_say_why(capsys, engine_id, model_id):
    code, _, err = plan(capsys, "--engine", engine_id, "--model", model_id, "--launcher", main_launcher(engine_id))
    assert code == 2 and EXPECTED_REFUSALS[engine_id, model_id] in err


def snapshot(engine_id: str, model_id: str, **kwargs) -> str:
    return container_config(ENGINES[engine_id], MODELS[model_id], run_id="run-1", owner="host:1", **kwargs).docker_cli()


def test_snapshot_vllm_qwen3():
    assert snapshot("vllm", "qwen3") == """\
docker run -d --name toolmatrix-qwen3-vllm-4e65d3fb \\
    --label toolmatrix.run=run-1 \\
    --label toolmatrix.pair=qwen3@vllm \\
    --label toolmatrix.owner=host:1 \\
    --network host \\
    --gpus all \\
    --ipc host \\
    -e HF_TOKEN \\
    -v /hf:/root/.cache/huggingface \\
    vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B --served-model-name qwen3 --host 0.0.0.0 --port 8000 \
--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3"""


def test_snapshot_sglang_qwen3():
    assert snapshot("sglang", "qwen3") == """\
docker run -d --name toolmatrix-qwen3-sglang-4e65d3fb \\
    --label toolmatrix.run=run-1 \\
    --label toolmatrix.pair=qwen3@sglang \\
    --label toolmatrix.owner=host:1 \\
    --network host \\
    --gpus all \\
    --ipc host \\
    --shm-size 32g \\
    -e HF_TOKEN \\
    -v /hf:/root/.cache/huggingface \\
    --entrypoint python3 \\
    lmsysorg/sglang:v0.5.23 -m sglang.launch_server --model-path Qwen/Qwen3-8B --served-model-name qwen3 \
--host 0.0.0.0 --port 30000 --tool-call-parser qwen25 --reasoning-parser qwen3"""


def test_snapshot_llamacpp_docker_gemma3_270m():
    assert snapshot("llamacpp", "gemma3-270m") == f"""\
docker run -d --name toolmatrix-gemma3-270m-llamacpp-4e65d3fb \\
    --label toolmatrix.run=run-1 \\
    --label toolmatrix.pair=gemma3-270m@llamacpp \\
    --label toolmatrix.owner=host:1 \\
    --network host \\
    --gpus all \\
    -e LLAMA_CACHE=/root/.cache/llama.cpp \\
    -e HF_TOKEN \\
    -v /cache/llama.cpp:/root/.cache/llama.cpp \\
    -v /cache/weights:/models:ro \\
    -v {TEMPLATES}:/toolmatrix/templates:ro \\
    ghcr.io/ggml-org/llama.cpp:server-cuda-b11434 --host 0.0.0.0 --port 8080 -m /models/gemma-3-270m-q4_k_m.gguf \
--alias gemma3-270m --jinja --parallel 2 --ctx-size 16384 -ngl 999 --no-webui --props \
--chat-template-file /toolmatrix/templates/gemma3-tools.jinja"""


def test_snapshot_dynamo_keeps_the_shell_script_whole():
    cli = snapshot("dynamo", "qwen3")
    assert cli.endswith("""\
    --entrypoint bash \\
    nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0 -c 'python3 -m dynamo.frontend --http-port "$0" & exec python3 -m \
dynamo.vllm "$@"' 8000 --model Qwen/Qwen3-8B --served-model-name qwen3 --dyn-tool-call-parser hermes \
--dyn-reasoning-parser qwen3""")
    assert "-e DYN_STORE_KV=file" in cli


def test_plan_prints_details_before_the_command(capsys):
    code, out, _ = plan(capsys, "--engine", "ollama", "--model", "llama3.1", "--launcher", "docker")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "pair:       llama3.1@ollama (Llama 3.1 8B Instruct on Ollama), docker launcher"
    assert "weights:    ollama llama3.1:8b" in lines
    assert '            then POST /api/pull {"model": "llama3.1:8b", "stream": false}' in lines
    assert "            then POST /api/show {\"model\": \"llama3.1:8b\"}, capabilities must hold 'tools'" in lines
    # the model's own gap and the engine's, both shown
    assert any(line.startswith("unsupported: parallel_calls: Llama 3.x JSON tool calling is one call per turn") for line in lines)
    assert any(line.startswith("unsupported: tool_choice.required: Ollama") for line in lines)
    assert lines[-1].startswith("    ollama/ollama:0.12.10 serve")


def test_plan_with_a_model_revision_pins_it(capsys):
    model = MODELS["qwen3"]
    pinned = attrs.evolve(model, weights={**model.weights, "hf": {"repo": "Qwen/Qwen3-8B", "revision": "abc123"}})
    assert container_config(ENGINES["vllm"], pinned).command[:4] == ("--model", "Qwen/Qwen3-8B", "--revision", "abc123")
    assert "--revision" not in container_config(ENGINES["vllm"], model).command  # no revision: no flag


def test_tabbyapi_serves_a_local_exl3_folder(tmp_path):
    folder = tmp_path / "Qwen3-Coder-30B-exl3"
    model = MODELS["qwen3-coder"]
    local = attrs.evolve(model, weights={**model.weights, "exl3": {"path": str(folder)}})
    config = container_config(ENGINES["tabbyapi"], local)
    assert config.command[-2:] == ("--tool-format", "qwen3_coder")
    assert contains_run(list(config.command), ("--model-dir", "/models", "--model-name", "Qwen3-Coder-30B-exl3"))
    assert any(m.host == str(tmp_path) and m.container == "/models" and m.read_only for m in config.mounts)


def test_variant_and_bridge_network(capsys):
    code, out, _ = plan(capsys, "--engine", "llamacpp", "--model", "qwen3", "--variant", "cpu", "--network", "bridge",
                        "--launcher", "docker")
    assert code == 0
    assert "ghcr.io/ggml-org/llama.cpp:server-b11434" in out and "--gpus" not in out
    assert "-p 8080:8080" in out and "--network host" not in out


def test_local_only_image_is_labelled(capsys):
    code, out, _ = plan(capsys, "--engine", "mlc", "--model", "qwen3", "--launcher", "docker")
    assert code == 0 and "toolmatrix/mlc-llm:0.20.dev162 (built locally, never pulled:" in out
    assert "HF://mlc-ai/Qwen3-8B-q4f16_1-MLC" in out


def test_process_launcher_command_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no llama-server found: plan must not build one
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF")
    code, out, _ = plan(capsys, "--engine", "llamacpp", "--model", "gemma3-270m", "--launcher", "process")
    assert code == 0
    assert "binary:     llama-server (not found yet: built on first use)" in out
    assert out.rstrip().splitlines()[-1] == (
        f"llama-server --host 127.0.0.1 --port 8080 -m {tmp_path}/weights/gemma-3-270m-q4_k_m.gguf --alias gemma3-270m "
        f"--jinja --chat-template-file {TEMPLATES}/gemma3-tools.jinja --parallel 2 --ctx-size 16384 "
        f"--threads {os.cpu_count()} --no-webui --props")
    assert not (tmp_path / "bin").exists()


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_process_launcher_serves_local_ggufs_only(capsys, monkeypatch, tmp_path, model_id):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF")
    code, out, err = plan(capsys, "--engine", "llamacpp", "--model", model_id, "--launcher", "process")
    source = MODELS[model_id].weights_source("gguf")
    if source is not None and source.form == "local":
        assert code == 0 and f" --alias {model_id} " in out
    else:
        assert code == 2 and len(err.splitlines()) == 1
        assert ("the process launcher loads local weights only" in err) or ("has no gguf weights" in err)


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "nope", "--model", "qwen3"], "unknown engine 'nope'; known: dynamo, llama-cpp-python, llamacpp"),
    (["--engine", "vllm", "--model", "nope"], "unknown model 'nope'; known: deepseek-v3.1"),
    (["--engine", "sglang", "--model", "qwen3", "--launcher", "process"], "engine 'sglang' has no process launcher"),
    (["--engine", "llamacpp", "--model", "qwen3", "--variant", "gpu9", "--launcher", "docker"],
     "no docker variant 'gpu9' (known: cpu, local)"),
], ids=["unknown-engine", "unknown-model", "no-process-section", "unknown-variant"])
def test_usage_errors_exit_2_with_one_line(capsys, args, message):
    code, out, err = plan(capsys, *args)
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1


def test_engines_table_and_json(capsys):
    assert main(["engines"]) == 0
    table = capsys.readouterr().out
    for engine in ENGINES.values():
        assert engine.id in table and (engine.docker.image if engine.docker else "process") in table
    assert main(["engines", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(ENGINES)
    assert rows["llamacpp"]["launchers"] == ["docker", "process"]
    assert rows["llamacpp"]["variants"]["local"] == "toolmatrix/llama-server:b11434"
    assert rows["ollama"]["readiness"] == ["/api/version", "POST /api/pull", "POST /api/show"]
    assert rows["ollama"]["families"] == "all but gemma3" and rows["vllm"]["families"] == "21 listed"
    assert rows["tgi"]["unsupported"]["parallel_calls"].startswith("TGI's tool grammar admits one JSON object")


def test_plan_takes_an_explicit_model_source(capsys, monkeypatch):
    monkeypatch.setenv("TOOLMATRIX_FAMILY", "qwen3_coder")
    code, out, _ = plan(capsys, "--engine", "vllm", "--model", "hf:Qwen/Qwen3-Coder-30B-A3B-Instruct@main",
                        "--launcher", "docker")
    assert code == 0
    assert ("--model Qwen/Qwen3-Coder-30B-A3B-Instruct --revision main --served-model-name "
            "qwen3-coder-30b-a3b-instruct") in out and "--tool-call-parser qwen3_xml" in out
    code, _, err = plan(capsys, "--engine", "vllm", "--model", "hf:nope")
    assert code == 2 and "a hub repository is hf:ORG/NAME[@REVISION]" in err


def test_plan_without_a_launcher_prints_what_pytest_would_start(capsys, monkeypatch, tmp_path):
    """pytest's default launcher is process: plan used to print a CUDA docker run that pytest never starts."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF")
    default = plan(capsys, "--engine", "llamacpp", "--model", "gemma3-270m")
    assert default == plan(capsys, "--engine", "llamacpp", "--model", "gemma3-270m", "--launcher", "process")
    assert default[0] == 0 and "process launcher" in default[1] and "docker run" not in default[1]
    # An engine that only runs in its container starts there: the design card's `--engine=sglang --model=qwen3`.
    code, out, _ = plan(capsys, "--engine", "sglang", "--model", "qwen3")
    assert code == 0 and "docker launcher" in out and "docker run" in out
    assert plan(capsys, "--engine", "sglang", "--model", "qwen3") == plan(
        capsys, "--engine", "sglang", "--model", "qwen3", "--launcher", "docker")
    # An engine with a process launcher keeps it, and its refusal says what to do.
    code, out, err = plan(capsys, "--engine", "vllm", "--model", "qwen3")
    assert code == 2 and out == "" and "the process launcher loads local weights only" in err
    assert "use the docker launcher" in err

"""run.json names the chat template the engine actually renders with, and its SHA-256.

It used to hash the model's template for every run, also where the engine never read it (llama-cpp-python's
chatml-function-calling, a template bundled in a vLLM image).
"""

from __future__ import annotations

import hashlib

import pytest

from toolmatrix.serving.launchers import DockerLauncher, ProcessLauncher
from toolmatrix.serving.registry import load_engines, load_models

ENGINES, MODELS = load_engines(), load_models()


@pytest.fixture(autouse=True)
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))


def ours(model_id: str) -> dict[str, str]:
    template = MODELS[model_id].chat_template
    return {"chat_template": template.name, "chat_template_sha256": hashlib.sha256(template.read_bytes()).hexdigest()}


def template_of(info: dict) -> dict:
    return {key: info[key] for key in ("chat_template", "chat_template_sha256")}


@pytest.mark.parametrize("engine_id", ["llamacpp", "vllm", "transformers"])
def test_the_process_launcher_reports_the_template_it_passes_or_writes_into_the_weights(engine_id):
    """llama-server and vLLM get --chat-template FILE; transformers serve reads it from the converted folder."""
    made = ProcessLauncher(ENGINES[engine_id], MODELS["gemma3-270m"])
    made.command(8080, fetch=False)
    assert template_of(made.weights_info()) == ours("gemma3-270m")


def test_an_engine_that_reads_no_template_file_reports_none():
    made = ProcessLauncher(ENGINES["llama-cpp-python"], MODELS["gemma3-270m"])
    made.command(8080, fetch=False)
    assert template_of(made.weights_info()) == {"chat_template": None, "chat_template_sha256": None}


def test_docker_reports_the_mounted_template_and_names_a_bundled_one_without_a_hash():
    mounted = DockerLauncher(ENGINES["llamacpp"], MODELS["gemma3-270m"], variant="cpu", client=object())
    assert template_of(mounted.weights_info()) == ours("gemma3-270m")
    bundled = DockerLauncher(ENGINES["vllm"], MODELS["llama3.1"], client=object())
    assert template_of(bundled.weights_info()) == {
        "chat_template": ("/vllm-workspace/examples/tool_chat_template_llama3.1_json.jinja "
                          "(in image vllm/vllm-openai:v0.33.0)"),
        "chat_template_sha256": None}
    neither = DockerLauncher(ENGINES["vllm"], MODELS["qwen3"], client=object())
    assert template_of(neither.weights_info()) == {"chat_template": None, "chat_template_sha256": None}

"""One placeholder renderer for both launchers: only {lower_case_name} is a placeholder."""

from __future__ import annotations

import attrs
import pytest

from toolmatrix.serving.launchers import ProcessLauncher
from toolmatrix.serving.launchers.docker import container_config
from toolmatrix.serving.placeholders import render, render_args
from toolmatrix.serving.registry import load_engines, load_models

JSON_ARG = '{"a": 1, "b": {"c": "{port}"}}'


def test_only_lower_case_names_in_braces_are_placeholders():
    assert render('{"a":1} --port {port}', {"port": "8080"}) == '{"a":1} --port 8080'
    with pytest.raises(KeyError, match=r"unknown placeholder \{slotz\}"):
        render("{slotz}", {"slots": "2"})


def test_an_empty_value_drops_its_flag():
    assert render_args(["--chat-template-file", "{chat_template}", "--jinja"], {"chat_template": ""}) == ["--jinja"]


@pytest.fixture
def local_gguf(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF")


def test_a_json_argument_renders_as_written_in_both_launchers(local_gguf):
    """The process launcher used str.format: a JSON argument crashed it while docker accepted it."""
    engine, model = load_engines()["llamacpp"], load_models()["gemma3-270m"]
    process = attrs.evolve(engine, process=attrs.evolve(engine.process, args=(*engine.process.args, "--kv", JSON_ARG)))
    argv = ProcessLauncher(process, model).command(8080, fetch=False)
    assert argv[-2:] == ["--kv", '{"a": 1, "b": {"c": "8080"}}']
    docker = attrs.evolve(engine, docker=attrs.evolve(engine.docker, command=(*engine.docker.command, "--kv", JSON_ARG)))
    config = container_config(docker, model, host_port=8080)
    at = config.command.index("--kv")  # the chat template arguments come after the spec's command
    assert list(config.command[at:at + 2]) == ["--kv", '{"a": 1, "b": {"c": "8080"}}']

"""``toolmatrix replay-repro``: a fixture's repro that runs with the engine's own package alone.

Without the engines' envs: every replay engine has a template; each rendered snippet is valid Python (or shell),
imports nothing of toolmatrix and nothing but the engine's own package and the standard library, and carries the
worker's own request for the fixture (text, tools, parsers, thinking switch, the stream's pieces), the tokenizer as
a Hugging Face repo id, never a local path; llama.cpp's C++ one carries the same as C++ constants and the chat
template inlined. The files' answers are held to the replay records in tests/integration/test_replay_repro_run.py.
"""

from __future__ import annotations

import ast
import json
import os
import sys

import pytest

from toolmatrix.cli import main
from toolmatrix.replay.adapters import adapter_for, replay_engines
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.fixtures import Fixture, dump_fixtures
from toolmatrix.replay.repro import snippet, template
from toolmatrix.replay.session import parse_request
from toolmatrix.serving.registry import load_engines

TEXT = '<think>\nhm\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
FIXTURE = Fixture.from_dict({"id": "hermes.single.weather.plain", "family": "hermes", "model": "qwen3", "text": TEXT,
                             "tools": TOOLS, "expected": {"tool_calls": [{"name": "get_weather",
                                                                          "arguments": {"city": "Zürich"}}],
                                                          "content": None, "reasoning": "hm"}})
# The import names each engine's package brings (lmdeploy builds its parsers with a transformers tokenizer, mlx-lm
# runs on mlx): nothing else beside the standard library.
PACKAGES = {"sglang": {"sglang"}, "vllm": {"vllm"}, "transformers": {"transformers"},
            "lmdeploy": {"lmdeploy", "transformers"}, "mlxlm": {"mlx_lm", "huggingface_hub"},
            "dynamo": {"dynamo", "huggingface_hub", "tokenizers"}}


def _adapter(engine: str):
    return adapter_for(load_engines()[engine])


def _constants(code: str) -> dict:
    """The snippet's constants block, as the literals it assigns."""
    tree = ast.parse(code)
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.isupper()}


def test_every_replay_engine_has_a_repro_template() -> None:
    assert {engine: bool(template(engine)[1].strip()) for engine in replay_engines()} == dict.fromkeys(replay_engines(), True)
    with pytest.raises(LookupError, match="tgi: no repro template"):
        template("tgi")


@pytest.mark.parametrize("engine", sorted(PACKAGES))
def test_a_python_repro_imports_only_the_engines_package_and_carries_the_workers_request(engine: str) -> None:
    adapter = _adapter(engine)
    support = adapter.supports(FIXTURE.family, None)
    if not support:  # vLLM's parsers read the family's tokenizer, which `replay-install tokenizers` fetches
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(support.reason)
        pytest.skip(support.reason)
    code = snippet(adapter, FIXTURE, "token")
    assert template(engine)[0] == ".py"
    tree = ast.parse(code)  # valid Python as printed
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert roots - sys.stdlib_module_names == PACKAGES[engine]

    request = parse_request(adapter, FIXTURE, ["token"])
    constants = _constants(code)
    assert constants["TEXT"] == request["text"] and constants.get("TOOLS", TOOLS) == TOOLS
    assert constants["TOOL_PARSER"] == request["tool_parser"] and constants["TOOL_PARSER"]
    assert constants.get("REASONING_PARSER", request["reasoning_parser"]) == request["reasoning_parser"]
    assert constants["PIECES"] == [tuple(piece) for piece in request["streams"]["token"]]
    # the ids the worker's non-streamed parse reads, where the engine's template reads them (None: no ids here)
    assert constants.get("TOKEN_IDS", request["token_ids"]) == request["token_ids"]
    assert "".join(text for text, _ids in constants["PIECES"]) == request["text"]
    assert code.startswith("# Replay fixture hermes.single.weather.plain on ")
    assert '"reasoning": "hm"' in code.splitlines()[2]  # the expected answer, for the reader


def test_without_a_chunking_the_repro_is_the_non_streamed_parse_alone() -> None:
    constants = _constants(snippet(_adapter("sglang"), FIXTURE))
    assert constants["PIECES"] is None
    with pytest.raises(ValueError, match="unknown chunking 'bytes'"):
        snippet(_adapter("sglang"), FIXTURE, "bytes")


def test_the_llamacpp_repro_is_cpp_with_its_constants_and_template_inlined() -> None:
    adapter = _adapter("llamacpp")
    code = snippet(adapter, FIXTURE, "whole")
    assert template("llamacpp")[0] == ".cpp" and "@constants" not in code and "c++ -std=c++17" in code
    assert f'static const std::string TEXT = R"repro({TEXT})repro";' in code
    assert f'static const json TOOLS = json::parse(R"repro({json.dumps(TOOLS, ensure_ascii=False)})repro");' in code
    assert "static const std::string CHAT_TEMPLATE = R\"repro(" in code and ".cache/toolmatrix" not in code


def test_a_tokenizer_is_named_by_its_hub_repo_never_a_local_path() -> None:
    from toolmatrix.replay.feeder import tokenizer_dir
    from toolmatrix.replay.repro import hub_tokenizer
    assert hub_tokenizer(str(tokenizer_dir("qwen3") / "tokenizer.json")) == "Qwen/Qwen3-8B"
    assert hub_tokenizer("") is None
    with pytest.raises(LookupError, match="no Hugging Face repo id"):
        hub_tokenizer("/elsewhere/tokenizer.json")


def test_an_engine_without_the_familys_parser_is_refused_with_its_reason() -> None:
    granite = Fixture.from_dict({**FIXTURE.to_dict(), "id": "granite.x", "family": "granite"})
    with pytest.raises(LookupError, match="granite.x: sglang: .*granite"):
        snippet(_adapter("sglang"), granite)


def test_the_command_prints_the_snippet_and_names_what_is_wrong(tmp_path, capsys) -> None:
    fixtures = tmp_path / "f.jsonl"
    dump_fixtures([FIXTURE], fixtures)
    base = ["replay-repro", "--fixtures", str(fixtures), "--engine", "sglang"]
    assert main([*base, "--fixture", FIXTURE.id, "--chunking", "whole"]) == 0
    (whole,) = _constants(capsys.readouterr().out)["PIECES"]  # one piece: the text, with its ids where a
    assert whole[0] == TEXT and (whole[1] is None or all(isinstance(i, int) for i in whole[1]))  # tokenizer is here
    assert main([*base, "--fixture", "nope"]) == 2
    assert f"{fixtures}: no fixture with id 'nope'" in capsys.readouterr().err
    assert main([*base[:-1], "tgi", "--fixture", FIXTURE.id]) == 2
    assert "--engine tgi: no replay adapter" in capsys.readouterr().err


def test_the_token_ids_the_worker_parses_reach_the_snippet() -> None:
    """The ids the worker's non-streamed parse reads (the model's, else the text encoded with the family's real
    tokenizer), not the engine's decoded text re-encoded: vLLM, LMDeploy and MLX-LM parse ids."""
    if not tokenizer_path(FIXTURE.family):
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("no offline Qwen3 tokenizer: toolmatrix replay-install tokenizers")
        pytest.skip("no offline Qwen3 tokenizer: toolmatrix replay-install tokenizers")
    for engine in ("vllm", "lmdeploy", "mlxlm"):
        adapter = _adapter(engine)
        request = parse_request(adapter, FIXTURE, [])
        assert request["token_ids"], engine
        assert _constants(snippet(adapter, FIXTURE))["TOKEN_IDS"] == request["token_ids"], engine

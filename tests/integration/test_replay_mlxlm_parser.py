"""MLX-LM 0.32.2 in its replay env (the real mlx-lm on the CPU build of mlx), through the worker as ``toolmatrix
replay`` runs it:

- the spec's mapping is measured, not written down: MLX-LM's own ``tokenizer_utils._infer_tool_parser`` run on
  llama.cpp's copy of each family's official template (the one engines/llamacpp.yaml replays with) selects the
  parser engines/mlxlm.yaml names, and none for the families the spec says it cannot serve; on the family's offline
  tokenizer (Qwen3's) the server's own tokenizer loading infers the same parser;
- a behaviour measured by replay and pinned here: ``tool_parsers/qwen3_coder.py`` looks for
  ``<function=(.*?)</function>$``, so a blank line between ``</function>`` and ``</tool_call>`` makes it raise
  ``ValueError``, which ``ToolCallFormatter`` (server.py:91-98) logs and drops: HTTP 200, no call, no content,
  whole and streamed (73 of the 219 generated Qwen3-Coder fixtures, every ``loose`` one);
- and one more: the ``TextStateMachine`` (generate.py) closes a tool block at the first ``</tool_call>`` in the text,
  inside a JSON string too: the call is dropped (its JSON does not load) and the rest leaks into content.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from toolmatrix.formats import get_family
from toolmatrix.replay import feeder
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.adapters.llamacpp import TEMPLATES, LlamaCppAdapter
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.generate import generate
from toolmatrix.replay.protocol import WorkerClient
from toolmatrix.replay.session import chat_template_kwargs
from toolmatrix.serving.registry import data_root, load_engines

ENGINES = load_engines()
MLXLM = adapter_for(ENGINES["mlxlm"])
CASE = "single.get_weather_paris.plain"
pytestmark = [pytest.mark.skipif(MLXLM.ready() is not None, reason=str(MLXLM.ready())),
              pytest.mark.skipif(feeder.tokenizer_path("hermes") is None,
                                 reason="toolmatrix replay-install tokenizers")]

INFER = r"""
import json, sys
from pathlib import Path
from mlx_lm.tokenizer_utils import _infer_tool_parser, load

class Template:  # what _infer_tool_parser reads of a tokenizer: its chat template, then its vocabulary
    def __init__(self, text):
        self.chat_template = text
    def get_vocab(self):
        return {}

files, tokenizer = json.loads(sys.argv[1]), sys.argv[2]
inferred = {family: _infer_tool_parser(Template(Path(path).read_text())) for family, path in files.items()}
print(json.dumps({"templates": inferred, "tokenizer": load(Path(tokenizer)).init_kwargs.get("tool_parser_type")}))
"""


def test_each_familys_template_selects_the_parser_the_spec_names() -> None:
    folder = LlamaCppAdapter(ENGINES["llamacpp"]).bin_dir / TEMPLATES
    if not folder.is_dir():
        pytest.skip("llama.cpp's templates come with its build: toolmatrix install llamacpp")
    templates = {family: str(folder / name) for family, name in ENGINES["llamacpp"].replay_parsers.items()}
    spec = ENGINES["mlxlm"]
    done = subprocess.run([str(MLXLM.python), "-c", INFER, json.dumps(templates),
                           str(feeder.tokenizer_path("hermes").parent)],
                          capture_output=True, text=True, check=True, env=dict(MLXLM.env()))
    measured = json.loads(done.stdout)
    expected = {family: spec.replay_parsers.get(family) for family in templates}
    assert measured["templates"] == expected
    assert {f for f, parser in expected.items() if parser is None} <= set(spec.cannot_serve)
    assert measured["tokenizer"] == spec.replay_parsers["hermes"] == "json_tools"


@pytest.fixture(scope="module")
def worker():
    with WorkerClient(MLXLM.python, MLXLM.worker, dict(MLXLM.env())) as client:
        yield client


def fixture_of(family: str) -> Fixture:
    (fixture,) = [f for f in generate([data_root() / "cases"]) if f.id == f"{family}.{CASE}"]
    return fixture


def replay(client: WorkerClient, family: str, text: str) -> dict:
    fixture = fixture_of(family)
    return client.request({"op": "parse", "text": text, "tools": list(fixture.tools),
                           "tool_parser": MLXLM.supports(family, None).tool_parser, "reasoning_parser": None,
                           "family": family, "tokenizer": str(feeder.tokenizer_path(family)),
                           "chat_template_kwargs": chat_template_kwargs(fixture),
                           "streams": {c: feeder.chunk(text, get_family(family), c, fixture.id)
                                       for c in ("whole", "token")}})


def calls(answer: dict) -> list[tuple[str, dict]]:
    return [(c["name"], json.loads(c["arguments"])) for c in answer["tool_calls"]]


def test_a_blank_line_after_the_function_drops_a_qwen3_coder_call_silently(worker) -> None:
    text = fixture_of("qwen3_coder").text
    assert text.endswith("</parameter>\n</function>\n</tool_call>")
    assert calls(replay(worker, "qwen3_coder", text)["nonstream"]) == [("get_weather", {"city": "paris"})]
    answer = replay(worker, "qwen3_coder", text.replace("</function>\n", "</function>\n\n"))
    assert answer["nonstream"] == {"content": None, "reasoning": None, "tool_calls": []}
    for chunking in ("whole", "token"):
        deltas = answer["streams"][chunking]["deltas"]
        assert deltas and not any(d.get("tool_calls") or d.get("content") for d in deltas), chunking


def test_a_tool_call_close_tag_inside_an_argument_ends_the_block_and_leaks_the_rest(worker) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris</tool_call>"}}\n</tool_call>'
    answer = replay(worker, "hermes", text)
    assert answer["nonstream"] == {"content": '"}}\n</tool_call>', "reasoning": None, "tool_calls": []}
    for chunking in ("whole", "token"):
        deltas = answer["streams"][chunking]["deltas"]
        assert "".join(d.get("content") or "" for d in deltas) == '"}}\n</tool_call>', chunking
        assert not any(d.get("tool_calls") for d in deltas), chunking

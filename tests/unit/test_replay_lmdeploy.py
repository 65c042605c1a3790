"""LMDeploy's replay: which parser each family gets (the live spec's flags, plus ``replay.tool_parsers`` where the
server picks one itself), why the others are skipped, and that the worker's import shim changes no parser
behaviour (lmdeploy_worker.py's docstring promises this test).

The shim replaces two package ``__init__`` files (lmdeploy's, lmdeploy.serve's) with bare modules and imports
``lmdeploy/utils.py`` over a torch stub. Run in LMDeploy's own replay env, the probe checks that (1) every lmdeploy
module the parsers load is the installed file, byte for byte as the wheel's RECORD hashes it; (2) the stub was
only there for ``lmdeploy.utils``: no ``torch`` module is left and transformers still sees no torch; (3) the stub
answers any name beyond the annotation ones with an error; (4) no loaded module reads a name from the bare
``lmdeploy`` / ``lmdeploy.serve`` tops; (5) parses through the shim give the known answers, whole and streamed.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers_shim import SHIM_AUDIT
from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import tokenizer_path
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines

LMDEPLOY = adapter_for(load_engines()["lmdeploy"])


@pytest.mark.parametrize(("family", "style", "tool", "reasoning"), [
    ("hermes", "qwen3", "qwen3", "qwen-qwq"),            # --tool-call-parser qwen3, --reasoning-parser qwen-qwq
    ("qwen3_coder", None, "qwen3coder", None),
    ("llama3_json", None, "llama3", None),
    ("harmony", None, "GptOssChatParser", None),        # no flag: engines/lmdeploy.yaml replay.tool_parsers
])
def test_each_family_gets_the_parser_the_live_spec_starts_the_server_with(family, style, tool, reasoning) -> None:
    support = LMDEPLOY.supports(family, style)
    assert (support.tool_parser, support.reasoning_parser) == (tool, reasoning) and support


@pytest.mark.parametrize(("family", "reason"), [
    ("glm47", "LMDeploy v0.12 has no glm47 --tool-call-parser"),   # its own cannot_serve line
    ("pythonic", "LMDeploy has no --tool-call-parser for this format"),  # the "*" line
])
def test_a_family_without_a_parser_is_skipped_with_the_specs_reason(family, reason) -> None:
    support = LMDEPLOY.supports(family, None)
    assert not support and reason in support.reason and family in support.reason


PROBE = SHIM_AUDIT + r"""
import json, runpy
worker = runpy.run_path(sys.argv[1], run_name="probe")
worker["install_shim"]()
import lmdeploy.utils, transformers.utils
stub = lmdeploy.utils.torch
try:
    stub.cuda
    stub_raises = False
except AttributeError as exc:
    stub_raises = "not installed" in str(exc)
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}}}}]
text = '<think>\nhm\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
req = {"text": text, "tools": tools, "tool_parser": "qwen3", "reasoning_parser": "qwen-qwq",
       "tokenizer": sys.argv[2], "chat_template_kwargs": {"enable_thinking": True}}
whole = worker["parse"](req)
deltas = worker["stream"](req, [[c, None] for c in re.findall(r"<[^>]+>|\w+|\s+|.", text)])
loaded, changed, top_reads = shim_audit(("lmdeploy",),
                                        r"^\s*from lmdeploy(\.serve)? import |^\s*import lmdeploy(\.serve)?\s*$")
print(json.dumps({"whole": whole, "deltas": deltas, "loaded": loaded, "changed": changed, "top_reads": top_reads,
                  "torch_left": "torch" in sys.modules, "torch_seen": transformers.utils.is_torch_available(),
                  "stub_raises": stub_raises, "stub_names": sorted(n for n in vars(stub) if not n.startswith("_"))}))
"""


@pytest.mark.skipif(LMDEPLOY.ready() is not None, reason=str(LMDEPLOY.ready()))
@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers")
def test_the_shim_loads_the_installed_parsers_unmodified_and_parses_as_lmdeploy_does() -> None:
    done = subprocess.run([str(LMDEPLOY.python), "-c", PROBE, str(LMDEPLOY.worker), str(tokenizer_path("hermes"))],
                          capture_output=True, text=True, env=dict(LMDEPLOY.env()), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"lmdeploy.utils", "lmdeploy.serve.openai.tool_parser.qwen3_parser",
            "lmdeploy.serve.openai.reasoning_parser.qwen_qwq_reasoning_parser"} <= set(probe["loaded"])
    assert probe["changed"] == [] and probe["top_reads"] == []
    assert not probe["torch_left"] and not probe["torch_seen"]
    assert probe["stub_raises"] and probe["stub_names"] == ["Size", "Tensor", "dtype"]
    # Tool parser first (its pattern takes the newlines before <tool_call>), then the reasoning parser on what it
    # left, which answers None for an empty rest (api_server.py:617-632).
    assert (probe["whole"]["reasoning"], probe["whole"]["content"]) == ("hm", None)
    (call,) = probe["whole"]["tool_calls"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Zürich"})
    calls = [c for d in probe["deltas"] for c in d["tool_calls"]]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == \
        [("get_weather", {"city": "Zürich"})]
    assert "".join(d["reasoning_content"] or "" for d in probe["deltas"]) == "\nhm\n"


@pytest.mark.skipif(LMDEPLOY.ready() is not None, reason=str(LMDEPLOY.ready()))
@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers")
def test_the_worker_refuses_what_the_server_would_not_start_with() -> None:
    probe = ("import json, runpy, sys; w = runpy.run_path(sys.argv[1], run_name='probe'); w['install_shim']();"
             "print(json.dumps([w['refuses']({'tool_parser': 'qwen3', 'tokenizer': ''}),"
             "w['refuses']({'tool_parser': 'hermes', 'tokenizer': sys.argv[2]})]))")
    done = subprocess.run([str(LMDEPLOY.python), "-c", probe, str(LMDEPLOY.worker), str(tokenizer_path("hermes"))],
                          capture_output=True, text=True, env=dict(LMDEPLOY.env()), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    no_tokenizer, unknown = json.loads(done.stdout.strip().splitlines()[-1])
    assert "toolmatrix replay-install tokenizers" in no_tokenizer
    # set_parsers' own ValueError text (its "reasoning parser" for a tool parser too), with 0.12.2's registry.
    assert unknown.startswith("The reasoning parser hermes is not in the parser list: dict_keys([")
    assert "'qwen3coder'" in unknown


@pytest.mark.skipif(LMDEPLOY.ready() is not None, reason=str(LMDEPLOY.ready()))
@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers")
@pytest.mark.parametrize("variant", ["text_before", "think"])
def test_thinking_is_asked_as_the_fixture_shows(variant, tmp_path) -> None:
    """A Qwen3 answer without reasoning answers a request that turned thinking off (enable_thinking: false, as a
    client sends it), and LMDeploy's server then skips its reasoning parser (api_server.py:558, 631): the text
    before the call is content, not reasoning. With reasoning, thinking is on and the parser splits it off."""
    (fixture,) = [f for f in generate([data_root() / "cases"], ["hermes"])
                  if f.id == f"hermes.single.get_weather_paris.{variant}"]
    replay_engine(LMDEPLOY, [fixture], tmp_path, ["token"])
    records = list(read_records(tmp_path))
    assert [(r.mode, r.verdict.value) for r in records] == [("nonstream", "pass"), ("stream:token", "pass")], \
        [(r.mode, r.reason) for r in records]
    assert records[0].replay.reasoning_parser == "qwen-qwq"  # what engines/lmdeploy.yaml starts Qwen3 with

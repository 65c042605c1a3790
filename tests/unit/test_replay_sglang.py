"""The SGLang worker's import shim changes no parser behaviour (sglang_worker.py's docstring promises this test).

The shim replaces two package ``__init__`` files (sglang's, xgrammar's) with bare modules. Run in SGLang's own
replay env, the probe below checks that (1) every other sglang / xgrammar module the parsers load is the
installed file, byte for byte as the wheel's RECORD hashes it; (2) the one name taken from xgrammar's top,
``StructuralTag``, is the object ``xgrammar/__init__.py`` itself re-exports; (3) no loaded sglang module reads a
name from the ``sglang`` package top (which the shim left empty); (4) a parse through the shim gives the known
answer, whole and streamed.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers_shim import SHIM_AUDIT
from toolmatrix.formats import get_family
from toolmatrix.records import read_records
from toolmatrix.replay import session
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import replay_engine
from toolmatrix.serving.registry import data_root, load_engines

SGLANG = adapter_for(load_engines()["sglang"])

PROBE = SHIM_AUDIT + r"""
import json, runpy
worker = runpy.run_path(sys.argv[1], run_name="probe")
worker["install_shim"]()
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}}}}]
text = '<think>\nhm\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'
req = {"text": text, "tools": tools, "tool_parser": "qwen25", "reasoning_parser": "qwen3",
       "chat_template_kwargs": {"enable_thinking": True}}
whole = worker["parse"](req)
deltas = worker["stream"](req, [[c, None] for c in re.findall(r"<[^>]+>|\w+|\s+|.", text)])
loaded, changed, top_reads = shim_audit(("sglang", "xgrammar"), r"^\s*from sglang import |^\s*import sglang\s*$")
import xgrammar.structural_tag as st
init = Path(metadata.distribution("xgrammar").locate_file("xgrammar/__init__.py")).read_text()
print(json.dumps({"whole": whole, "deltas": deltas, "loaded": loaded, "changed": changed, "top_reads": top_reads,
                  "structural_tag_same": sys.modules["xgrammar"].StructuralTag is st.StructuralTag,
                  "init_reexports": "from .structural_tag import StructuralTag" in init}))
"""


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_the_shim_loads_the_installed_parsers_unmodified_and_parses_as_sglang_does() -> None:
    done = subprocess.run([str(SGLANG.python), "-c", PROBE, str(SGLANG.worker)], capture_output=True, text=True,
                          env=dict(SGLANG.env()), timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert "sglang.srt.function_call.qwen25_detector" in probe["loaded"]
    assert "sglang.srt.parser.reasoning_parser" in probe["loaded"]
    assert probe["changed"] == [] and probe["top_reads"] == []
    assert probe["structural_tag_same"] and probe["init_reexports"]
    assert probe["whole"]["reasoning"].strip() == "hm" and probe["whole"]["content"].strip() == ""
    (call,) = probe["whole"]["tool_calls"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Zürich"})
    streamed = "".join(c["function"].get("arguments", "") for d in probe["deltas"] for c in d.get("tool_calls", []))
    assert json.loads(streamed) == {"city": "Zürich"}


def _opened_by_the_prompt(fixture_id: str) -> Fixture:
    """A thinking fixture as the model writes it when the generation prompt opens ``<think>`` (GLM-4.7's and
    DeepSeek V3.1's templates with thinking on): its text holds only the closing ``</think>``."""
    (fixture,) = [f for f in generate([data_root() / "cases"], [fixture_id.split(".")[0]]) if f.id == fixture_id]
    assert "<think>" not in fixture.text and "</think>" in fixture.text and fixture.expected.reasoning
    return fixture


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
@pytest.mark.parametrize("fixture_id", ["glm47.single.get_weather_paris.think",
                                        "deepseek_v31.single.get_weather_paris.think"])
@pytest.mark.parametrize("thinking", [True, False])
def test_the_thinking_switch_forces_reasoning_as_the_server_derives_it(fixture_id, thinking, tmp_path,
                                                                       monkeypatch) -> None:
    """serving_chat's ``_get_reasoning_from_request`` turns the request's switch (the detector's own key: GLM's
    ``enable_thinking``, DeepSeek V3's ``thinking``) into ``force_reasoning``, so text before ``</think>`` is
    reasoning. The worker passed none before, so both detectors started outside reasoning, as with the switch
    off (``thinking=False`` here): the reasoning and ``</think>`` stayed in content, an engine failure no server
    configured for the model shows."""
    fixture = _opened_by_the_prompt(fixture_id)
    if not thinking:
        key = get_family(fixture.family).thinking_key
        monkeypatch.setattr(session, "chat_template_kwargs", lambda _fixture: {key: False})
    # Cut at the markers: a whole answer in one chunk meets SGLang's own one-chunk bug (DeepSeek V3.1's empty
    # arguments), which is not what this test is about.
    replay_engine(SGLANG, [fixture], tmp_path, ["special"])
    records = list(read_records(tmp_path))
    verdicts = {r.mode: r.verdict.value for r in records}
    if thinking:
        assert verdicts == {"nonstream": "pass", "stream:special": "pass"}, [(r.mode, r.reason) for r in records]
    else:
        assert verdicts["nonstream"] == "fail" and "</think>" in records[0].reason

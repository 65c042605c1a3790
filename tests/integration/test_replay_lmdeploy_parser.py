"""Three behaviours of LMDeploy 0.12.2's own parsers, measured by replay and pinned here (the real wheel, in its
replay env, through the worker as ``toolmatrix replay`` runs it):

- ``Llama3JsonToolParser.extract_tool_calls`` (tool_parser/llama3_parser.py) reads only the
  ``<function=NAME>{...}</function>`` form: a non-streamed Llama 3.1 JSON call stays in content, untouched;
- the Harmony stream (harmony_utils.py ``GptOssChatParser.parse_streaming``) starts a call with one id, then sends
  each later argument delta as a ``DeltaToolCall`` without one, whose default factory (protocol.py) draws a fresh
  random id every time: one call, many ids on the wire;
- a ``<tool_call>`` block whose JSON does not load makes ``Qwen3ToolParser.extract_tool_calls`` raise, and
  api_server.py:626 answers HTTP 400 "Failed to parse fc related info to json format!" (not a 500, not text).
"""

from __future__ import annotations

import pytest

from toolmatrix.formats import get_family
from toolmatrix.replay import feeder
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.generate import generate
from toolmatrix.replay.protocol import WorkerClient
from toolmatrix.replay.session import chat_template_kwargs
from toolmatrix.serving.registry import data_root, load_engines

LMDEPLOY = adapter_for(load_engines()["lmdeploy"])
CASE = "single.get_weather_paris.plain"
pytestmark = [pytest.mark.skipif(LMDEPLOY.ready() is not None, reason=str(LMDEPLOY.ready())),
              pytest.mark.skipif(feeder.tokenizer_path("harmony") is None or feeder.tokenizer_path("llama3_json")
                                 is None, reason="toolmatrix replay-install tokenizers")]


@pytest.fixture(scope="module")
def worker():
    with WorkerClient(LMDEPLOY.python, LMDEPLOY.worker, dict(LMDEPLOY.env())) as client:
        yield client


def fixture_of(family: str) -> Fixture:
    (fixture,) = [f for f in generate([data_root() / "cases"]) if f.id == f"{family}.{CASE}"]
    return fixture


def replay(client: WorkerClient, family: str, text: str | None = None, chunking: str = "token") -> dict:
    fixture = fixture_of(family)
    text = fixture.text if text is None else text
    support = LMDEPLOY.supports(family, None)
    return client.request({"op": "parse", "text": text, "tools": list(fixture.tools),
                           "tool_parser": support.tool_parser, "reasoning_parser": None, "family": family,
                           "tokenizer": str(feeder.tokenizer_path(family)),
                           "chat_template_kwargs": chat_template_kwargs(fixture),
                           "streams": {chunking: feeder.chunk(text, get_family(family), chunking, fixture.id)}})


def test_llama3_json_calls_are_not_parsed_whole_only_the_function_tag_form_is(worker) -> None:
    text = fixture_of("llama3_json").text
    assert text.startswith('{"name": "get_weather", "parameters": {')  # the official template's bare call
    assert replay(worker, "llama3_json")["nonstream"] == {"content": text, "reasoning": None, "tool_calls": []}
    tagged = replay(worker, "llama3_json", '<function=get_weather>{"city": "Paris"}</function>')["nonstream"]
    assert [(c["name"], c["arguments"]) for c in tagged["tool_calls"]] == [("get_weather", '{"city": "Paris"}')]


def test_harmony_streams_a_fresh_random_call_id_with_every_argument_delta(worker) -> None:
    answer = replay(worker, "harmony")
    (call,) = answer["nonstream"]["tool_calls"]
    arguments = fixture_of("harmony").text.split("<|message|>")[-1].removesuffix("<|call|>")
    assert (call["name"], call["arguments"]) == ("get_weather", arguments)
    parts = [c for d in answer["streams"]["token"]["deltas"] for c in d["tool_calls"]]
    assert {c["index"] for c in parts} == {0}
    assert parts[0]["function"]["name"] == "get_weather"
    assert "".join(c["function"]["arguments"] or "" for c in parts) == arguments
    ids = [c["id"] for c in parts]
    assert len(parts) > 2 and len(set(ids)) == len(ids)  # no two deltas of the one call share an id


def test_a_hermes_call_whose_json_does_not_load_is_the_servers_http_400(worker) -> None:
    answer = replay(worker, "hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>')
    whole = answer["nonstream"]
    assert whole["status"] == 400 and whole["error"].startswith("Failed to parse fc related info to json format!")
    assert feeder.nonstream_exchange(whole, {}).http_status == 400

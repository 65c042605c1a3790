"""The Responses and Anthropic Messages surfaces against the fake server: each case translated faithfully, read
back as the official clients read it, and each surface's own fault classes caught by the named check.

Requests go through the real ``openai`` and ``anthropic`` clients over HTTP, as against an engine. Every fault row
runs twice: without the fault the case passes, with it the named check is the first to fail with the named blame.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration import test_faults
from tests.integration.test_faults import BOTH, CASES, CORRECT, NONSTREAM, STREAM, first_failure, run_case
from toolmatrix.testing.fake import FakeServer, Reply
from toolmatrix.testing.fakesurfaces import SURFACE_FAULTS
from toolmatrix.wire.surfaces import MESSAGES, RESPONSES

server = test_faults.server  # the fault tests' fake, a fixture here too

SURFACES = (RESPONSES, MESSAGES)
FAULT_CASES = Path(__file__).parents[1] / "data" / "fault_cases.yaml"

# (source, fault, surface, case, modes, first failing check, blame, verdict): each surface's own fault classes.
SURFACE_ROWS = [
    ("vLLM #44000 (status of a finished answer)", "resp_status_wrong", RESPONSES, "single", BOTH, "finish_reason", "engine", "fail"),
    ("vLLM #23222 (streamed function calls)", "resp_stream_calls_only_at_end", RESPONSES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("Responses stream grammar", "resp_stream_done_mismatch", RESPONSES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("Responses stream grammar", "resp_stream_no_completed", RESPONSES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("llama-server b11434", "resp_stream_no_output_index", RESPONSES, "parallel", STREAM, "stream_deltas", "engine", "fail"),
    ("Responses 4xx shape", "resp_error_shape", RESPONSES, "choice_invalid", BOTH, "wire_shape", "engine", "fail"),
    ("LiteLLM #30043 (tool_use.input a string)", "msg_input_string", MESSAGES, "single", NONSTREAM, "wire_shape", "engine", "fail"),
    ("vLLM #44576 (Claude Code stops: stop_reason)", "msg_stop_end_turn", MESSAGES, "single", BOTH, "finish_reason", "engine", "fail"),
    ("LiteLLM #29491 (tool input as text)", "msg_stream_text_delta_tool", MESSAGES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("Messages stream grammar", "msg_stream_no_block_stop", MESSAGES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("Messages stream grammar", "msg_stream_no_message_stop", MESSAGES, "single", STREAM, "stream_deltas", "engine", "fail"),
    ("Messages 4xx shape", "msg_error_shape", MESSAGES, "choice_invalid", BOTH, "wire_shape", "engine", "fail"),
]

# Chat-core faults that reach the surfaces unchanged: (fault, case, modes, first failing check, blame, verdict,
# surfaces). Arguments as an object are the Messages API's own form, a fault only over Responses.
CARRIED_ROWS = [
    ("args_object", "single", BOTH, "wire_shape", "engine", "fail", (RESPONSES,)),
    ("http_500", "single", BOTH, "http_status", "engine", "error"),
    ("accept_invalid", "choice_invalid", BOTH, "http_status", "engine", "fail"),
    ("args_truncated", "single", STREAM, "arguments_json", "engine", "fail"),
    ("length_cut", "single", STREAM, "arguments_json", "model", "fail"),
    ("ids_missing", "single", BOTH, "wire_shape", "engine", "fail"),
    ("ids_duplicate", "parallel", BOTH, "call_ids", "engine", "fail"),
    ("marker_residue", "single", BOTH, "no_marker_leak", "engine", "fail"),
    ("unparsed", "single", BOTH, "no_unparsed_call", "engine", "fail"),
    ("double_encode", "nested", BOTH, "arguments_schema", "engine", "fail"),
    ("drop_argument", "single", BOTH, "arguments_schema", "model", "fail"),
    ("extra_call", "no_parallel", BOTH, "parallel_tool_calls", "engine", "fail"),
    ("stream_diverge", "single", STREAM, "stream_consistency", "engine", "fail"),
]


def run_over(server, api: str, case_name: str, mode: str, reply: Reply, unsupported=None):
    return run_case(server, case_name, mode, reply, unsupported=unsupported, api=api)


def test_every_surface_fault_is_exercised():
    assert {row[1] for row in SURFACE_ROWS} == set(SURFACE_FAULTS)


@pytest.mark.parametrize("api", SURFACES)
@pytest.mark.parametrize("case_name", sorted(CORRECT))
@pytest.mark.parametrize("mode", BOTH)
def test_a_correct_engine_passes_over_every_surface(server, api, case_name, mode):
    record = run_over(server, api, case_name, mode, CORRECT[case_name])
    assert record.verdict == "pass", first_failure(record)
    assert record.api == api


@pytest.mark.parametrize(
    ("fault", "api", "case_name", "mode", "check", "blame", "expected"),
    [pytest.param(*row[1:4], mode, *row[5:], id=f"{row[1]}-{mode}") for row in SURFACE_ROWS for mode in row[4]]
    + [pytest.param(row[0], api, row[1], mode, *row[3:6], id=f"{row[0]}-{api}-{mode}")
       for row in CARRIED_ROWS for api in (row[6] if len(row) > 6 else SURFACES) for mode in row[2]],
)
def test_a_surface_fault_is_caught(server, fault, api, case_name, mode, check, blame, expected):
    correct = CORRECT[case_name]
    record = run_over(server, api, case_name, mode, Reply(correct.calls, correct.content, faults=frozenset({fault})))
    failed = first_failure(record)
    assert failed is not None and (failed.name, failed.blame) == (check, blame), record.checks
    assert (record.verdict, record.blame) == (expected, blame)


def test_events_without_output_index_still_keep_two_calls_apart(server):
    """llama-server names a streamed item by its item_id alone: the openai client copes with one such item, not
    with two (its stream state raises); the calls are read all the same."""
    record = run_over(server, RESPONSES, "parallel", "stream",
                      Reply(CORRECT["parallel"].calls, faults=frozenset({"resp_stream_no_output_index"})))
    assert [c.name for c in record.checks if c.failed] == ["stream_deltas"]
    record = run_over(server, RESPONSES, "single", "stream",
                      Reply(CORRECT["single"].calls, faults=frozenset({"resp_stream_no_output_index"})))
    assert record.verdict == "pass", first_failure(record)


HOSTILE_INDEX_STREAMS = {
    RESPONSES: [{"type": "response.created", "response": {}},
                {"type": "response.output_item.added", "output_index": [0],
                 "item": {"type": "function_call", "id": ["fc"], "call_id": "c", "name": "get_weather"}},
                {"type": "response.function_call_arguments.delta", "output_index": {"a": 1}, "delta": "{}"}],
    MESSAGES: [{"type": "message_start", "message": {}},
               {"type": "content_block_start", "index": [0], "content_block": {"type": "text", "text": ""}},
               {"type": "content_block_delta", "index": {"a": 1}, "delta": {"type": "text_delta", "text": "x"}}],
}


@pytest.mark.parametrize("api", SURFACES)
def test_an_index_that_is_a_list_or_an_object_is_the_engines_wire_shape(api):
    """Not a harness error: the events are read (their keys made hashable) and wire_shape blames the engine."""
    from toolmatrix.formats import get_family
    from toolmatrix.judge.checks import CheckInput, run_checks
    from toolmatrix.wire.exchange import Exchange

    exchange = Exchange("stream", {}, http_status=200, chunks=tuple(HOSTILE_INDEX_STREAMS[api]), api=api)
    checks = run_checks(CheckInput(CASES["single"], exchange, get_family("hermes"), CASES["single"].expect))
    failed = next(c for c in checks if c.failed)
    assert (failed.name, failed.blame) == ("wire_shape", "engine"), checks


def test_tools_and_a_named_choice_are_said_in_each_surfaces_words(server):
    record = run_over(server, RESPONSES, "choice_named", "nonstream", CORRECT["choice_named"])
    assert record.request["tools"][0] == {"type": "function", "name": "get_weather",
                                          "parameters": CASES["choice_named"].tools[0]["function"]["parameters"]}
    assert record.request["tool_choice"] == {"type": "function", "name": "get_time"}
    assert record.request["input"] == [{"role": "user", "content": "Weather in Paris?"}]
    record = run_over(server, MESSAGES, "choice_named", "nonstream", CORRECT["choice_named"])
    assert record.request["tools"][1] == {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
    assert record.request["tool_choice"] == {"type": "tool", "name": "get_time"}
    assert record.request["max_tokens"] > 0  # the Messages API requires it


@pytest.mark.parametrize(("choice", "said"), [("required", {"type": "any"}), ("none", {"type": "none"}),
                                              ("sometimes", {"type": "sometimes"})])
def test_messages_tool_choice_words(server, choice, said):
    from toolmatrix.wire.surfaces import surface

    assert surface(MESSAGES).request({"messages": [], "tool_choice": choice})["tool_choice"] == said


def test_parallel_tool_calls_false_is_disable_parallel_tool_use(server):
    record = run_over(server, MESSAGES, "no_parallel", "nonstream", CORRECT["no_parallel"])
    assert record.request["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert "parallel_tool_calls" not in record.request
    record = run_over(server, RESPONSES, "no_parallel", "nonstream", CORRECT["no_parallel"])
    assert record.request["parallel_tool_calls"] is False


@pytest.mark.parametrize("mode", BOTH)
def test_a_round_trip_joins_each_result_to_the_engines_own_call_id(server, mode):
    record = run_over(server, RESPONSES, "round_trip", mode, CORRECT["round_trip"])
    call, output = record.followup.request["input"][-2:]
    assert record.verdict == "pass", first_failure(record)
    assert (call["type"], output["type"]) == ("function_call", "function_call_output")
    assert call["call_id"] == output["call_id"] == "call_0" and output["output"] == '{"temperature_c": 21}'
    record = run_over(server, MESSAGES, "round_trip", mode, CORRECT["round_trip"])
    assistant, user = record.followup.request["messages"][-2:]
    assert record.verdict == "pass", first_failure(record)
    assert assistant["content"][-1] == {"type": "tool_use", "id": "call_0", "name": "get_weather",
                                        "input": {"city": "Paris"}}
    assert user == {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_0",
                                                 "content": '{"temperature_c": 21}'}]}


def test_a_surface_the_engine_does_not_serve_is_unsupported_with_the_reason(server):
    server.script.reply = CORRECT["single"]
    record = run_over(server, MESSAGES, "single", "nonstream", Reply(faults=frozenset({"http_400"})),
                      unsupported={"api.messages": "no /v1/messages route at this version"})
    assert record.verdict == "unsupported"
    assert "no /v1/messages route" in record.reason


# -- the plugin: a run per surface ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def surfaces_run(tmp_path_factory):
    from tests.integration.test_plugin_fake import run_pytest
    from toolmatrix.testing.fake import first_tool

    results = tmp_path_factory.mktemp("surfaces")
    with FakeServer(first_tool) as fake:
        proc = run_pytest(tmp_path_factory.getbasetemp(), "-n", "2", "--base-url", fake.base_url, "--model", "fake",
                          "--only-cases", "--cases", str(FAULT_CASES), "--api", "responses,messages",
                          "--results-dir", str(results))
        yield proc, results, fake


def test_each_surface_is_a_run_of_its_own(surfaces_run):
    from toolmatrix.records import check_results, read_records, read_run_info

    proc, results, _ = surfaces_run
    assert proc.returncode == 1, proc.stdout[-3000:]  # first_tool gets some cases wrong: failures, not errors
    runs = {api: read_run_info(results / api).run for api in SURFACES}
    assert {api: (run.api, run.pair) for api, run in runs.items()} == {
        api: (api, "fake@external") for api in SURFACES}
    assert runs[RESPONSES].run_id != runs[MESSAGES].run_id
    for api in SURFACES:
        assert check_results(results / api) == []
        records = list(read_records(results / api))
        assert len(records) == 2 * len(CASES) and {r.api for r in records} == {api}
    assert "fake@external over responses" in proc.stdout and "fake@external over messages" in proc.stdout
    table = (results / "matrix" / "matrix.md").read_text()
    assert "external \\[responses\\]" in table and "external \\[messages\\]" in table


def test_show_resends_a_messages_exchange_with_its_own_headers(surfaces_run):
    import subprocess
    import sys

    from toolmatrix.records import read_records

    _, results, fake = surfaces_run
    record = next(r for r in read_records(results / MESSAGES) if r.mode == "nonstream" and r.request.get("tools"))
    shown = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "show", str(results), record.case_id,
                            "--mode", "nonstream", "--pair", "fake@external [messages]"],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    curl = shown.stdout[shown.stdout.index("curl "):shown.stdout.index("\nJSON\n") + 6]
    assert '/messages"' in curl and "anthropic-version: 2023-06-01" in curl
    sent = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "BASE_URL": fake.base_url})
    assert sent.returncode == 0, sent.stderr
    assert fake.requests[-1] == record.request
    assert json.loads(sent.stdout)["content"] == record.response["content"]


def test_an_unknown_surface_is_a_usage_error(tmp_path):
    from tests.integration.test_plugin_fake import run_pytest

    proc = run_pytest(tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--model", "fake", "--api", "chat,grpc")
    assert proc.returncode == 4 and "grpc: not a surface; known: chat, responses, messages" in proc.stderr


def _stream(api: str, calls: int = 1) -> list[dict]:
    """The fake's correct stream of ``calls`` weather calls over ``api``, as a list of events to bend."""
    from toolmatrix.testing.fakesurfaces import answer

    chat_calls = [{"id": f"call_{i}", "type": "function",
                   "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}} for i in range(calls)]
    return answer(api, None, None, chat_calls, "tool_calls", frozenset(), True)


def _drop(kind: str):
    return lambda events: [e for e in events if e["type"] != kind]


def _first_delta_before_its_item(events):
    added = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.added")
    delta = next(i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta")
    events.insert(added, events.pop(delta))
    return events


def _item_done_with(arguments):
    def bend(events):
        for e in events:
            if e["type"] == "response.output_item.done":
                e["item"] = {**e["item"], "arguments": arguments}
        return events
    return bend


def _announced_without(field):
    def bend(events):
        for e in events:
            for key in ("item", "content_block"):
                if isinstance(e.get(key), dict) and e[key].get("type") in ("function_call", "tool_use"):
                    e[key] = {k: v for k, v in e[key].items() if k != field}
        return events
    return bend


def _first_event_moved_last(events):
    return events[1:] + events[:1]


def _stop_reason_dropped(events):
    for e in events:
        if e["type"] == "message_delta":
            e["delta"] = {}
    return events


def _error_event(api):
    def bend(events):
        error = {"type": "error", "message": "parser failed"} if api == RESPONSES else \
            {"type": "error", "error": {"type": "api_error", "message": "parser failed"}}
        return events[:3] + [error] + events[3:]
    return bend


def _delta_for_an_unstarted_block(events):
    return events + [{"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "x"}}]


# (surface, how the correct stream is bent, what stream_problem says): each rule of each surface's stream grammar.
STREAM_RULES = [
    (RESPONSES, _first_delta_before_its_item, "which no function_call announced"),
    (RESPONSES, _announced_without("call_id"), "announced without call_id or name"),
    (RESPONSES, _item_done_with('{"city": "Lyon"}'), "output_item.done arguments"),
    (RESPONSES, _drop("response.output_item.done"), "never done"),
    (RESPONSES, _drop("response.completed"), "no response.completed"),
    (RESPONSES, _error_event(RESPONSES), "error: parser failed"),
    (MESSAGES, _first_event_moved_last, "does not begin with message_start"),
    (MESSAGES, _delta_for_an_unstarted_block, "which no content_block_start began"),
    (MESSAGES, _announced_without("id"), "tool_use block started without id or name"),
    (MESSAGES, _drop("content_block_stop"), "never stopped"),
    (MESSAGES, _stop_reason_dropped, "no message_delta carried a stop_reason"),
    (MESSAGES, _drop("message_stop"), "does not end with message_stop"),
    (MESSAGES, _error_event(MESSAGES), "parser failed"),
]


@pytest.mark.parametrize(("api", "bend", "said"), STREAM_RULES,
                         ids=[f"{row[0]}-{row[2][:30]}" for row in STREAM_RULES])
def test_each_stream_rule_fails_its_fault_and_passes_without(api, bend, said):
    from toolmatrix.wire.surfaces import surface

    assert surface(api).stream_problem(tuple(_stream(api, 2))) is None
    problem = surface(api).stream_problem(tuple(bend(_stream(api, 2))))
    assert problem is not None and said in problem, problem

"""Each engine fault class of reference/bugs.md, injected by the fake server, is caught by the right check.

Every row runs twice: without the fault the case passes (so the check can pass), with it the named check is
the first to fail, with the named blame and verdict (so the check can fail). Requests go through the real
openai client over HTTP, exactly as against an engine.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CHECKS
from toolmatrix.library.cases import load_cases
from toolmatrix.live.client import Target, make_client, make_http
from toolmatrix.live.evidence import Witness, read_template
from toolmatrix.live.runner import EvidenceMode, Runner
from toolmatrix.records import CheckResult, Record
from toolmatrix.serving.registry import EvidenceSpec, load_engines
from toolmatrix.testing.fake import FAULTS, FakeServer, Reply, model_wrote
from toolmatrix.testing.fakesurfaces import SURFACE_FAULTS

ROOT_DIR = Path(__file__).parents[2]
CASES = {c.id.split(".", 1)[1]: c for c in load_cases([Path(__file__).parents[1] / "data" / "fault_cases.yaml"])}
PARIS = (("get_weather", {"city": "Paris"}),)

# What a correct engine answers for each case (the fake "model" is always right unless a row says otherwise).
CORRECT = {
    "single": Reply(calls=PARIS),
    "parallel": Reply(calls=PARIS + (("get_weather", {"city": "Tokyo"}),)),
    "unicode": Reply(calls=(("get_weather", {"city": "Zürich"}),)),
    "nested": Reply(calls=(("create_order", {"items": [{"sku": "A1", "quantity": 2}]}),)),
    "integer": Reply(calls=(("set_count", {"count": 3}),)),
    "no_params": Reply(calls=(("get_time", {}),)),
    "choice_none": Reply(content="I will not call a tool."),
    "choice_required": Reply(calls=PARIS),
    "choice_named": Reply(calls=(("get_time", {}),)),
    "choice_invalid": Reply(calls=PARIS),
    "no_parallel": Reply(calls=PARIS),
    "round_trip": Reply(calls=PARIS),
    "irrelevant": Reply(content="Hello!"),
}
BOTH, STREAM, NONSTREAM = ("nonstream", "stream"), ("stream",), ("nonstream",)

# (bugs.md class, fault, case, modes, first failing check, blame, verdict)
ROWS = [
    ("crash 500 on tools", "http_500", "single", BOTH, "http_status", "engine", "error"),
    ("crash 500 on tools", "accept_invalid", "choice_invalid", BOTH, "http_status", "engine", "fail"),
    ("crash 500 on tools", "http_400", "single", BOTH, "http_status", "engine", "fail"),
    ("infra", "hang", "single", BOTH, "http_status", "infra", "error"),
    ("multi-turn template", "template_error", "round_trip", BOTH, "followup.http_status", "template", "error"),
    ("ids missing or not unique", "tool_calls_object", "single", NONSTREAM, "wire_shape", "engine", "fail"),
    ("invalid JSON args", "args_object", "single", BOTH, "wire_shape", "engine", "fail"),
    ("invalid JSON args", "args_truncated", "single", BOTH, "arguments_json", "engine", "fail"),
    ("model did not stop (not an engine bug)", "length_cut", "single", BOTH, "arguments_json", "model", "fail"),
    ("invalid JSON args", "int_as_string", "integer", BOTH, "arguments_schema", "engine", "fail"),
    ("empty-arguments tool", "args_empty", "no_params", BOTH, "arguments_json", "engine", "fail"),
    ("ids missing or not unique", "ids_missing", "single", NONSTREAM, "wire_shape", "engine", "fail"),
    ("ids missing or not unique", "ids_missing", "single", STREAM, "stream_deltas", "engine", "fail"),
    ("ids missing or not unique", "ids_duplicate", "parallel", BOTH, "call_ids", "engine", "fail"),
    ("wrong finish_reason", "finish_stop", "single", BOTH, "finish_reason", "engine", "fail"),
    ("wrong finish_reason", "finish_tool_calls_no_call", "irrelevant", BOTH, "finish_reason", "engine", "fail"),
    ("wrong finish_reason", "stream_no_finish", "single", STREAM, "stream_deltas", "engine", "fail"),
    ("markers leaked into content", "marker_residue", "single", BOTH, "no_marker_leak", "engine", "fail"),
    ("markers leaked into content", "unparsed", "single", BOTH, "no_unparsed_call", "engine", "fail"),
    ("reasoning + tool call", "call_in_reasoning", "single", BOTH, "no_unparsed_call", "engine", "fail"),
    ("unicode or escaping broken", "ascii_escape", "unicode", BOTH, "ascii_escaping", "engine", "fail"),
    ("nested or array args broken", "double_encode", "nested", BOTH, "arguments_schema", "engine", "fail"),
    ("parallel calls lost or merged", "stream_index_zero", "parallel", STREAM, "stream_deltas", "engine", "fail"),
    ("parallel calls lost or merged", "stream_drop_call", "parallel", STREAM, "stream_consistency", "engine", "fail"),
    ("parallel calls lost or merged", "extra_call", "no_parallel", BOTH, "parallel_tool_calls", "engine", "fail"),
    ("streaming differs", "stream_diverge", "single", STREAM, "stream_consistency", "engine", "fail"),
    ("streaming differs", "stream_no_index", "single", STREAM, "wire_shape", "engine", "fail"),
    ("streaming differs", "stream_no_id", "single", STREAM, "stream_deltas", "engine", "fail"),
    ("streaming differs", "stream_name_repeated", "single", STREAM, "stream_deltas", "engine", "fail"),
    ("markers leaked into content", "think_in_content", "irrelevant", BOTH, "no_marker_leak", "engine", "fail"),
    ("args dropped", "stream_args_none", "single", STREAM, "arguments_json", "engine", "fail"),
]


class Scripted:
    """Answers the case's correct reply, with the row's faults; a tool result gets a text answer."""

    def __init__(self) -> None:
        self.reply = Reply()
        self.followup = Reply(content="It is 21 °C in Paris.")

    def __call__(self, body: dict) -> Reply:
        return self.followup if body["messages"][-1]["role"] == "tool" else self.reply


@pytest.fixture(scope="module")
def server():
    script = Scripted()
    with FakeServer(script, hang_s=1.5) as fake:
        fake.script = script
        yield fake


def run_case(server, case_name: str, mode: str, reply: Reply, followup_faults=frozenset(), unsupported=None,
             followup_content="It is 21 °C in Paris.", api: str = "chat"):
    server.script.reply = reply
    server.script.followup = Reply(content=followup_content, faults=followup_faults)
    runner = Runner(make_client(Target(server.base_url, "fake", timeout_s=0.75), api), "fake", get_family("hermes"),
                    unsupported=unsupported or {})
    return runner.run(CASES[case_name], mode)


def first_failure(record: Record) -> CheckResult | None:
    return next((c for c in record.checks if c.failed), None)  # the followup's checks are in record.checks too


def test_every_fault_is_exercised():
    exercised = {row[1] for row in ROWS} | {row[0] for row in EVIDENCE_ROWS} | {"render_differs"}  # template test
    assert exercised | set(SURFACE_FAULTS) == set(FAULTS)  # each surface's own: test_surfaces.py


def test_every_check_has_a_row_and_every_row_a_check():
    """A check no row makes fail is untested; a row naming no registered check tests nothing."""
    caught = {row[4].removeprefix("followup.") for row in ROWS} | {row[3] for row in BEHAVIOUR_ROWS}
    assert caught == {c.name for c in CHECKS}


@pytest.mark.parametrize("case_name", sorted(CORRECT))
@pytest.mark.parametrize("mode", BOTH)
def test_correct_engine_passes(server, case_name, mode):
    record = run_case(server, case_name, mode, CORRECT[case_name])
    assert record.verdict == "pass", first_failure(record)


@pytest.mark.parametrize(
    ("fault", "case_name", "mode", "check", "blame", "expected"),
    [pytest.param(*row[1:3], mode, *row[4:], id=f"{row[1]}-{mode}") for row in ROWS for mode in row[3]],
)
def test_fault_is_caught(server, fault, case_name, mode, check, blame, expected):
    correct = CORRECT[case_name]
    faults = frozenset({fault})
    if check.startswith("followup."):
        record = run_case(server, case_name, mode, correct, followup_faults=faults)
    else:
        record = run_case(server, case_name, mode, Reply(correct.calls, correct.content, faults=faults))
    failed = first_failure(record)
    assert failed is not None and (failed.name, failed.blame) == (check, blame), record.checks
    assert (record.verdict, record.blame) == (expected, blame)
    assert record.request["messages"][-1]["content"] == CASES[case_name].messages[-1]["content"]


# (id, case, reply, first failing check, blame): behaviour the fake answers as a model or an engine would,
# with no fault injected into the wire. A follow-up text is given after the reply when it is the point.
BEHAVIOUR_ROWS = [
    ("none-ignored", "choice_none", Reply(calls=PARIS), "tool_choice", "engine"),
    ("required-ignored", "choice_required", Reply(content="Hi!"), "tool_choice", "engine"),
    ("named-ignored", "choice_named", Reply(calls=PARIS), "tool_choice", "engine"),
    ("wrong-value", "single", Reply(calls=(("get_weather", {"city": "Lyon"}),)), "expected_calls", "model"),
    ("unknown-tool", "single", Reply(calls=(("get_wether", {"city": "Paris"}),)), "arguments_schema", "model"),
    ("required-unknown-tool", "choice_required", Reply(calls=(("get_wether", {"city": "Paris"}),)), "tool_choice",
     "engine"),
    ("needless-call", "irrelevant", Reply(calls=PARIS), "expected_calls", "model"),
    ("lost-call", "parallel", Reply(calls=PARIS), "expected_calls", "model"),
    ("result-ignored", "round_trip", Reply(calls=PARIS), "expected_content", "model", "It is sunny somewhere."),
]


@pytest.mark.parametrize(("case_name", "reply", "check", "blame", "followup"),
                         [pytest.param(*row[1:5], row[5] if len(row) > 5 else "It is 21 °C in Paris.", id=row[0])
                          for row in BEHAVIOUR_ROWS])
@pytest.mark.parametrize("mode", BOTH)
def test_wrong_behaviour_is_blamed(server, case_name, reply, check, blame, followup, mode):
    record = run_case(server, case_name, mode, reply, followup_content=followup)
    failed = first_failure(record)
    assert (failed.name.removeprefix("followup."), failed.blame, record.verdict) == (check, blame, "fail")


def test_declared_gap_is_unsupported_not_hidden(server):
    record = run_case(server, "choice_named", "nonstream", Reply(calls=PARIS),
                      unsupported={"tool_choice.named": "named tool_choice becomes auto"})
    assert record.verdict == "unsupported"
    assert "named tool_choice becomes auto" in record.reason and "tool_choice" in record.reason


def test_round_trip_sends_the_engines_own_ids_back(server):
    record = run_case(server, "round_trip", "nonstream", CORRECT["round_trip"])
    second = record.followup.request["messages"]
    assert record.verdict == "pass"
    assert second[-2]["tool_calls"][0]["id"] == second[-1]["tool_call_id"] == "call_0"


@pytest.mark.parametrize("keep_alive", [True, False])
def test_connections_are_kept_alive_unless_the_engine_spec_says_not(keep_alive: bool) -> None:
    """Requests reuse one connection, as the official clients do; ``keep_alive: false`` (llama.cpp's spec: its idle
    kept-alive connections hold server threads) opens one per exchange, answers unchanged."""
    with FakeServer(lambda body: Reply(content="hi")) as server:
        connection = make_client(Target(server.base_url, "fake", keep_alive=keep_alive))
        answers = [connection.send({"model": "fake", "messages": [{"role": "user", "content": "x"}]}, mode)
                   for mode in ("nonstream", "stream", "nonstream")]
    assert [a.http_status for a in answers] == [200, 200, 200]
    assert len(set(server.peers)) == (1 if keep_alive else 3)
    assert load_engines()["llamacpp"].keep_alive is False and load_engines()["vllm"].keep_alive is True


# -- blame from evidence: the model's own words, asked from the same (fake) engine ---------------------------------

TEMPLATE = ROOT_DIR / "engines" / "templates" / "gemma3-tools.jinja"
LLAMACPP_PROTOCOLS = EvidenceSpec(render="llamacpp_apply_template", complete="llamacpp_completion")


@pytest.fixture(scope="module")
def witnessed():
    """A fake engine with llama-server's render and raw completion endpoints; its 'model' writes Hermes text."""
    script = Scripted()
    with FakeServer(script, hang_s=1.5, template=TEMPLATE.read_text()) as fake:
        fake.script = script
        yield fake


def run_protocol(server, spec: EvidenceSpec, case_name: str, mode: str, reply: Reply, evidence: bool = True) -> Record:
    server.script.reply = reply
    target = Target(server.base_url, "fake", timeout_s=5)
    witness = Witness(spec, make_http(target), get_family("hermes"), read_template(TEMPLATE))
    runner = Runner(make_client(target), "fake", get_family("hermes"), witness=witness,
                    evidence_mode=EvidenceMode.FAILURES if evidence else EvidenceMode.OFF)
    return runner.run(CASES[case_name], mode)


def run_witnessed(server, case_name: str, mode: str, reply: Reply, evidence: bool = True) -> Record:
    return run_protocol(server, LLAMACPP_PROTOCOLS, case_name, mode, reply, evidence)


WRONG_CITY = (("get_weather", {"city": "Lyon"}),)
# (engine fault, case, first failing check, blame from the wire alone): the model's own text is right, so each is
# the engine's with evidence; the wire alone cannot tell the first four from a model's mistake. The last: evidence
# must not re-escape the model's UTF-8 text itself (and so find the engine's \u escapes in the model's words).
EVIDENCE_ROWS = [
    ("drop_argument", "single", "arguments_schema", "model"),
    ("drop_call", "parallel", "expected_calls", "model"),
    ("rename_call", "single", "arguments_schema", "model"),
    ("retype_value", "single", "arguments_schema", "model"),
    ("ascii_escape", "unicode", "ascii_escaping", "engine"),
]


@pytest.mark.parametrize(("fault", "case_name", "check", "wire_blame"), EVIDENCE_ROWS, ids=[r[0] for r in EVIDENCE_ROWS])
@pytest.mark.parametrize("mode", BOTH)
def test_evidence_blames_the_engine_that_changed_a_right_answer(witnessed, fault, case_name, check, wire_blame, mode):
    correct = CORRECT[case_name]
    faulty = Reply(correct.calls, correct.content, faults=frozenset({fault}))
    wire = run_witnessed(witnessed, case_name, mode, faulty, evidence=False)
    assert (first_failure(wire).name, wire.blame, wire.blamed_by, wire.evidence) == (check, wire_blame, "wire", None)
    record = run_witnessed(witnessed, case_name, mode, faulty)
    assert (first_failure(record).name, record.blame, record.blamed_by) == (check, "engine", "evidence")
    assert record.wire_blame == wire_blame  # what the evidence moved, kept
    assert record.evidence.status == "obtained" and record.evidence.template.same, record.evidence
    assert record.evidence.calls == [{"name": n, "arguments": a} for n, a in correct.calls]
    assert "[evidence: the model's own text passes this check" in first_failure(record).detail


@pytest.mark.parametrize("mode", BOTH)
def test_evidence_keeps_a_model_mistake_the_models(witnessed, mode):
    record = run_witnessed(witnessed, "single", mode, Reply(calls=WRONG_CITY))
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("expected_calls", "model", "evidence")
    assert record.evidence.calls == [{"name": "get_weather", "arguments": {"city": "Lyon"}}]


@pytest.mark.parametrize("mode", BOTH)
def test_non_ascii_escapes_the_model_wrote_itself_stay_the_models(witnessed, mode):
    """An engine that sends the model's argument text on as written sends the model's own \\u escapes."""
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Z\\u00fcrich"}}\n</tool_call>'
    reply = attrs.evolve(model_wrote(text), faults=frozenset({"ascii_escape"}))  # on the wire as written: escaped
    record = run_witnessed(witnessed, "unicode", mode, reply)
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("ascii_escaping", "model", "evidence")
    assert record.evidence.raw_text == text


@pytest.mark.parametrize("mode", BOTH)
def test_evidence_blames_the_template_when_the_engine_rendered_another_prompt(witnessed, mode):
    record = run_witnessed(witnessed, "single", mode, Reply(calls=WRONG_CITY, faults=frozenset({"render_differs"})))
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("expected_calls", "template", "evidence")
    finding = record.evidence.template
    assert not finding.same and finding.reference == TEMPLATE.name and "-<tools>" in finding.diff


@pytest.mark.parametrize("mode", BOTH)
def test_a_reasoning_block_the_engine_left_in_content_is_the_engines(witnessed, mode):
    reply = Reply(content="Hello!", faults=frozenset({"think_in_content"}))
    record = run_witnessed(witnessed, "irrelevant", mode, reply)
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("no_marker_leak", "engine", "evidence")


@pytest.mark.parametrize("mode", BOTH)
def test_a_model_cut_by_max_tokens_stays_the_models(witnessed, mode):
    reply = Reply(calls=PARIS, faults=frozenset({"length_cut"}))
    record = run_witnessed(witnessed, "single", mode, reply)
    assert (first_failure(record).name, record.blame) == ("arguments_json", "model")


def test_a_pass_asks_for_no_evidence_under_failures(witnessed):
    before = len(witnessed.raw_requests)
    record = run_witnessed(witnessed, "single", "nonstream", CORRECT["single"])
    assert record.verdict == "pass" and record.evidence is None and len(witnessed.raw_requests) == before


def test_an_engine_without_protocols_gets_unavailable_not_a_guess(witnessed):
    witnessed.script.reply = Reply(calls=PARIS, faults=frozenset({"drop_argument"}))
    target = Target(witnessed.base_url, "fake", timeout_s=5)
    witness = Witness(EvidenceSpec.from_dict({"unavailable": "no raw completion endpoint"}), make_http(target),
                      get_family("hermes"))
    record = Runner(make_client(target), "fake", get_family("hermes"), witness=witness).run(CASES["single"], "nonstream")
    assert record.evidence.status == "unavailable" and record.evidence.reason == "no raw completion endpoint"
    assert (record.blame, record.blamed_by) == ("model", "wire")


def test_a_call_under_a_lazy_grammar_is_not_comparable_and_costs_no_generation(witnessed):
    """llama-server constrains a call with a grammar its /completion is not told: no raw completion is asked."""
    witnessed.script.reply = Reply(calls=WRONG_CITY)
    target = Target(witnessed.base_url, "fake", timeout_s=5)
    spec = attrs.evolve(LLAMACPP_PROTOCOLS, constrained=("calls",))
    witness = Witness(spec, make_http(target), get_family("hermes"), read_template(TEMPLATE))
    before = len(witnessed.raw_requests)
    record = Runner(make_client(target), "fake", get_family("hermes"), witness=witness).run(CASES["single"], "nonstream")
    assert record.evidence.status == "not_comparable" and "grammar" in record.evidence.reason
    assert record.evidence.raw_text is None and record.evidence.template.same  # the render is still compared
    assert len(witnessed.raw_requests) == before + 1  # the render only
    assert (record.blame, record.blamed_by) == ("model", "wire")


# -- model faults: the same wrong text in the chat answer and in the raw completion, for every evidence protocol ---

PARIS_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
# (id, what the model wrote for case "single", the first failing check): a correct engine answers each as the
# model wrote it, so each is the model's, whatever evidence says and whichever protocol gives it.
MODEL_FAULT_ROWS = [
    ("omitted-argument", '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>', "arguments_schema"),
    ("unknown-tool", PARIS_CALL.replace("get_weather", "get_wether"), "arguments_schema"),
    ("prose", "I cannot look the weather up, sorry.", "expected_calls"),
    ("bad-json", PARIS_CALL.replace("}}", "}"), "no_marker_leak"),
    ("unclosed-block", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', "no_marker_leak"),
    ("wrong-key", PARIS_CALL.replace('"name"', '"function"'), "no_marker_leak"),
    ("extra-call", PARIS_CALL + "\n" + PARIS_CALL, "expected_calls"),
    ("call-in-thinking", f"<think>I should call it: {PARIS_CALL}</think>Let me look that up.", "no_unparsed_call"),
]


def declared(engine: str) -> EvidenceSpec:
    from toolmatrix.serving.registry import load_registry

    return load_registry()[0][engine].evidence


def evidence_protocols() -> dict[str, EvidenceSpec]:
    """Every evidence protocol the engine specs declare: each engine's same-generation one (as declared) and its
    second-generation fallback (unconstrained here: the fake 'model' is not)."""
    from toolmatrix.serving.registry import load_registry

    protocols = {}
    for engine in load_registry()[0].values():
        spec = engine.evidence
        if spec.same_generation:
            protocols[spec.same_generation] = spec
        if spec.render and spec.complete:
            protocols[f"{spec.render}+{spec.complete}"] = attrs.evolve(spec, same_generation=None, constrained=())
    return protocols


PROTOCOLS = evidence_protocols()
SAME_GENERATION = sorted(name for name, spec in PROTOCOLS.items() if spec.same_generation)


def test_every_evidence_protocol_is_declared():
    assert set(PROTOCOLS) == {"llamacpp_verbose", "vllm_token_ids", "llamacpp_apply_template+llamacpp_completion",
                              "vllm_tokenize+openai_completions"}


@pytest.mark.parametrize(("fault", "case_name", "check", "wire_blame"), EVIDENCE_ROWS, ids=[r[0] for r in EVIDENCE_ROWS])
@pytest.mark.parametrize("protocol", SAME_GENERATION)
@pytest.mark.parametrize("mode", BOTH)
def test_same_generation_evidence_blames_the_engine_that_changed_a_right_answer(witnessed, protocol, fault,
                                                                                case_name, check, wire_blame, mode):
    """As declared (llama-server's lazy grammar included): the answer itself tells the raw text, nothing else is
    asked of the engine, and the grammar no longer makes a call not comparable."""
    correct = CORRECT[case_name]
    before = len(witnessed.raw_requests)
    record = run_protocol(witnessed, PROTOCOLS[protocol], case_name, mode,
                          Reply(correct.calls, correct.content, faults=frozenset({fault})))
    assert (first_failure(record).name, record.blame, record.blamed_by) == (check, "engine", "evidence")
    assert (record.evidence.status, record.evidence.source) == ("obtained", "same_generation"), record.evidence
    assert record.evidence.template.same and record.evidence.calls == [
        {"name": n, "arguments": a} for n, a in correct.calls]
    assert len(witnessed.raw_requests) == before, "no render, no second generation"


@pytest.mark.parametrize(("text", "check"), [r[1:] for r in MODEL_FAULT_ROWS], ids=[r[0] for r in MODEL_FAULT_ROWS])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("mode", BOTH)
def test_evidence_keeps_the_models_own_mistakes_the_models(witnessed, protocol, text, check, mode):
    reply = model_wrote(text)
    record = run_protocol(witnessed, PROTOCOLS[protocol], "single", mode, reply, evidence=True)
    assert record.evidence.status == "obtained" and record.evidence.raw_text == text, record.evidence
    failed = first_failure(record)
    assert (failed.name, record.blame, record.blamed_by) == (check, "model", "evidence"), failed
    assert "[evidence: the model's own text" in failed.detail


def test_an_unreadable_call_is_named_on_the_record(witnessed):
    record = run_protocol(witnessed, PROTOCOLS["vllm_tokenize+openai_completions"], "single", "nonstream",
                          model_wrote(PARIS_CALL.replace("}}", "}")), evidence=True)
    assert "cannot be read: broken or truncated JSON" in first_failure(record).detail


def test_evidence_blames_the_model_at_least_as_often_as_the_wire(witnessed):
    """The share of model-fault exchanges blamed ``model``, with evidence on and off (printed for the note)."""
    shares = {}
    for evidence in (False, True):
        blames = [run_protocol(witnessed, spec, "single", mode, model_wrote(text), evidence).blame
                  for _, text, _ in MODEL_FAULT_ROWS for spec in PROTOCOLS.values() for mode in BOTH]
        shares[evidence] = blames.count("model") / len(blames)
    print(f"model faults blamed 'model': evidence off {shares[False]:.0%}, on {shares[True]:.0%}")
    assert shares[True] == 1.0 and shares[True] >= shares[False]


CONSTRAINED = [
    ("choice_required", "I cannot look the weather up, sorry."),
    ("choice_required", PARIS_CALL.replace("get_weather", "get_wether")),
    ("choice_named", PARIS_CALL),
]


@pytest.mark.parametrize("engine", ["llamacpp", "vllm"])
@pytest.mark.parametrize(("case_name", "text"), CONSTRAINED, ids=["required-prose", "required-unknown-tool",
                                                                  "named-other-tool"])
def test_a_constrained_choice_the_engine_did_not_hold_is_the_engines(witnessed, engine, case_name, text):
    """tool_choice required or named: the engine promises a call to an offered (the named) tool. With the same
    generation the raw text is the constrained generation itself, and still the engine's: it did not hold it.
    With a second generation the raw completion would not be constrained: none is asked (not comparable)."""
    record = run_protocol(witnessed, declared(engine), case_name, "nonstream", model_wrote(text))
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("tool_choice", "engine", "wire")
    assert (record.evidence.status, record.evidence.source, record.evidence.raw_text) == (
        "obtained", "same_generation", text)
    before = len(witnessed.raw_requests)
    record = run_protocol(witnessed, attrs.evolve(declared(engine), same_generation=None), case_name, "nonstream",
                          model_wrote(text))
    assert (first_failure(record).name, record.blame, record.blamed_by) == ("tool_choice", "engine", "wire")
    assert record.evidence.status == "not_comparable" and "tool_choice" in record.evidence.reason
    assert not any("prompt" in r and "messages" not in r for r in witnessed.raw_requests[before:]), "no completion"


def test_an_answer_that_does_not_tell_falls_back_to_a_second_generation(witnessed):
    """A server without the same-generation field (an older build) still gives evidence, and says why."""
    spec = attrs.evolve(declared("vllm"), same_generation="llamacpp_verbose", constrained=())  # vLLM-style fake: no __verbose
    # a stream: the reference's request carried the field, not the stream's
    record = run_protocol(witnessed, spec, "single", "stream", Reply(calls=WRONG_CITY))
    assert record.request.get("verbose") is None and record.evidence.source is not None
    assert record.evidence.status == "obtained"

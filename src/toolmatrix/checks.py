"""Checks: small pure functions, exchange + case -> pass / fail / skip with a one-line reason and a blame.

Each docstring's first line names the failure class it catches (see reference/bugs.md). A check never raises
on bad engine output: bad output is a FAIL with its blame. ``CHECKS`` is ordered from the most fundamental
(transport, wire shape) to the model's choices, so the first failure gives a case its blame.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, Callable, Iterable, Mapping

import attrs
import jsonschema
import jsonschema_rs

from toolmatrix.cases import Case, Expectation
from toolmatrix.exchange import Call, Exchange, Message, stream_deltas
from toolmatrix.formats import Family
from toolmatrix.specs import load_schema

PASS, FAIL, SKIP = "pass", "fail", "skip"
MODEL, ENGINE, TEMPLATE, INFRA = "model", "engine", "template", "infra"


@attrs.frozen
class CheckResult:
    name: str
    status: str  # pass | fail | skip
    blame: str | None  # model | engine | template | infra, on a failure
    detail: str

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "blame": self.blame, "detail": self.detail}


@attrs.frozen
class Evidence:
    """What the checks read: the case, its exchange, the model's family, and the non-streamed twin."""

    case: Case
    exchange: Exchange
    family: Family
    expect: Expectation  # the case's expectation, or its followup's for a second turn
    reference: Exchange | None = None  # non-streamed answer to compare a stream with
    message: Message | None = attrs.field(init=False)  # the answer, reassembled once for every check

    @message.default
    def _reassemble(self) -> Message | None:
        return self.exchange.message()


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _pass(detail: str = "") -> tuple[str, str | None, str]:
    return PASS, None, detail


def _fail(blame: str, detail: str) -> tuple[str, str | None, str]:
    return FAIL, blame, detail


def _skip(detail: str) -> tuple[str, str | None, str]:
    return SKIP, None, detail


# -- transport and wire --------------------------------------------------------------------------------------


def check_http_status(ev: Evidence) -> tuple:
    """HTTP_ERROR: a 5xx, timeout or refused connection on a valid request, or a 2xx/5xx on an invalid one."""
    ex = ev.exchange
    body = _short(ex.response if ex.response is not None else ex.raw_text or "", 160)
    if ex.error is not None:
        return _fail(INFRA, ex.error)
    if ev.expect.reject:
        if ex.status is not None and 400 <= ex.status < 500:
            return _pass(f"rejected with HTTP {ex.status}")
        return _fail(ENGINE, f"invalid request answered HTTP {ex.status}, expected 4xx: {body}")
    if ex.ok:
        return _pass()
    # A template that cannot render the conversation is the template's fault, whatever the status.
    blame = TEMPLATE if re.search(r"(?i)template|jinja", body) else ENGINE
    return _fail(blame, f"HTTP {ex.status}: {body}")


@cache
def _wire_validators(kind: str) -> tuple[Callable[[Any], bool], jsonschema.Draft202012Validator]:
    # A fast yes/no (jsonschema-rs) for the common valid case; jsonschema words the problem when there is one.
    schema = load_schema("chat-response.schema.json")
    wrapped = {"$ref": f"#/$defs/{kind}", "$defs": schema["$defs"]}
    return jsonschema_rs.validator_for(wrapped).is_valid, jsonschema.Draft202012Validator(wrapped)


def _schema_problem(kind: str, instance: Any) -> str | None:
    is_valid, validator = _wire_validators(kind)
    if is_valid(instance):
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"${where}: {error.message[:120]}"


def check_wire_shape(ev: Evidence) -> tuple:
    """WIRE_SHAPE: the body or a stream chunk is not a valid OpenAI chat completion (tool_calls not a list, ...)."""
    ex = ev.exchange
    if not ex.ok:
        return _skip("no answer")
    if ex.mode == "nonstream":
        problem = _schema_problem("completion", ex.response)
        return _fail(ENGINE, problem) if problem else _pass()
    if not ex.chunks:
        return _fail(ENGINE, "stream carried no chunk")
    for number, chunk in enumerate(ex.chunks):
        problem = _schema_problem("chunk", chunk)
        if problem:
            return _fail(ENGINE, f"chunk {number}: {problem}")
    return _pass(f"{len(ex.chunks)} chunks")


def check_stream_deltas(ev: Evidence) -> tuple:
    """STREAM_DELTAS: tool-call deltas malformed: no integer index, id/name missing or repeated, index reused."""
    ex = ev.exchange
    if ex.mode != "stream" or not ex.ok:
        return _skip("not a stream")
    seen: dict[int, dict] = {}
    finished = False
    for number, delta, finish in stream_deltas(ex.chunks):
        finished = finished or finish is not None
        for raw in delta.get("tool_calls") or []:
            if not isinstance(raw, dict) or not isinstance(raw.get("index"), int) or isinstance(raw.get("index"), bool):
                return _fail(ENGINE, f"chunk {number}: tool-call delta without an integer index: {_short(raw)}")
            function = raw.get("function") or {}
            state = seen.get(raw["index"])
            if state is None:
                if not raw.get("id") or not function.get("name"):
                    return _fail(ENGINE, f"chunk {number}: first delta of call {raw['index']} lacks id or name: {_short(raw)}")
                seen[raw["index"]] = {"id": raw["id"], "name": function["name"]}
                continue
            if raw.get("id") and raw["id"] != state["id"]:
                return _fail(ENGINE, f"chunk {number}: index {raw['index']} reused by another call id {raw['id']!r} (calls merged)")
            if function.get("name") and function["name"] != state["name"]:
                return _fail(ENGINE, f"chunk {number}: name sent again for call {raw['index']}: {function['name']!r}")
            if function.get("arguments") is not None and not isinstance(function["arguments"], str):
                return _fail(ENGINE, f"chunk {number}: argument fragment is not a string: {_short(function['arguments'])}")
    if not finished:
        return _fail(ENGINE, "no chunk carried a finish_reason")
    return _pass(f"{len(seen)} call(s) streamed")


def _calls(ev: Evidence) -> tuple[Call, ...]:
    message = ev.message
    return message.tool_calls if message else ()


def check_arguments_json(ev: Evidence) -> tuple:
    """ARGS_NOT_OBJECT: a call's arguments are not a JSON string of an object (dict, null, '', truncated JSON)."""
    calls = _calls(ev)
    if not calls:
        return _skip("no call")
    cut = ev.message.finish_reason == "length"
    for number, call in enumerate(calls):
        if call.parsed_arguments() is None:
            detail = f"{call.name}: arguments {_short(call.arguments)} are not a JSON string of an object"
            # The last call cut short by max_tokens, honestly reported as 'length': the model did not stop.
            if cut and number == len(calls) - 1:
                return _fail(MODEL, detail + " (cut by max_tokens)")
            return _fail(ENGINE, detail)
    return _pass()


def check_call_ids(ev: Evidence) -> tuple:
    """CALL_IDS: a call without a non-empty string id, or two calls sharing one."""
    calls = _calls(ev)
    if not calls:
        return _skip("no call")
    ids = [c.id for c in calls]
    if any(not isinstance(i, str) or not i for i in ids):
        return _fail(ENGINE, f"missing or empty id: {_short(ids)}")
    if len(set(ids)) != len(ids):
        return _fail(ENGINE, f"duplicate ids: {_short(ids)}")
    return _pass()


# -- the family's native format ------------------------------------------------------------------------------


def _request_text(ev: Evidence) -> str:
    return json.dumps(ev.exchange.request, ensure_ascii=False)


def _leaks(ev: Evidence, text: str | None) -> list[str]:
    # A marker the request itself contains (a user asking to echo "</tool_call>") is content, not a leak.
    if not text:
        return []
    sent = _request_text(ev)
    return [m for m in ev.family.find_markers(text) if m not in sent and json.dumps(m)[1:-1] not in sent]


def _valid_native_calls(ev: Evidence, text: str | None) -> list:
    if not text:
        return []
    parsed = ev.family.parse(text, list(ev.case.tools))
    return [c for c in parsed.calls if c.name in ev.case.tool_names and c.arguments is not None]


def check_no_unparsed_call(ev: Evidence) -> tuple:
    """UNPARSED_CALL: a valid native call left in content or reasoning instead of tool_calls (parser missed it)."""
    message = ev.message
    if message is None:
        return _skip("no answer")
    if ev.case.tool_choice_kind == "none":
        return _skip("tool_choice none: calls are not to be parsed")
    # Any valid call in content is a miss; in reasoning only when it never reached tool_calls.
    places = [("content", message.content)] + ([] if message.tool_calls else [("reasoning", message.reasoning)])
    for field, text in places:
        found = _valid_native_calls(ev, text)
        if found:
            names = ", ".join(c.name for c in found)
            return _fail(ENGINE, f"{len(found)} valid {ev.family.id} call(s) ({names}) left unparsed in {field}")
    return _pass()


def check_no_marker_leak(ev: Evidence) -> tuple:
    """MARKER_LEAK: a native marker of the family (or a held-back prefix) reached content, reasoning, names or args."""
    message = ev.message
    if message is None:
        return _skip("no answer")
    fields = [("content", message.content)]
    fields += [(f"name of call {i}", c.name if isinstance(c.name, str) else None) for i, c in enumerate(message.tool_calls)]
    fields += [(f"arguments of {c.name}", c.arguments if isinstance(c.arguments, str) else None) for c in message.tool_calls]
    openers = set(ev.family.call_openers)
    leaks = [(f, m) for f, t in fields for m in _leaks(ev, t)]
    # Reasoning may quote anything; only a call opener there means a call was swallowed.
    leaks += [("reasoning", m) for m in _leaks(ev, message.reasoning) if m in openers]
    if not leaks:
        return _pass()
    field, marker = leaks[0]
    # Residue next to parsed calls is the parser's doing; a lone malformed call is the model's.
    blame = ENGINE if message.tool_calls or _valid_native_calls(ev, message.content) else MODEL
    why = "" if blame == ENGINE else " (the model wrote a malformed call; the engine passed it through as text)"
    return _fail(blame, f"{marker!r} in {field}{why}")


def check_ascii_escaping(ev: Evidence) -> tuple:
    """ESCAPING: non-ASCII argument text sent as \\uXXXX escapes (ensure_ascii) instead of UTF-8."""
    calls = _calls(ev)
    if not calls:
        return _skip("no call")
    for call in calls:
        if isinstance(call.arguments, str):
            # An escape, not an escaped backslash followed by 'u' (a user may send the text "\u00e9").
            for match in re.finditer(r"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})", call.arguments):
                if int(match.group(1), 16) >= 0x80:
                    return _fail(ENGINE, f"{call.name}: non-ASCII escaped as \\u{match.group(1)} in {_short(call.arguments)}")
    return _pass()


# -- API semantics -------------------------------------------------------------------------------------------


def check_finish_reason(ev: Evidence) -> tuple:
    """FINISH_REASON: not 'tool_calls' when calls came back, or 'tool_calls' with none, or missing."""
    message = ev.message
    if message is None:
        return _skip("no answer")
    reason = message.finish_reason
    if message.tool_calls:
        # 'length' is the truth when max_tokens cut the answer; OpenAI answers 'stop' for a named tool_choice.
        allowed = ("tool_calls", "length") + (("stop",) if ev.case.tool_choice_kind == "named" else ())
        if reason not in allowed:
            return _fail(ENGINE, f"finish_reason {reason!r} with {len(message.tool_calls)} call(s), expected 'tool_calls'")
        return _pass(reason)
    if reason not in ("stop", "length"):
        return _fail(ENGINE, f"finish_reason {reason!r} with no call, expected 'stop' or 'length'")
    return _pass(reason)


def check_tool_choice(ev: Evidence) -> tuple:
    """TOOL_CHOICE_IGNORED: none answered with a call, required with none, a named choice with another tool."""
    kind = ev.case.tool_choice_kind
    message = ev.message
    if kind in ("auto", "invalid") or message is None:
        return _skip(f"tool_choice {kind}")
    names = [c.name for c in message.tool_calls]
    if kind == "none" and names:
        return _fail(ENGINE, f"tool_choice none, got call(s) {names}")
    if kind == "required" and not names:
        return _fail(ENGINE, f"tool_choice required, got no call (content {_short(message.content)})")
    if kind == "named":
        wanted = ev.case.named_function
        if not names or any(n != wanted for n in names):
            return _fail(ENGINE, f"tool_choice named {wanted!r}, got {names or 'no call'}")
    return _pass(kind)


def check_parallel_tool_calls(ev: Evidence) -> tuple:
    """PARALLEL_NOT_HONOURED: parallel_tool_calls=false answered with more than one call."""
    if ev.case.options.get("parallel_tool_calls") is not False:
        return _skip("parallel_tool_calls not false")
    calls = _calls(ev)
    if len(calls) > 1:
        return _fail(ENGINE, f"parallel_tool_calls=false, got {len(calls)} calls")
    return _pass()


def _call_signature(message: Message | None) -> tuple:
    if message is None:
        return ("no answer",)
    return tuple((c.name, c.parsed_arguments() if c.parsed_arguments() is not None else c.arguments) for c in message.tool_calls)


def check_stream_consistency(ev: Evidence) -> tuple:
    """STREAM_DIVERGES: the reassembled stream carries other calls (names, arguments, count) than the non-stream."""
    if ev.exchange.mode != "stream" or ev.reference is None or not ev.exchange.ok or not ev.reference.ok:
        return _skip("no stream/non-stream pair")
    streamed, whole = _call_signature(ev.message), _call_signature(ev.reference.message())
    if streamed != whole:
        return _fail(ENGINE, f"stream {_short(streamed, 70)} != non-stream {_short(whole, 70)}")
    return _pass(f"{len(streamed)} call(s) identical")


# -- the model's answer --------------------------------------------------------------------------------------


def _looks_double_encoded(value: Any, schema: Mapping) -> bool:
    """A string that decodes to what the schema wanted: an engine that did not coerce or double-encoded."""
    if not isinstance(value, str) or schema.get("type") in (None, "string"):
        return False
    try:
        decoded = json.loads(value)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(decoded)


def check_arguments_schema(ev: Evidence) -> tuple:
    """ARGS_SCHEMA: a call to a tool not offered, or arguments that break the tool's JSON Schema."""
    calls = [c for c in _calls(ev) if c.parsed_arguments() is not None]
    if not calls:
        return _skip("no call with object arguments")
    for call in calls:
        schema = ev.case.tool_schema(call.name) if isinstance(call.name, str) else None
        if schema is None:
            return _fail(MODEL, f"called {_short(call.name)}, which is not an offered tool")
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(call.parsed_arguments()))
        if error is not None:
            blame = ENGINE if _looks_double_encoded(error.instance, error.schema) else MODEL
            where = ".".join(map(str, error.absolute_path)) or "arguments"
            return _fail(blame, f"{call.name}.{where}: {error.message[:120]}")
    return _pass()


def _same_json(a: Any, b: Any) -> bool:
    # JSON equality: 3 == 3.0, but True is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


_ABSENT = object()


def value_matches(matcher: Any, value: Any) -> bool:
    """One argument value against a case matcher (literal, any_of, regex, contains, schema, equals, absent)."""
    if isinstance(matcher, dict) and len(matcher) == 1:
        (op, arg), = matcher.items()
        if op == "absent":
            return value is _ABSENT
        if value is _ABSENT:
            return False
        if op == "any_of":
            return any(_same_json(option, value) for option in arg)
        if op == "regex":
            return isinstance(value, str) and re.search(arg, value) is not None
        if op == "contains":
            return isinstance(value, str) and arg in value
        if op == "schema":
            return jsonschema.Draft202012Validator(arg).is_valid(value)
        if op == "equals":
            return _same_json(arg, value)
    return value is not _ABSENT and _same_json(matcher, value)


def call_matches(expected, call: Call) -> bool:
    args = call.parsed_arguments()
    if call.name != expected.name or args is None:
        return False
    return all(value_matches(m, args.get(k, _ABSENT)) for k, m in expected.arguments.items())


def _assign(expected: list, calls: list[Call]) -> bool:
    """Order-free matching: every expected call gets its own distinct returned call (backtracking, n is tiny)."""
    if not expected:
        return True
    first, rest = expected[0], expected[1:]
    return any(call_matches(first, c) and _assign(rest, calls[:i] + calls[i + 1:]) for i, c in enumerate(calls))


def _describe_calls(calls: Iterable[Call]) -> str:
    return _short([f"{c.name}({c.arguments})" for c in calls], 120) if calls else "no call"


def check_expected_calls(ev: Evidence) -> tuple:
    """WRONG_CALL: the model called the wrong tool, the wrong number of times, or with wrong values."""
    expect, message = ev.expect, ev.message
    if expect.reject:
        return _skip("request is expected to be rejected")
    if message is None:
        return _skip("no answer")
    calls = list(message.tool_calls)
    if expect.no_call:
        return _fail(MODEL, f"expected no call, got {_describe_calls(calls)}") if calls else _pass()
    if expect.any_call:
        return _pass() if calls else _fail(MODEL, "expected a call, got none")
    if expect.completes:
        return _pass(f"answered with {len(calls)} call(s)")
    wanted = list(expect.calls)
    if len(calls) < len(wanted) or (len(calls) > len(wanted) and not expect.allow_extra_calls):
        return _fail(MODEL, f"expected {len(wanted)} call(s), got {_describe_calls(calls)}")
    if expect.ordered:
        ok = all(call_matches(w, c) for w, c in zip(wanted, calls))
    else:
        ok = _assign(wanted, calls)
    if not ok:
        want = _short([f"{w.name}({dict(w.arguments)})" for w in wanted], 90)
        return _fail(MODEL, f"expected {want}, got {_describe_calls(calls)}")
    return _pass(f"{len(calls)} call(s) matched")


def check_expected_content(ev: Evidence) -> tuple:
    """WRONG_ANSWER: the text answer does not mention what the tool result said."""
    wanted = ev.expect.content_contains_any
    message = ev.message
    if not wanted or message is None:
        return _skip("no content expectation")
    text = (message.content or "").lower()
    if any(w.lower() in text for w in wanted):
        return _pass()
    return _fail(MODEL, f"content {_short(message.content)} mentions none of {list(wanted)}")


Check = Callable[[Evidence], tuple]

CHECKS: tuple[tuple[str, Check], ...] = (
    ("http_status", check_http_status),
    ("wire_shape", check_wire_shape),
    ("stream_deltas", check_stream_deltas),
    ("arguments_json", check_arguments_json),
    ("call_ids", check_call_ids),
    ("no_unparsed_call", check_no_unparsed_call),
    ("no_marker_leak", check_no_marker_leak),
    ("ascii_escaping", check_ascii_escaping),
    ("finish_reason", check_finish_reason),
    ("tool_choice", check_tool_choice),
    ("parallel_tool_calls", check_parallel_tool_calls),
    ("stream_consistency", check_stream_consistency),
    ("arguments_schema", check_arguments_schema),
    ("expected_calls", check_expected_calls),
    ("expected_content", check_expected_content),
)


def run_checks(ev: Evidence, prefix: str = "") -> list[CheckResult]:
    """Every check on one exchange; a harness bug inside a check propagates (it is ours, not the engine's)."""
    out = []
    for name, check in CHECKS:
        status, blame, detail = check(ev)
        out.append(CheckResult(prefix + name, status, blame, detail))
    return out


@attrs.frozen
class Verdict:
    verdict: str  # pass | fail | unsupported | error
    blame: str | None
    reason: str


def judge(results: list[CheckResult], unsupported: Mapping[str, str], features: Iterable[str]) -> Verdict:
    """A case's outcome for one mode from its checks and the engine's declared gaps.

    error: the exchange itself failed (5xx, timeout, no server) on a valid request. unsupported: it failed and
    the case exercises a feature the engine spec declares unsupported (the reason is shown, never hidden).
    """
    failed = [r for r in results if r.status == FAIL]
    if not failed:
        return Verdict("pass", None, "")
    first = failed[0]
    reason = f"{first.name}: {first.detail}"
    # A gap is a feature the case exercises, or the failing check itself (e.g. an engine known to send no ids).
    gaps = [f"{f}: {unsupported[f]}" for f in sorted({*features, first.name}) if f in unsupported]
    if gaps:
        return Verdict("unsupported", first.blame, "; ".join(gaps) + f" ({reason})")
    http = next((r for r in failed if r.name.endswith("http_status")), None)
    if http is not None and (http.blame == INFRA or not http.detail.startswith(("HTTP 4", "invalid"))):
        return Verdict("error", http.blame, f"{http.name}: {http.detail}")
    return Verdict("fail", first.blame, reason)

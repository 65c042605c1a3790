"""Checks: small pure functions, exchange + case -> pass / fail / skip with a one-line reason and a blame.

Each check is registered with ``@check("FAILURE_CLASS", JUDGES, BLAMES)``: the class of reference/bugs.md it
catches (its docstring starts with it), what it judges, and the parties it can blame. The judges that treat checks
differently (``blame.reblame``, the replay tier's) read that registration, never a list of names, and a result
named after no registered check raises (``registered``). A check never raises on bad engine output: bad output is
a failure with its blame. ``CHECKS`` keeps the order of registration, from the most fundamental (transport, wire
shape) to the model's choices, so the first failure gives a case its blame.
"""

from __future__ import annotations

import enum
import json
import re
from functools import cache
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

import attrs
import jsonschema
import jsonschema_rs

from toolmatrix.base import jsontext
from toolmatrix.base.features import CHECK_GAPS, PRECONDITIONS
from toolmatrix.base.specs import load_schema
from toolmatrix.formats import Family, ParsedCall
from toolmatrix.library.cases import CallExpectation, Case, Expectation
from toolmatrix.records import Blame, CheckOutcome, CheckResult, Verdict
from toolmatrix.wire.answer import Call, Message
from toolmatrix.wire.errors import not_an_answer
from toolmatrix.wire.exchange import Exchange
from toolmatrix.wire.surfaces import Surface
from toolmatrix.wire.surfaces import surface as surface_of

MODEL, ENGINE, TEMPLATE, INFRA = Blame.MODEL, Blame.ENGINE, Blame.TEMPLATE, Blame.INFRA

# The kinds of an HTTP_ERROR: the first two mean the exchange itself failed (verdict error), the others that
# the engine answered, wrongly (verdict fail).
TRANSPORT = "HTTP_ERROR.transport"  # nothing came back: timeout, refused connection
BROKEN_OFF = "HTTP_ERROR.broken_off"  # the engine began an answer and closed the connection before its end
SERVER_ERROR = "HTTP_ERROR.server"  # a valid request answered with a status that is neither 2xx nor 4xx
CLIENT_ERROR = "HTTP_ERROR.client"  # a valid request refused with a 4xx
ACCEPTED_INVALID = "HTTP_ERROR.accepted_invalid"  # an invalid request not answered with a 4xx
OVERSIZE = "HTTP_ERROR.oversize"  # an answer longer than the client keeps (--max-answer-bytes)
NOT_SERVED = "HTTP_ERROR.not_served"  # no answer of the API at all: wrong URL, model or key, another kind of server
EXCHANGE_FAILED = frozenset({TRANSPORT, BROKEN_OFF, SERVER_ERROR, OVERSIZE, NOT_SERVED})
HARNESS = "HARNESS"  # toolmatrix itself failed on this answer (a record's kind, never a check's)


@attrs.frozen
class CheckInput:
    """What the checks read: the case, its exchange, the model's family, and the non-streamed twin."""

    case: Case
    exchange: Exchange
    family: Family
    expect: Expectation  # the case's expectation, or its followup's for a second turn
    reference: Exchange | None = None  # non-streamed answer to compare a stream with
    message: Message | None = attrs.field(init=False)  # the answer, reassembled once for every check
    surface: Surface = attrs.field(init=False)  # the API it went over
    # Why the answer is none of the API's at all (``errors.not_an_answer``), or None: read once for every check.
    not_served: str | None = attrs.field(init=False)
    request_text: str = attrs.field(init=False)  # the request as sent, serialised once for every marker look-up

    @message.default
    def _reassemble(self) -> Message | None:
        return self.exchange.message()

    @surface.default
    def _surface(self) -> Surface:
        return surface_of(self.exchange.api)

    @not_served.default
    def _not_served(self) -> str | None:
        ex = self.exchange
        return not_an_answer(ex.http_status, ex.response, ex.raw_text, self.surface.answer_key)

    # marker -> whether the request holds it: one search of the request per distinct marker, however many fields
    # leak it (a follow-up with thousands of calls sends megabytes and its answer may leak in every argument).
    _quoted: dict[str, bool] = attrs.field(init=False, factory=dict, eq=False, repr=False)

    @request_text.default
    def _serialise(self) -> str:
        return json.dumps(self.exchange.request, ensure_ascii=False)

    def quotes(self, marker: str) -> bool:
        """Whether the request itself holds ``marker``, as text or JSON-escaped."""
        if marker not in self._quoted:
            sent = self.request_text
            self._quoted[marker] = marker in sent or json.dumps(marker)[1:-1] in sent
        return self._quoted[marker]


@attrs.frozen
class Finding:
    """What a check function returns; ``run_checks`` names it. ``kind`` defaults to the check's class."""

    outcome: CheckOutcome
    blame: Blame | None = None
    detail: str = ""
    kind: str | None = None


def passed(detail: str = "") -> Finding:
    return Finding(CheckOutcome.PASS, None, detail)


def failed(blame: Blame, detail: str, kind: str | None = None) -> Finding:
    return Finding(CheckOutcome.FAIL, blame, detail, kind)


def skipped(detail: str) -> Finding:
    return Finding(CheckOutcome.SKIP, None, detail)


class Judges(enum.Enum):
    """What a check judges. ``blame.reblame`` asks the model's own words again about CALLS and MARKERS only."""

    EXCHANGE = "exchange"  # that an answer of the API came back at all
    WIRE = "wire"  # how the answer was sent: its shape, ids, deltas, stop word, the request's contract
    CALLS = "calls"  # the calls the answer holds, their names and arguments: the model's words can fail the same
    MARKERS = "markers"  # the family's markers in the text: one the model's raw text never held, the engine made
    TEXT = "text"  # the text answer itself: left to the wire rules


In = TypeVar("In")  # what a check reads: a ``CheckInput``, or what only the replay tier knows


@attrs.frozen
class Check(Generic[In]):
    """A registered check: its stable name (a key in records and baselines), the failure class it catches, and
    what the judges read in place of its name."""

    name: str
    failure_class: str
    function: Callable[[In], Finding]
    judges: Judges
    blames: frozenset[Blame]  # the parties its failures can name: another is a bug of the check's (raises)
    unreadable_call_fails: bool = False  # a call the model did not finish or wrote unreadably fails it (reblame)
    # Where the model's text is given (replay), the model is not to blame: the parser is (``replay.judge``).
    given_text_clears_model: bool = False
    replay_only: bool = False  # it reads what only a fixture knows: run by the replay tier, never in ``CHECKS``

    def __call__(self, ev: In, prefix: str = "") -> CheckResult:
        found = self.function(ev)
        if found.blame is not None and found.blame not in self.blames:
            raise ValueError(f"check {self.name!r} blamed {found.blame}, not one of its declared parties")
        kind = (found.kind or self.failure_class) if found.outcome is CheckOutcome.FAIL else None
        return CheckResult(prefix + self.name, found.outcome, found.blame, found.detail, kind)


class UnknownCheck(LookupError):
    """A check result, or a name the code relies on, that no registered check has: a check renamed in one place
    and not in another."""


CHECKS: list[Check[CheckInput]] = []  # every answer's, in order
REGISTERED: dict[str, Check[Any]] = {}  # by name: the checks above and the replay tier's own


def check(failure_class: str, judges: Judges, blames: Iterable[Blame], *, unreadable_call_fails: bool = False,
          given_text_clears_model: bool = False) -> Callable[[Callable[[CheckInput], Finding]], Check[CheckInput]]:
    """Register a check of every answer under its function name (less ``check_``), in order."""

    def register(function: Callable[[CheckInput], Finding]) -> Check[CheckInput]:
        made = _register(Check(_name(function, failure_class), failure_class, function, judges, frozenset(blames),
                               unreadable_call_fails, given_text_clears_model))
        CHECKS.append(made)
        return made

    return register


def replay_check(failure_class: str, judges: Judges, blames: Iterable[Blame]) -> Callable[
        [Callable[[In], Finding]], Check[In]]:
    """Register a check only the replay tier runs: known by name (``registered``), never in ``CHECKS``."""

    def register(function: Callable[[In], Finding]) -> Check[In]:
        return _register(Check(_name(function, failure_class), failure_class, function, judges, frozenset(blames),
                               replay_only=True))

    return register


def _name(function: Callable[[In], Finding], failure_class: str) -> str:
    """A check's name, its function's less ``check_``; TypeError where its docstring does not start with its class."""
    if not (function.__doc__ or "").startswith(failure_class + ":"):
        raise TypeError(f"{function.__name__}: the docstring must start with '{failure_class}:'")
    return function.__name__.removeprefix("check_")


def _register(made: Check[In]) -> Check[In]:
    """``made`` known by its name; TypeError, at import, for a name taken or a registration that says nothing."""
    if made.name in REGISTERED:
        raise TypeError(f"check {made.name!r} registered twice")
    if not made.blames:
        raise TypeError(f"check {made.name!r} blames no party")
    if made.given_text_clears_model and Blame.MODEL not in made.blames:
        raise TypeError(f"check {made.name!r}: given_text_clears_model, but it never blames the model")
    REGISTERED[made.name] = made
    return made


def registered(name: str) -> Check[Any]:
    """The check a result is named after (a second turn's ``followup.NAME`` too); UnknownCheck where none is."""
    found = REGISTERED.get(name.rpartition(".")[2])
    if found is None:
        raise UnknownCheck(f"no check is registered as {name!r}; registered: {', '.join(REGISTERED)}")
    return found


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- transport and wire --------------------------------------------------------------------------------------


@check("HTTP_ERROR", Judges.EXCHANGE, {ENGINE, TEMPLATE, INFRA})
def check_http_status(ev: CheckInput) -> Finding:
    """HTTP_ERROR: a 5xx, timeout or refused connection on a valid request, an answer the engine broke off or
    made over the size limit, or a 2xx/5xx on an invalid one. An answer that is none of the API's at all (no such
    route or model, a key refused, an HTML page: ``errors.not_an_answer``) is the set-up's: infra, not_served."""
    ex = ev.exchange
    body = _short(ex.response if ex.response is not None else ex.raw_text or "", 160)
    if ex.cut is not None and ex.cut.whole:  # the engine finished an answer no client should have to hold
        # The client words every cut as its error; the fallback only keeps the detail a string.
        return failed(ENGINE, ex.error or "answer over the limit", OVERSIZE)
    if ex.broken_off:  # llama-cpp-python cuts a stream when a second request arrives
        return failed(ENGINE, f"the engine broke off its HTTP {ex.http_status} answer: {ex.error}", BROKEN_OFF)
    if ex.error is not None:
        return failed(INFRA, ex.error, TRANSPORT)
    if ev.not_served:
        return failed(INFRA, ev.not_served, NOT_SERVED)
    if ev.expect.reject:
        if ex.http_status is not None and 400 <= ex.http_status < 500:
            return passed(f"rejected with HTTP {ex.http_status}")
        return failed(ENGINE, f"invalid request answered HTTP {ex.http_status}, expected 4xx: {body}", ACCEPTED_INVALID)
    if ex.ok:
        return passed()
    # A template that cannot render the conversation is the template's fault, whatever the status.
    blame = TEMPLATE if re.search(r"(?i)template|jinja", body) else ENGINE
    kind = CLIENT_ERROR if ex.http_status is not None and 400 <= ex.http_status < 500 else SERVER_ERROR
    return failed(blame, f"HTTP {ex.http_status}: {body}", kind)


@cache
def _wire_validators(schema_file: str, kind: str) -> tuple[Callable[[Any], bool], jsonschema.Draft202012Validator]:
    # A fast yes/no (jsonschema-rs) for the common valid case; jsonschema words the problem when there is one.
    schema = load_schema(schema_file)
    wrapped = {"$ref": f"#/$defs/{kind}", "$defs": schema["$defs"]}
    return jsonschema_rs.validator_for(wrapped).is_valid, jsonschema.Draft202012Validator(wrapped)


def _schema_problem(ev: CheckInput, kind: str, instance: Any) -> str | None:
    """What breaks the surface's wire schema ``$defs[kind]`` in ``instance``, or None."""
    is_valid, validator = _wire_validators(ev.surface.wire_schema, kind)
    if is_valid(instance):
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"${where}: {error.message[:120]}"


def _not_json(text: Any) -> str | None:
    """Why a body or chunk kept as text (the client could not read it as strict JSON) is not JSON."""
    if not isinstance(text, str):
        return None
    try:
        jsontext.loads(text)
    except jsontext.NotJSON as exc:
        return f"not JSON ({exc}): {_short(text)}"
    return None


@check("WIRE_SHAPE", Judges.WIRE, {ENGINE})
def check_wire_shape(ev: CheckInput) -> Finding:
    """WIRE_SHAPE: the body or a stream chunk is not the surface's valid answer (chat: tool_calls not a list, ...;
    Responses: a function_call without call_id, arguments not a string; Messages: a tool_use input that is not an
    object), or an invalid request refused in another shape than the surface's own error."""
    ex = ev.exchange
    if ev.expect.reject and ev.surface.checks_error_shape and ex.http_status is not None and 400 <= ex.http_status < 500:
        problem = _not_json(ex.raw_text) or _schema_problem(ev, "error", ex.response)
        return failed(ENGINE, f"HTTP {ex.http_status} error body: {problem}") if problem else passed("error shape")
    if not ex.ok or ev.not_served:
        return skipped("no answer")
    if ex.mode == "nonstream":
        problem = _not_json(ex.raw_text) or _schema_problem(ev, "completion", ex.response)
        return failed(ENGINE, problem) if problem else passed()
    if not ex.chunks:
        return failed(ENGINE, "stream carried no chunk")
    for number, chunk in enumerate(ex.chunks):
        problem = _not_json(chunk) or _schema_problem(ev, "chunk", chunk)
        if problem:
            return failed(ENGINE, f"chunk {number}: {problem}")
    return passed(f"{len(ex.chunks)} chunks")


@check("STREAM_DELTAS", Judges.WIRE, {ENGINE})
def check_stream_deltas(ev: CheckInput) -> Finding:
    """STREAM_DELTAS: the stream's pieces malformed. Chat: a tool-call delta without an integer index, id/name
    missing or repeated, an index reused, no finish_reason. Responses: argument deltas before their item, .done
    other than the deltas joined, no response.completed. Messages: events out of order, a tool_use fed other than
    input_json_delta, a block never stopped, no stop_reason."""
    ex = ev.exchange
    if ex.mode != "stream" or not ex.ok:
        return skipped("not a stream")
    problem = ev.surface.stream_problem(ex.chunks)
    return failed(ENGINE, problem) if problem else passed(f"{len(_calls(ev))} call(s) streamed")


def _calls(ev: CheckInput) -> tuple[Call, ...]:
    message = ev.message
    return message.tool_calls if message else ()


@check("ARGS_NOT_OBJECT", Judges.CALLS, {MODEL, ENGINE}, unreadable_call_fails=True)
def check_arguments_json(ev: CheckInput) -> Finding:
    """ARGS_NOT_OBJECT: a call's arguments are not a JSON string of an object (dict, null, '', truncated JSON)."""
    calls = _calls(ev)
    if not calls:
        return skipped("no call")
    cut = ev.message is not None and ev.message.cut  # there are calls: there is a message
    for number, call in enumerate(calls):
        if call.parsed_arguments() is None:
            detail = f"{call.name}: arguments {_short(call.arguments)} are not a JSON string of an object"
            # The last call cut short by max_tokens, honestly reported as 'length': the model did not stop.
            if cut and number == len(calls) - 1:
                return failed(MODEL, detail + " (cut by max_tokens)")
            return failed(ENGINE, detail)
    return passed()


@check("CALL_IDS", Judges.WIRE, {ENGINE})
def check_call_ids(ev: CheckInput) -> Finding:
    """CALL_IDS: a call without a non-empty string id, or two calls sharing one."""
    calls = _calls(ev)
    if not calls:
        return skipped("no call")
    ids = [c.id for c in calls]
    if any(not isinstance(i, str) or not i for i in ids):
        return failed(ENGINE, f"missing or empty id: {_short(ids)}")
    if len(set(ids)) != len(ids):
        return failed(ENGINE, f"duplicate ids: {_short(ids)}")
    return passed()


# -- the family's native format ------------------------------------------------------------------------------


def _leaks(ev: CheckInput, text: str | None) -> list[str]:
    # A marker the request itself contains (a user asking to echo "</tool_call>") is content, not a leak.
    if not text:
        return []
    return [m for m in ev.family.find_markers(text) if not ev.quotes(m)]


def _valid_native_calls(ev: CheckInput, text: str | None) -> list[ParsedCall]:
    if not text:
        return []
    parsed = ev.family.parse(text, list(ev.case.tools))
    return [c for c in parsed.calls if c.name in ev.case.tool_names and c.arguments is not None]


@check("UNPARSED_CALL", Judges.CALLS, {ENGINE}, unreadable_call_fails=True)
def check_no_unparsed_call(ev: CheckInput) -> Finding:
    """UNPARSED_CALL: a valid native call left in content or reasoning instead of tool_calls (parser missed it)."""
    message = ev.message
    if message is None:
        return skipped("no answer")
    if ev.case.tool_choice_kind == "none":
        return skipped("tool_choice none: calls are not to be parsed")
    # Any valid call in content is a miss; in reasoning only when it never reached tool_calls.
    places = [("content", message.content)] + ([] if message.tool_calls else [("reasoning", message.reasoning)])
    for field, text in places:
        found = _valid_native_calls(ev, text)
        if found:
            names = ", ".join(c.name for c in found)
            return failed(ENGINE, f"{len(found)} valid {ev.family.id} call(s) ({names}) left unparsed in {field}")
    return passed()


def leaked_markers(ev: CheckInput) -> list[tuple[str, str]]:
    """``(field, marker)`` for every native marker (or held-back opener prefix) in the answer, by field order."""
    message = ev.message
    if message is None:
        return []
    fields = [("content", message.content)]
    fields += [(f"name of call {i}", c.name if isinstance(c.name, str) else None) for i, c in enumerate(message.tool_calls)]
    fields += [(f"arguments of {c.name}", c.arguments if isinstance(c.arguments, str) else None) for c in message.tool_calls]
    openers = set(ev.family.call_openers)
    leaks = [(f, m) for f, t in fields for m in _leaks(ev, t)]
    # Reasoning may quote anything; only a call opener there means a call was swallowed.
    return leaks + [("reasoning", m) for m in _leaks(ev, message.reasoning) if m in openers]


@check("MARKER_LEAK", Judges.MARKERS, {MODEL, ENGINE}, unreadable_call_fails=True)
def check_no_marker_leak(ev: CheckInput) -> Finding:
    """MARKER_LEAK: a native marker of the family (or a held-back prefix) reached content, reasoning, names or args."""
    message = ev.message
    if message is None:
        return skipped("no answer")
    leaks = leaked_markers(ev)
    if not leaks:
        return passed()
    field, marker = leaks[0]
    # A lone marker with no call parsed anywhere is what the model wrote (a malformed call, an imitated tool result)
    # and the engine passed on as text: the model's. Residue next to parsed calls is the parser's, and reasoning
    # tags in content (never a malformed call) are the engine's, which is there to split them off.
    written = marker not in ev.family.reasoning_markers and not message.tool_calls and not _valid_native_calls(
        ev, message.content)
    blame = MODEL if written else ENGINE
    why = "" if blame == ENGINE else " (the model wrote a malformed call; the engine passed it through as text)"
    return failed(blame, f"{marker!r} in {field}{why}")


@check("ESCAPING", Judges.CALLS, {ENGINE})
def check_ascii_escaping(ev: CheckInput) -> Finding:
    """ESCAPING: non-ASCII argument text sent as \\uXXXX escapes (ensure_ascii) instead of UTF-8."""
    calls = _calls(ev)
    if not calls:
        return skipped("no call")
    for call in calls:
        escape = non_ascii_escape(call.arguments) if isinstance(call.arguments, str) else None
        if escape:
            return failed(ENGINE, f"{call.name}: non-ASCII escaped as {escape} in {_short(call.arguments)}")
    return passed()


def non_ascii_escape(text: str) -> str | None:
    """The first \\uXXXX escape of a non-ASCII character in JSON text, or None. An escape, not an escaped backslash
    followed by 'u' (a user may send the text "\\u00e9")."""
    for match in re.finditer(r"(?<!\\)(?:\\\\)*\\u([0-9a-fA-F]{4})", text):
        if int(match.group(1), 16) >= 0x80:
            return f"\\u{match.group(1)}"
    return None


# -- API semantics -------------------------------------------------------------------------------------------


@check("FINISH_REASON", Judges.WIRE, {ENGINE})
def check_finish_reason(ev: CheckInput) -> Finding:
    """FINISH_REASON: the answer's stop word wrong for what it holds: chat 'tool_calls' missing with calls or
    present without; Messages stop_reason not 'tool_use' with tool_use blocks; Responses status not 'completed'."""
    message = ev.message
    if message is None:
        return skipped("no answer")
    problem = ev.surface.finish_problem(message, ev.case.tool_choice_kind == "named")
    return failed(ENGINE, problem) if problem else passed(str(message.finish_reason))


@check("TOOL_CHOICE_IGNORED", Judges.WIRE, {ENGINE})
def check_tool_choice(ev: CheckInput) -> Finding:
    """TOOL_CHOICE_IGNORED: none answered with a call, required with none (or with a tool not offered: the engine
    holds the call to the offered tools, usually by a grammar), a named choice with another tool."""
    kind = ev.case.tool_choice_kind
    message = ev.message
    if kind in ("auto", "invalid") or message is None:
        return skipped(f"tool_choice {kind}")
    names = [c.name for c in message.tool_calls]
    if kind == "none" and names:
        return failed(ENGINE, f"tool_choice none, got call(s) {names}")
    if kind == "required" and not names:
        return failed(ENGINE, f"tool_choice required, got no call (content {_short(message.content)})")
    if kind == "required" and any(n not in ev.case.tool_names for n in names):
        return failed(ENGINE, f"tool_choice required, got a call to a tool not offered: {names}")
    if kind == "named":
        wanted = ev.case.named_function
        if not names or any(n != wanted for n in names):
            return failed(ENGINE, f"tool_choice named {wanted!r}, got {names or 'no call'}")
    return passed(kind)


@check("PARALLEL_NOT_HONOURED", Judges.WIRE, {ENGINE})
def check_parallel_tool_calls(ev: CheckInput) -> Finding:
    """PARALLEL_NOT_HONOURED: parallel_tool_calls=false answered with more than one call."""
    if ev.case.options.get("parallel_tool_calls") is not False:
        return skipped("parallel_tool_calls not false")
    calls = _calls(ev)
    if len(calls) > 1:
        return failed(ENGINE, f"parallel_tool_calls=false, got {len(calls)} calls")
    return passed()


# Each call's name and arguments (parsed when they parse), or that there was no answer.
Signature = tuple[tuple[Any, Any], ...] | tuple[str]


def call_signature(message: Message | None) -> Signature:
    """What a stream and the whole answer are compared on, live (``stream_consistency``) and in replay."""
    if message is None:
        return ("no answer",)
    return tuple((c.name, c.parsed_arguments() if c.parsed_arguments() is not None else c.arguments) for c in message.tool_calls)


@check("STREAM_DIVERGES", Judges.WIRE, {ENGINE})
def check_stream_consistency(ev: CheckInput) -> Finding:
    """STREAM_DIVERGES: the reassembled stream carries other calls (names, arguments, count) than the non-stream."""
    if ev.exchange.mode != "stream" or ev.reference is None or not ev.exchange.ok or not ev.reference.ok:
        return skipped("no stream/non-stream pair")
    streamed, whole = call_signature(ev.message), call_signature(ev.reference.message())
    if streamed != whole:
        return failed(ENGINE, f"stream {_short(streamed, 70)} != non-stream {_short(whole, 70)}")
    return passed(f"{len(streamed)} call(s) identical")


# -- the model's answer --------------------------------------------------------------------------------------


_TOOL_VALIDATORS: dict[int, tuple[dict[str, Any], Callable[[Any], bool] | None]] = {}


def _surely_valid(schema: dict[str, Any], value: Any) -> bool:
    """jsonschema-rs's yes for a tool's schema, compiled once per schema object (a case's tools live as long as
    the run): most arguments are valid, and jsonschema's own walk costs ~1 ms each. A schema it refuses or a value
    it cannot take (an integer past 64 bits) is no yes: jsonschema then decides."""
    kept = _TOOL_VALIDATORS.get(id(schema))
    if kept is None or kept[0] is not schema:
        try:
            compiled = jsonschema_rs.validator_for(schema).is_valid
        except Exception:  # noqa: BLE001 - a schema jsonschema-rs refuses: jsonschema words it
            compiled = None
        kept = _TOOL_VALIDATORS[id(schema)] = (schema, compiled)
    try:
        return kept[1] is not None and kept[1](value)
    except Exception:  # noqa: BLE001 - a value it cannot convert: no answer, not a crash
        return False


def _looks_double_encoded(value: Any, schema: Mapping[str, Any]) -> bool:
    """A string that decodes to what the schema wanted: an engine that did not coerce or double-encoded."""
    if not isinstance(value, str) or schema.get("type") in (None, "string"):
        return False
    try:
        decoded = jsontext.loads(value)
    except jsontext.NotJSON:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(decoded)


@check("ARGS_SCHEMA", Judges.CALLS, {MODEL, ENGINE})
def check_arguments_schema(ev: CheckInput) -> Finding:
    """ARGS_SCHEMA: a call to a tool not offered, or arguments that break the tool's JSON Schema."""
    calls = [c for c in _calls(ev) if c.parsed_arguments() is not None]
    if not calls:
        return skipped("no call with object arguments")
    for call in calls:
        schema = ev.case.tool_schema(call.name) if isinstance(call.name, str) else None
        if schema is None:
            return failed(MODEL, f"called {_short(call.name)}, which is not an offered tool")
        arguments = call.parsed_arguments()
        if _surely_valid(schema, arguments):
            continue
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(arguments))
        if error is not None:
            blame = ENGINE if _looks_double_encoded(error.instance, error.schema) else MODEL
            where = ".".join(map(str, error.absolute_path)) or "arguments"
            return failed(blame, f"{call.name}.{where}: {error.message[:120]}")
    return passed()


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
    """One argument value against a case matcher (literal, any_of, regex, contains, schema, equals, absent,
    optional: absent, or present and matching the matcher inside)."""
    if isinstance(matcher, dict) and len(matcher) == 1:
        (op, arg), = matcher.items()
        if op == "absent":
            return value is _ABSENT
        if op == "optional":
            return value is _ABSENT or value_matches(arg, value)
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


def call_matches(expected: CallExpectation, call: Call) -> bool:
    return _fits(expected, call.name, call.parsed_arguments())


def _fits(expected: CallExpectation, name: Any, args: dict[str, Any] | None) -> bool:
    if name != expected.name or args is None:
        return False
    return all(value_matches(m, args.get(k, _ABSENT)) for k, m in expected.arguments.items())


def _assign(expected: list[CallExpectation], calls: list[Call]) -> bool:
    """Order-free matching: whether every expected call gets its own distinct returned call.

    A bipartite matching by augmenting paths: each pair (expected, returned) is compared once, so the work grows
    with len(expected) x len(calls), where backtracking grew with len(calls)^2 on an answer that does not fit
    (32 s for 4,000 calls with extra calls allowed).
    """
    args = [c.parsed_arguments() for c in calls]  # parsed once, not once per expected call
    fits = [[j for j, c in enumerate(calls) if _fits(w, c.name, args[j])] for w in expected]
    holder: dict[int, int] = {}  # returned call -> the expected call it is assigned to
    # An expected call that finds no augmenting path in its turn stays unassigned in every maximum matching.
    return all(_augment(i, fits, holder) for i in range(len(expected)))


def _augment(start: int, fits: list[list[int]], holder: dict[int, int]) -> bool:
    """Give expected call ``start`` a returned call, moving earlier assignments along an augmenting path.

    Depth-first with an explicit stack: a path may pass through every expected call, deeper than recursion goes.
    """
    seen: set[int] = set()
    path = [(start, iter(fits[start]))]  # expected calls on the path, each with the returned calls left to try
    taken: list[int] = []  # taken[k]: the returned call path[k] takes from path[k + 1]
    while path:
        j = next((j for j in path[-1][1] if j not in seen), None)
        if j is None:
            path.pop()
            if taken:  # the returned call that led into the dead end stays with its holder
                taken.pop()
            continue
        seen.add(j)
        if j in holder:
            taken.append(j)
            path.append((holder[j], iter(fits[holder[j]])))
            continue
        for (i, _), call in zip(path, [*taken, j]):
            holder[call] = i
        return True
    return False


def _describe_calls(calls: Iterable[Call]) -> str:
    return _short([f"{c.name}({c.arguments})" for c in calls], 120) if calls else "no call"


@check("WRONG_CALL", Judges.CALLS, {MODEL}, unreadable_call_fails=True, given_text_clears_model=True)
def check_expected_calls(ev: CheckInput) -> Finding:
    """WRONG_CALL: the model called the wrong tool, the wrong number of times, or with wrong values."""
    expect, message = ev.expect, ev.message
    if expect.reject:
        return skipped("request is expected to be rejected")
    if message is None:
        return skipped("no answer")
    calls = list(message.tool_calls)
    if expect.no_call:
        return failed(MODEL, f"expected no call, got {_describe_calls(calls)}") if calls else passed()
    if expect.any_call:
        return passed() if calls else failed(MODEL, "expected a call, got none")
    if expect.completes:
        return passed(f"answered with {len(calls)} call(s)")
    wanted = list(expect.calls)
    if len(calls) < len(wanted) or (len(calls) > len(wanted) and not expect.allow_extra_calls):
        return failed(MODEL, f"expected {len(wanted)} call(s), got {_describe_calls(calls)}")
    if expect.ordered:
        ok = all(call_matches(w, c) for w, c in zip(wanted, calls))
    else:
        ok = _assign(wanted, calls)
    if not ok:
        want = _short([f"{w.name}({dict(w.arguments)})" for w in wanted], 90)
        return failed(MODEL, f"expected {want}, got {_describe_calls(calls)}")
    return passed(f"{len(calls)} call(s) matched")


@check("WRONG_ANSWER", Judges.TEXT, {MODEL})
def check_expected_content(ev: CheckInput) -> Finding:
    """WRONG_ANSWER: the text answer does not mention what the tool result said."""
    wanted = ev.expect.content_contains_any
    message = ev.message
    if not wanted or message is None:
        return skipped("no content expectation")
    text = (message.content or "").lower()
    if any(w.lower() in text for w in wanted):
        return passed()
    return failed(MODEL, f"content {_short(message.content)} mentions none of {list(wanted)}")


def run_checks(ev: CheckInput, prefix: str = "") -> list[CheckResult]:
    """Every check on one exchange; a harness bug inside a check propagates (it is ours, not the engine's)."""
    return [c(ev, prefix) for c in CHECKS]


GAP_SEPARATOR = "; "  # between the declared gaps in an unsupported record's reason


@attrs.frozen
class Decision:
    """A case's outcome in one mode, as ``judge`` decides it from the checks. ``gaps``: on an unsupported one, the
    declared gaps it rests on (FEATURE -> WHY, as the engine or model spec words them); the reason words them too,
    for people."""

    verdict: Verdict
    blame: Blame | None
    reason: str
    gaps: dict[str, str] = attrs.Factory(dict)


def judge(results: list[CheckResult], unsupported: Mapping[str, str], features: Iterable[str]) -> Decision:
    """A case's outcome for one mode from its checks and the engine's declared gaps.

    error: the exchange itself failed (5xx, timeout, no server) on a valid request. unsupported: it failed and
    the case exercises a feature the engine spec declares unsupported (the reason is shown, never hidden), or it
    needs what the model lacks (``features.PRECONDITIONS``: a case on thinking, a model that does not think).
    """
    failures = [r for r in results if r.failed]
    if not failures:
        # Passing proves nothing where the model could not do what the case is about.
        lacking = {f: unsupported[f] for f in sorted(features) if f in PRECONDITIONS and f in unsupported}
        if lacking:
            return Decision(Verdict.UNSUPPORTED, None, GAP_SEPARATOR.join(worded_gaps(lacking)), lacking)
        return Decision(Verdict.PASS, None, "")
    first = failures[0]
    reason = f"{first.name}: {first.detail}"
    # A gap is a feature the case exercises, or the failing check itself (e.g. an engine known to send no ids).
    gaps = {f: unsupported[f] for f in sorted({*features, first.name}) if f in unsupported}
    if gaps:
        return Decision(Verdict.UNSUPPORTED, first.blame, GAP_SEPARATOR.join(worded_gaps(gaps)) + f" ({reason})", gaps)
    broken = next((r for r in failures if r.kind in EXCHANGE_FAILED), None)
    if broken is not None:
        return Decision(Verdict.ERROR, broken.blame, f"{broken.name}: {broken.detail}")
    return Decision(Verdict.FAIL, first.blame, reason)


def worded_gaps(gaps: Mapping[str, str]) -> list[str]:
    """Each declared gap as people read it, ``FEATURE: WHY``: in an unsupported record's reason, on a cell's page."""
    return [f"{feature}: {why}" for feature, why in gaps.items()]


def require_registered(names: Iterable[str], where: str) -> None:
    """UnknownCheck unless every one of ``names`` (checks that ``where`` names) is a registered check."""
    for name in names:
        try:
            registered(name)
        except UnknownCheck as exc:
            raise UnknownCheck(f"{where}: {exc}") from None


# An engine spec may declare a check's failure a gap (``judge``) by the check's name: a rename must not void it.
require_registered(CHECK_GAPS, "base.features.CHECK_GAPS")

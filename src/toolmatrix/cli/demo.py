"""``toolmatrix demo``: a first result in a minute, with no build and no weights. No model runs.

A stand-in engine (the fake server, with vLLM's same-generation evidence protocol) answers each case of the
library as a good model on a good engine would: calls made from the case's expectation, each argument a value its
matcher accepts, valid against the tool's schema (``_calls``). Over those answers lie a few named engine bugs, each a
class seen in real engines, and one mistake small models make. The suite runs against it under pytest, the matrix
page is built from the run, and the records are counted by blame: the engine bugs must come out ``engine`` (the
model's own text, which evidence reads, is right), the model's mistake ``model``, the rest pass. The records' repro
lines send to the stand-in's URL: ``toolmatrix demo --serve --port N`` starts it again there after the demo.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import yaml

try:  # the regular expression parser, read to spell a string a pattern matches
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # Python 3.11+ (typeshed: 3.10's names)
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

from toolmatrix.base.argtypes import positive_int
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import CommandExit
from toolmatrix.base.specs import read_yaml
from toolmatrix.judge.checks import value_matches
from toolmatrix.library.cases import CallExpectation, Case, Expectation, load_cases
from toolmatrix.matrix import build_matrix
from toolmatrix.records import Record, read_records
from toolmatrix.serving.registry import data_root
from toolmatrix.testing.fake import FakeServer, Reply

MODEL = "demo-no-model"  # the served name: the page's pair is demo-no-model@demo
ENGINE = "demo"  # the stand-in's own engine spec (``demo_data``): the page names it, not an engine it imitates
PROTOCOL_OF = "vllm"  # whose evidence protocol the stand-in speaks (return_token_ids): blame by evidence works
# The page's title (it adds "compatibility matrix"): a demo, and how its repro lines, which send to the stand-in's
# URL, work once the demo has ended and its stand-in with it.
TITLE = "DEMO, no model runs (before a repro line, start the stand-in again: {serve}): a stand-in engine's"

# category -> (fake fault, what it is): engine bugs laid over the right answers, each a class seen in real engines.
ENGINE_BUGS = {
    "unicode": ("ascii_escape", "non-ASCII argument text re-escaped as \\uXXXX"),
    "nested": ("double_encode", "nested objects and arrays sent as JSON strings"),
    "parallel": ("stream_drop_call", "streamed calls after the first are lost"),
}
MODEL_MISTAKE = ("types", "integer arguments written as strings, as small models do")
NO_ANSWER = "I do not know how to answer this."  # a case with no witness: the demo's model fails it
TEXT_ANSWER = "Happy to help; no tool is needed for that."


def _key(messages: Any, tools: Any, tool_choice: Any) -> str:
    """What tells a case's request from another's (cases alike in these differ in options: ``DemoModel._find``)."""
    return json.dumps([messages, tools or [], tool_choice], sort_keys=True)


# The right answer of a case is made from its expectation: each argument matcher gets a value the matcher itself
# accepts (``checks.value_matches``), read together with the tool's schema, so that the call passes the case's
# checks and the tool's JSON Schema. Nothing is guessed: where no such value is found the case is ``unanswered``.

def _calls(case: Case, expect: Expectation) -> list[tuple[str, dict]] | None:
    """Calls that meet ``expect`` (any call: the first tool's), or None where no witness is known."""
    wanted = expect.calls
    if expect.any_call and not wanted and case.tools:
        wanted = (CallExpectation(case.tool_names[0]),)
    calls = []
    for call in wanted:
        params = case.tool_schema(call.name)
        args = None if params is None else _arguments(call.arguments, params)
        if args is None:
            return None
        calls.append((call.name, args))
    return calls


def _arguments(matchers: Mapping[str, Any], params: dict) -> dict | None:
    """Arguments that meet every matcher (a key it says is ``absent`` or ``optional`` left out) and the tool's
    schema (its required keys filled from their own schemas), or None."""
    tool = _flat(params, params)
    properties, args = tool.get("properties") or {}, {}
    for key, matcher in matchers.items():
        if isinstance(matcher, dict) and len(matcher) == 1 and next(iter(matcher)) in ("absent", "optional"):
            continue  # a correct call may leave the key out
        value = _witness(matcher, properties.get(key) or {}, params)
        if value is _NONE or not value_matches(matcher, value):
            return None
        args[key] = value
    for key in tool.get("required") or ():
        if key not in args:
            value = _instance({}, properties.get(key) or {}, params)
            if value is _NONE:
                return None
            args[key] = value
    return args if jsonschema.Draft202012Validator(params).is_valid(args) else None


_NONE = object()  # no witness found


def _witness(matcher: Any, schema: dict, root: dict) -> Any:
    """A value ``matcher`` accepts where ``schema`` (the tool's, for that argument) is the parameter, or _NONE."""
    if isinstance(matcher, dict) and len(matcher) == 1:
        (op, arg), = matcher.items()
        if op == "any_of":
            return arg[0] if arg else _NONE
        if op in ("equals", "contains"):
            return arg
        if op == "regex":
            return _regex_witness(arg)
        if op == "schema":
            return _instance(arg, schema, root)
    return matcher  # a literal


def _instance(want: dict, tool: dict, root: dict, depth: int = 0) -> Any:
    """A value valid against both ``want`` (a matcher's JSON Schema, or {}) and ``tool`` (the tool's schema there,
    its ``$ref`` read in ``root``): a const or enum's first value, a pattern's witness, an object of the required
    and described properties, an array of the items each ``contains`` asks for, padded to ``minItems``; else _NONE."""
    if depth > 16 or not isinstance(want, dict) or not isinstance(tool, dict):
        return _NONE
    want, tool = _flat(want, root), _flat(tool, root)
    kind = _type(want)
    tool = _branch(tool, kind, root)
    for schema in (want, tool):
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
    kind = kind or _type(tool)
    if kind == "object":
        wanted, offered = want.get("properties") or {}, tool.get("properties") or {}
        out = {}
        for key in dict.fromkeys([*(want.get("required") or ()), *wanted, *(tool.get("required") or ())]):
            value = _instance(wanted.get(key) or {}, offered.get(key) or {}, root, depth + 1)
            if value is _NONE:
                return _NONE
            out[key] = value
        return out
    if kind == "array":
        item, offered = want.get("items") or {}, tool.get("items") or {}
        items = [_instance(_merge(item, one), offered, root, depth + 1) for one in want.get("_contains", ())]
        while len(items) < max(want.get("minItems", 0), tool.get("minItems", 0)):
            items.append(_instance(item, offered, root, depth + 1))
        return _NONE if any(value is _NONE for value in items) else items
    if kind == "string":
        pattern = want.get("pattern") or tool.get("pattern")
        return _regex_witness(pattern) if pattern else "x"
    if kind in ("integer", "number"):
        return max([1, *(int(s["minimum"]) for s in (want, tool) if isinstance(s.get("minimum"), (int, float)))])
    constants: dict[str | None, Any] = {"boolean": True, "null": None}
    return constants.get(kind, _NONE)


def _flat(schema: dict, root: dict) -> dict:
    """``schema`` with its ``$ref`` (into ``root``) and ``allOf`` merged in; every ``contains`` in ``_contains``."""
    seen = 0
    while "$ref" in schema and seen < 16:
        target: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target.get(part, {}) if isinstance(target, dict) and part else target
        schema, seen = _merge({k: v for k, v in schema.items() if k != "$ref"}, target), seen + 1
    out = {k: v for k, v in schema.items() if k not in ("allOf", "contains")}
    out["_contains"] = [*schema.get("_contains", ()), *([schema["contains"]] if "contains" in schema else [])]
    for part in schema.get("allOf") or ():
        out = _merge(out, _flat(part, root))
    return out


def _merge(a: dict, b: dict) -> dict:
    """Two schemas that must both hold, as one (their properties merged, their required and contains joined)."""
    out = {**a, **b}
    mine, theirs = a.get("properties") or {}, b.get("properties") or {}
    if mine or theirs:
        out["properties"] = {**mine, **{key: _merge(mine.get(key) or {}, value) for key, value in theirs.items()}}
    if a.get("required") or b.get("required"):
        out["required"] = list(dict.fromkeys([*(a.get("required") or ()), *(b.get("required") or ())]))
    out["_contains"] = [*a.get("_contains", ()), *b.get("_contains", ())]
    return out


def _type(schema: dict) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind is None and ("properties" in schema or "required" in schema):
        return "object"
    if kind is None and ("items" in schema or schema.get("_contains")):
        return "array"
    if kind is None and "pattern" in schema:
        return "string"
    return kind


def _branch(tool: dict, kind: str | None, root: dict) -> dict:
    """An ``anyOf``/``oneOf`` schema as its branch of type ``kind`` (else its first), merged with the rest."""
    branches = tool.get("anyOf") or tool.get("oneOf")
    if not branches:
        return tool
    flat = [_flat(b, root) for b in branches if isinstance(b, dict)]
    chosen = next((b for b in flat if kind is None or _type(b) == kind), flat[0] if flat else {})
    return _merge({k: v for k, v in tool.items() if k not in ("anyOf", "oneOf")}, chosen)


def _regex_witness(pattern: str) -> Any:
    """The shortest plain string the pattern's parse tree spells (each repeat its least, each alternation its
    first branch, each class its first member), if the pattern matches it; else _NONE."""
    try:
        text = _spell(sre_parse.parse(pattern), {})
    except (re.error, TypeError, ValueError):
        return _NONE
    return text if text is not None and re.search(pattern, text) else _NONE


_CATEGORY_CHAR = {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " ", "CATEGORY_WORD": "a", "CATEGORY_NOT_DIGIT": "a",
                  "CATEGORY_NOT_SPACE": "a", "CATEGORY_NOT_WORD": " "}


def _name(code: Any) -> str:
    """A regular expression parse tree's opcode by name (``LITERAL``, ``MAX_REPEAT``, ``CATEGORY_DIGIT``...)."""
    return getattr(code, "name", str(code))


def _spell(items: Any, groups: dict) -> str | None:
    """The string a parse tree spells (groups: what each numbered group spelled, for a backreference); None where
    it has a construct this does not spell (a conditional group)."""
    out = ""
    for op, arg in items:
        name = _name(op)
        if name == "LITERAL":
            out += chr(arg)
        elif name in ("NOT_LITERAL", "ANY"):
            out += "y" if arg == ord("x") else "x"
        elif name == "IN":
            char = _member(arg)
            if char is None:
                return None
            out += char
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            least, _, sub = arg
            part = _spell(sub, groups)
            if part is None:
                return None
            out += part * least
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            part = _spell(arg[-1] if name == "SUBPATTERN" else arg, groups)
            if part is None:
                return None
            if name == "SUBPATTERN" and arg[0] is not None:
                groups[arg[0]] = part
            out += part
        elif name == "BRANCH":
            part = _spell(arg[1][0], groups)
            if part is None:
                return None
            out += part
        elif name == "GROUPREF":
            out += groups.get(arg, "")
        elif name not in ("AT", "ASSERT", "ASSERT_NOT"):  # anchors and lookarounds spell nothing
            return None
    return out


def _member(members: list) -> str | None:
    """A character of a ``[...]`` class: its first member, or for a negated one a character it leaves out."""
    if members and _name(members[0][0]) == "NEGATE":
        excluded = {chr(arg) for op, arg in members[1:] if _name(op) == "LITERAL"}
        ranges = [(chr(arg[0]), chr(arg[1])) for op, arg in members[1:] if _name(op) == "RANGE"]
        return next((c for c in "xyz0 _" if c not in excluded and not any(lo <= c <= hi for lo, hi in ranges)), None)
    for op, arg in members:
        name = _name(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return _CATEGORY_CHAR.get(_name(arg))
    return None


def _small_model(calls: list[tuple[str, dict]]) -> tuple[tuple[str, dict], ...]:
    return tuple((name, {k: str(v) if type(v) is int else v for k, v in args.items()}) for name, args in calls)


class DemoModel:
    """The fake server's responder: finds the case a chat request belongs to (its first turn, or the follow-up
    that sends its calls' results back) and answers it right, but for the named bugs and mistake."""

    def __init__(self, cases: list[Case]):
        self.cases: dict[str, list[Case]] = collections.defaultdict(list)
        for case in cases:
            self.cases[_key(list(case.messages), list(case.tools), case.tool_choice)].append(case)

    def _find(self, body: dict) -> tuple[Case, bool] | None:
        """(the case, whether this is its follow-up turn), or None for a request of no case."""
        messages = body.get("messages") or []
        for length in range(len(messages), 0, -1):
            found = [c for c in self.cases.get(_key(messages[:length], body.get("tools"), body.get("tool_choice")), [])
                     if all(body.get(k) == v for k, v in c.options.items())]
            if found:
                return found[0], length < len(messages)
        return None

    def __call__(self, body: dict) -> Reply:
        found = self._find(body)
        if found is None:
            return Reply(content=NO_ANSWER)
        case, second_turn = found
        expect = case.followup.expect if second_turn and case.followup else case.expect
        faults = frozenset({ENGINE_BUGS[case.category][0]}) if case.category in ENGINE_BUGS else frozenset()
        if not (expect.calls or expect.any_call):
            return Reply(content=(expect.content_contains_any or (TEXT_ANSWER,))[0], faults=faults)
        calls = _calls(case, expect)
        if calls is None:
            return Reply(content=NO_ANSWER)
        return Reply(calls=_small_model(calls) if case.category == MODEL_MISTAKE[0] else tuple(calls), faults=faults)


def unanswered(cases: list[Case]) -> list[str]:
    """The cases the stand-in cannot answer: expected calls with no known witness."""
    return [c.id for c in cases if any((e.calls or e.any_call) and _calls(c, e) is None
                                       for e in (c.expect, *([c.followup.expect] if c.followup else [])))]


@attrs.frozen
class DemoRun:
    """One demo: where its results and page are, its records, how long it took, and what pytest said."""

    results: Path
    page: Path
    records: list[Record]
    seconds: float
    pytest_status: int
    pytest_stderr: str
    unanswered: list[str]
    port: int  # the stand-in's: the records' base URL, and so their repro lines, name it

    @property
    def serve(self) -> str:
        """The command that starts the stand-in again where the repro lines look for it."""
        return serve_command(self.port)


def serve_command(port: int) -> str:
    return f"toolmatrix demo --serve --port {port}"


def demo_data(out: Path) -> Path:
    """A data root for the demo's run (``out/data``): the library's cases and engine specs, linked, and beside them
    the stand-in's own spec ``demo``, which asks for evidence the way vLLM's spec does (the fake answers that
    protocol). So the run, its records and its page say ``demo``, never an engine that did not run."""
    library, root = data_root(), out / "data"
    shutil.rmtree(root, ignore_errors=True)  # a link left by an earlier demo may point at another checkout
    (root / "engines").mkdir(parents=True)
    (root / "cases").symlink_to(library / "cases", target_is_directory=True)
    for spec in (library / "engines").iterdir():
        (root / "engines" / spec.name).symlink_to(spec, target_is_directory=spec.is_dir())
    imitated = read_yaml(library / "engines" / f"{PROTOCOL_OF}.yaml").data
    stand_in = {"schema_version": 1, "id": ENGINE, "title": f"toolmatrix demo stand-in ({imitated['title']}-like)",
                "notes": f"The fake server of `toolmatrix demo`: no model runs. It answers {imitated['title']}'s "
                         "evidence protocol, so blame by evidence works as on a real engine.",
                "port": imitated["port"], "readiness": {"path": "/health"}, "evidence": imitated["evidence"]}
    (root / "engines" / f"{ENGINE}.yaml").write_text(yaml.safe_dump(stand_in, sort_keys=False), encoding="utf-8")
    return root


def run_demo(out: Path, jobs: int, port: int = 0) -> DemoRun:
    """The suite against the stand-in engine (at ``port``, 0: a free one) into ``out/results``, the page into
    ``out/matrix``. Raises OSError where the port cannot be listened on."""
    started = time.monotonic()
    cases = load_cases([data_root() / "cases"])
    results, page = out / "results", out / "matrix"
    out.mkdir(parents=True, exist_ok=True)
    # the stand-in's 'model' writes Hermes calls; its engine is the demo's own spec
    env = {**os.environ, "TOOLMATRIX_FAMILY": "hermes", "TOOLMATRIX_DATA": str(demo_data(out))}
    with FakeServer(DemoModel(cases), port=port) as server:
        port = urllib.parse.urlsplit(server.base_url).port or port
        pytest = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header",
             "-n", str(jobs), f"--base-url={server.base_url}", f"--engine={ENGINE}", "--launcher=external",
             f"--model={MODEL}", "--results-dir", str(results), "--no-matrix"],
            cwd=out, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    records = list(read_records(results)) if (results / "run.json").exists() else []
    if records:
        build_matrix([results], page, title=TITLE.format(serve=serve_command(port)))
    return DemoRun(results, page / "index.html", records, time.monotonic() - started, pytest.returncode,
                   pytest.stderr, unanswered(cases), port)


def serve(port: int) -> int:
    """``toolmatrix demo --serve``: the demo's stand-in alone at ``port``, until interrupted: the engine the repro
    lines of a demo's page and of ``toolmatrix show`` send to, after the demo itself has ended."""
    try:
        server = FakeServer(DemoModel(load_cases([data_root() / "cases"])), port=port)
    except OSError as exc:  # the port taken, most likely: a usage error that names it
        raise ToolmatrixError(f"--serve: cannot listen at 127.0.0.1:{port}: {exc}") from exc
    with server:
        print(f"toolmatrix demo: the stand-in engine (no model runs) is listening at {server.base_url} "
              f"(model {MODEL}); Ctrl-C stops it", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def report(run: DemoRun) -> str:
    """What the demo tells the user: it was a demo, the counts by blame, the bugs and mistake, where the page is."""
    verdicts = collections.Counter(r.verdict.value for r in run.records)
    blames = collections.Counter(r.blame.value for r in run.records if r.blame)
    answered = [r for r in run.records if r.case_id not in run.unanswered]
    lines = [f"toolmatrix demo: NO MODEL RUNS. A stand-in engine answered the case library right, but for the bugs "
             f"below; {len(run.records)} records in {run.seconds:.0f} s.",
             "  " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())),
             "  failures blamed: " + (", ".join(f"{n} {b}" for b, n in sorted(blames.items())) or "none")]
    for category, (_, what) in ENGINE_BUGS.items():
        lines.append(f"  engine bug on {category!r} cases: {what} -> {_blamed(answered, category)}")
    lines.append(f"  model mistake on {MODEL_MISTAKE[0]!r} cases: {MODEL_MISTAKE[1]} -> "
                 f"{_blamed(answered, MODEL_MISTAKE[0])}")
    if run.unanswered:
        lines.append(f"  {len(run.unanswered)} cases the stand-in has no answer for (they fail as the model's): "
                     f"{', '.join(run.unanswered)}")
    lines.append(f"The page: {run.page}")
    lines.append(f"Its repro lines (and toolmatrix show's) send to the stand-in at 127.0.0.1:{run.port}, which "
                 f"stopped with the demo; start it again first: {run.serve}")
    for blame, what in (("engine", "An engine bug and the model's own text"), ("model", "The model's mistake")):
        shown = next((r.case_id for category in (*ENGINE_BUGS, MODEL_MISTAKE[0]) for r in answered
                      if r.category == category and r.blame and r.blame.value == blame and r.evidence), None)
        if shown:
            lines.append(f"{what}: toolmatrix show {run.results} {shown}")
    lines.append("A real engine and model: pytest -n 2 --engine=llamacpp --model=qwen2.5-coder-0.5b --results-dir DIR")
    return "\n".join(lines)


def _blamed(records: list[Record], category: str) -> str:
    """The category's failures by blame, and how many of them evidence moved from what the wire alone said."""
    failed = [r for r in records if r.category == category and r.blame]
    blames = collections.Counter(r.blame.value for r in failed if r.blame)  # failed ones all have one
    moved = collections.Counter(r.wire_blame.value for r in failed if r.wire_blame and r.wire_blame != r.blame)
    said = "".join(f" ({n} of them {b} on the wire alone: the model's own text decided)" for b, n in moved.items())
    return (", ".join(f"{n} blamed {b}" for b, n in sorted(blames.items())) or "no failure") + said


def no_display() -> str | None:
    """Why no browser window can open here (Linux with neither DISPLAY nor WAYLAND_DISPLAY set), or None. Asked
    before ``webbrowser``, which would otherwise take the terminal over with a text browser where one is installed."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)"
    return None


def open_page(page: Path) -> str | None:
    """Open the page in a browser; where none can open, one line saying why and where the page is."""
    why = no_display() or (None if webbrowser.open(page.as_uri()) else "no browser could be started")
    if why is None:
        return None
    return (f"--open: {why}, so nothing was opened. The page is {page}: one file that works offline; open it in a "
            f"browser, on another machine if need be (copy the folder {page.parent}), or take a screenshot with a "
            f"headless browser (docs/results.md, 'Seeing the page').")


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.serve:
        return serve(args.port)
    try:
        run = run_demo(args.output.resolve(), args.jobs, args.port)
    except OSError as exc:  # the port taken, most likely: a usage error that names it
        raise ToolmatrixError(f"the stand-in cannot listen at 127.0.0.1:{args.port}: {exc}") from exc
    if not run.records:
        raise ToolmatrixError(f"the suite wrote no records (pytest exit {run.pytest_status}):\n"
                              f"{run.pytest_stderr[-2000:]}", status=CommandExit.NO)
    print(report(run))
    if args.open and (said := open_page(run.page)):
        print(said)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``toolmatrix demo [-o DIR] [-j N] [--open] [--port N]`` and ``toolmatrix demo --serve --port N``."""
    parser = subparsers.add_parser(
        "demo", help="a first result in a minute: the suite against a stand-in engine (no model runs, no build)",
        description="Run the suite against a stand-in engine that answers every case of the library right but for a "
                    "few named engine bugs and one small-model mistake, then build the matrix page: passes, each "
                    "engine bug with its evidence and the model's mistake, each blamed, and no other failure. A "
                    "demo: no model runs. --serve starts the stand-in alone again, for the page's repro lines.")
    parser.add_argument("-o", "--output", metavar="DIR", type=Path, default=Path("toolmatrix-demo"),
                        help="where the results (DIR/results), the page (DIR/matrix) and the stand-in's engine spec "
                             "(DIR/data) go (default: toolmatrix-demo)")
    parser.add_argument("-j", "--jobs", metavar="N", type=positive_int, default=2,
                        help="pytest-xdist workers (default 2)")
    parser.add_argument("--open", action="store_true",
                        help="open the page in a browser when done (where no browser can open, as on a machine with "
                             "no display, it says so and where the page is)")
    parser.add_argument("--port", metavar="N", type=port_number, default=0,
                        help="the port of the stand-in engine at 127.0.0.1 (default 0: a free one); the page's repro "
                             "lines name it")
    parser.add_argument("--serve", action="store_true",
                        help="run no suite: start the stand-in engine alone at --port and keep it until Ctrl-C, so "
                             "that a demo's repro lines, which send to it, work after the demo has ended")
    parser.set_defaults(func=_cmd_demo)


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (0: a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to 65535)")
    return value

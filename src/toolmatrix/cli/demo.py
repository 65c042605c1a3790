"""``toolmatrix demo``: a first result in a minute, with no build and no weights. No model runs.

A stand-in engine (the fake server, with vLLM's same-generation evidence protocol) answers each case of the
library as a good model on a good engine would: the calls the replay tier's witnesses give (``case_calls``). Over
those answers lie a few named engine bugs, each a class seen in real engines, and one mistake small models make.
The suite runs against it under pytest, the matrix page is built from the run, and the records are counted by
blame: the engine bugs must come out ``engine`` (the model's own text, which evidence reads, is right), the
model's mistake ``model``, the rest pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
import webbrowser
from pathlib import Path
from typing import Any

import attrs
import yaml

from toolmatrix.base.argtypes import positive_int
from toolmatrix.library.cases import CallExpectation, Case, Expectation, load_cases
from toolmatrix.matrix import build_matrix
from toolmatrix.serving.registry import data_root
from toolmatrix.replay.generate import case_calls
from toolmatrix.records import Record, read_records
from toolmatrix.base.specs import read_yaml
from toolmatrix.testing.fake import FakeServer, Reply

MODEL = "demo-no-model"  # the served name: the page's pair is demo-no-model@demo
ENGINE = "demo"  # the stand-in's own engine spec (``demo_data``): the page names it, not an engine it imitates
PROTOCOL_OF = "vllm"  # whose evidence protocol the stand-in speaks (return_token_ids): blame by evidence works
TITLE = "DEMO, no model runs: a stand-in engine's"  # the page adds "compatibility matrix"

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


def _calls(case: Case, expect: Expectation) -> list[tuple[str, dict]] | None:
    """Calls that meet ``expect`` (any call: the first tool's), or None where no witness is known."""
    if expect.any_call and not expect.calls and case.tools:
        expect = Expectation(calls=(CallExpectation(case.tool_names[0]),))
    return case_calls(attrs.evolve(case, expect=expect))


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


def run_demo(out: Path, jobs: int) -> DemoRun:
    """The suite against the stand-in engine into ``out/results``, the page into ``out/matrix``."""
    started = time.monotonic()
    cases = load_cases([data_root() / "cases"])
    results, page = out / "results", out / "matrix"
    out.mkdir(parents=True, exist_ok=True)
    # the stand-in's 'model' writes Hermes calls; its engine is the demo's own spec
    env = {**os.environ, "TOOLMATRIX_FAMILY": "hermes", "TOOLMATRIX_DATA": str(demo_data(out))}
    with FakeServer(DemoModel(cases)) as server:
        pytest = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-header",
             "-n", str(jobs), f"--base-url={server.base_url}", f"--engine={ENGINE}", "--launcher=external",
             f"--model={MODEL}", "--results-dir", str(results), "--no-matrix"],
            cwd=out, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    records = list(read_records(results)) if (results / "run.json").exists() else []
    if records:
        build_matrix([results], page, title=TITLE)
    return DemoRun(results, page / "index.html", records, time.monotonic() - started, pytest.returncode,
                   pytest.stderr, unanswered(cases))


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
    blames = collections.Counter(r.blame.value for r in failed)
    moved = collections.Counter(r.wire_blame.value for r in failed if r.wire_blame and r.wire_blame != r.blame)
    said = "".join(f" ({n} of them {b} on the wire alone: the model's own text decided)" for b, n in moved.items())
    return (", ".join(f"{n} blamed {b}" for b, n in sorted(blames.items())) or "no failure") + said


def _cmd_demo(args: argparse.Namespace) -> int:
    run = run_demo(args.output.resolve(), args.jobs)
    if not run.records:
        print(f"toolmatrix demo: the suite wrote no records (pytest exit {run.pytest_status}):\n"
              f"{run.pytest_stderr[-2000:]}", file=sys.stderr)
        return 1
    print(report(run))
    if args.open:
        webbrowser.open(run.page.as_uri())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``toolmatrix demo [-o DIR] [-j N] [--open]``."""
    parser = subparsers.add_parser(
        "demo", help="a first result in a minute: the suite against a stand-in engine (no model runs, no build)",
        description="Run the suite against a stand-in engine that answers the case library right but for a few "
                    "named engine bugs and one small-model mistake, then build the matrix page: a pass, an engine "
                    "bug with its evidence and a model mistake, each blamed. A demo: no model runs.")
    parser.add_argument("-o", "--output", metavar="DIR", type=Path, default=Path("toolmatrix-demo"),
                        help="where the results (DIR/results), the page (DIR/matrix) and the stand-in's engine spec "
                             "(DIR/data) go (default: toolmatrix-demo)")
    parser.add_argument("-j", "--jobs", metavar="N", type=positive_int, default=2,
                        help="pytest-xdist workers (default 2)")
    parser.add_argument("--open", action="store_true", help="open the page in a browser when done")
    parser.set_defaults(func=_cmd_demo)

"""Replay a fixture set through engines' parsers: one worker per engine, one record per fixture x chunking,
written as the live tier writes them (``DIR/ENGINE/results.jsonl`` and ``run.json``)."""

from __future__ import annotations

import functools
import itertools
import sys
from collections import deque
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import attrs

from toolmatrix.formats import Family, get_family
from toolmatrix.records import REPLAY, Posted, Record, RecordWriter, ReplayInfo, Run, RunEngine, RunModel
from toolmatrix.serving.registry import EngineSpec, ModelSpec, registry
from toolmatrix.serving.runinfo import Portable, program_name, toolmatrix_version

from . import feeder
from .adapters import Adapter, Support, adapter_for, replay_engines
from .fixtures import Fixture
from .judge import judge_replay
from .names import mode_of
from .protocol import WorkerClient


class Unsupported(Exception):
    """The engine refuses the fixture's parser at startup (the worker's ``unsupported`` answer): a cell with a
    reason, not a failure."""


@functools.cache
def _models() -> dict[str, ModelSpec]:
    """The registry by every name a fixture may give its model: registry id, or any weights repository, as the
    world names a model (``Qwen/Qwen3-8B``). Read and schema-checked once: per fixture it was a fifth of a replay's
    time."""
    models = registry().models
    names = {weights["repo"]: model for model in models.values() for weights in model.weights.values()
             if isinstance(weights, Mapping) and "repo" in weights}
    return {**names, **models}


@attrs.frozen
class ReasoningChoice:
    """The reasoning style a server configured for the fixture's model runs (None: no reasoning parser), and why:
    the record keeps the why beside the parser names."""

    style: str | None
    why: str


def thinking_evidence(fixture: Fixture, family: Family) -> str | None:
    """What in the fixture itself says a thinking model wrote it, or None: reasoning in its expected answer, the
    family's thinking opener in its generation prompt (open, or opened and closed with thinking off: the server
    runs its reasoning parser either way), or the family's thinking markers in its text."""
    if fixture.expected.reasoning:
        return "its expected answer holds reasoning"
    thinking = family.thinking
    if thinking is None:
        return None
    if fixture.generation_prompt and thinking.opens in fixture.generation_prompt:
        return f"its generation prompt holds {thinking.opens}"
    found = [marker for marker in (thinking.opens, thinking.closes) if marker and marker in fixture.text]
    return f"its text holds {found[0]}" if found else None


def reasoning_choice(fixture: Fixture) -> ReasoningChoice:
    """The reasoning parser's style as a server configured for the fixture's model runs it: the fixture's own
    style; else, where the fixture shows a thinking model wrote it, its registered model's style (by id or weights
    repository) or its family's (families.yaml ``thinking``: a Qwen3.5 writing Qwen3-Coder's calls after a
    prompt-opened ``<think>`` is served with ``--reasoning-parser qwen3`` though Qwen3-Coder does not think); else
    its registered model's (None where it does not think); else none. An outside fixture names no style: without
    its evidence read, a thinking model of a family whose registered models do not think got no reasoning parser,
    its ``</think>`` landed in content and engines failed that a real server reads right."""
    if fixture.reasoning_style is not None:
        return ReasoningChoice(fixture.reasoning_style, "the fixture names its reasoning style")
    family = get_family(fixture.family)
    model = _models().get(fixture.model)
    evidence = thinking_evidence(fixture, family)
    if model is not None and (model.reasoning or evidence is None):
        said = f"reasons in style {model.reasoning}" if model.reasoning else "does not think"
        return ReasoningChoice(model.reasoning, f"the registered model {model.id} {said}")
    if evidence is None:
        return ReasoningChoice(None, "nothing in the fixture says a thinking model wrote it")
    if family.thinking is None:
        return ReasoningChoice(None, f"{evidence}, but no {family.id} model thinks (families.yaml)")
    return ReasoningChoice(family.thinking.style,
                           f"{evidence}: {family.id}'s thinking models are served with style {family.thinking.style}")


def reasoning_style(fixture: Fixture) -> str | None:
    """The style of ``reasoning_choice``."""
    return reasoning_choice(fixture).style


def adapters(names: Iterable[str] | None = None) -> list[Adapter]:
    """Adapters by name: ``ENGINE`` at its pinned version or ``ENGINE@VERSION``."""
    specs = registry().engines
    return [adapter_for(specs[engine], at or None)
            for engine, _, at in (name.partition("@") for name in (names or replay_engines()))]


def unreplayable_engines() -> dict[str, EngineSpec]:
    """Engine specs that say why no adapter can replay their parser here (``replay.cannot_replay``), by id."""
    return {engine: spec for engine, spec in registry().engines.items() if spec.cannot_replay is not None}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value: the names and argument values of the expected calls."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def chat_template_kwargs(fixture: Fixture) -> dict[str, bool]:
    """The request's ``chat_template_kwargs`` as a client sends them: thinking on when the fixture's answer holds
    reasoning, off when it does not, under the family's own key (families.yaml ``thinking_key``: DeepSeek V3.1's
    template reads ``thinking``, Qwen3's ``enable_thinking``); nothing for a family whose template has no switch.
    Each worker hands them to its engine, which reads them as its server does."""
    key = get_family(fixture.family).thinking_key
    return {} if key is None else {key: fixture.expected.reasoning is not None}


def parse_request(adapter: Adapter, fixture: Fixture, chunkings: Iterable[str]) -> dict:
    """The worker request for one fixture: its text whole, and cut by each chunking."""
    family = get_family(fixture.family)
    choice = reasoning_choice(fixture)
    support = adapter.supports(fixture.family, choice.style)
    cut = feeder.engine_tokens(fixture, family, adapter.detok, support.tool_parser, support.reasoning_parser)
    # The engine's detokenization of all the ids is the non-streamed text too; the ids go along (vLLM's parsers and
    # the Harmony readers take them, and the engines that decode by themselves start from them).
    text = "".join(piece for piece, _ in cut.pieces) if cut.path is not None else fixture.text
    ids = [token for _, piece_ids in cut.pieces for token in piece_ids or ()] if cut.path is not None else None
    return {"op": "parse", "text": text, "token_ids": ids, "tools": list(fixture.tools),
            "tool_parser": support.tool_parser, "reasoning_parser": support.reasoning_parser,
            "tokenizer": str(cut.path or ""), "detok": cut.label, "parser_choice": _parser_choice(adapter, support, choice),
            "family": fixture.family, "chat_template_kwargs": chat_template_kwargs(fixture),
            "streams": {c: feeder.chunk(text, family, c, fixture.id, fixture.model, cut) for c in chunkings}}


def _parser_choice(adapter: Adapter, support: Support, choice: ReasoningChoice) -> str:
    """The record's word on why its reasoning parser is the one it is."""
    said = f"reasoning parser {support.reasoning_parser or 'none'}: {choice.why}"
    if choice.style and support.reasoning_parser is None:
        said += f" ({adapter.engine} has no reasoning parser for style {choice.style})"
    return said


def records_of(answer: dict, request: dict, adapter: Adapter, fixture: Fixture, version: str,
               run_id: str) -> Iterator[Record]:
    """Records of one fixture on one engine from the worker's answer to ``request``: the non-streamed parse, then
    each chunking's stream."""
    if "unsupported" in answer:
        raise Unsupported(f"{adapter.engine} {request['tool_parser']}: {answer['unsupported']}")
    family = get_family(fixture.family)
    said = [fixture.expected.content or "", fixture.expected.reasoning or "", *_strings(fixture.expected.tool_calls)]
    body = feeder.request_body(fixture.model, fixture.tools, (m for text in said for m in family.find_markers(text)))
    whole = feeder.nonstream_exchange(answer["nonstream"], body)

    def info(chunking: str) -> ReplayInfo:  # every chunking's text is the engine's detokenization: each says how
        return ReplayInfo(adapter.engine, version, request["tool_parser"] or "", chunking,
                          request["reasoning_parser"], request["detok"], fixture.family, fixture.source,
                          parser_choice=request["parser_choice"])

    yield judge_replay(fixture, family, whole, None, info("none"), run_id, "nonstream")
    for chunking in request["streams"]:
        exchange = feeder.stream_exchange(answer["streams"][chunking], body)
        yield judge_replay(fixture, family, exchange, whole, info(chunking), run_id, mode_of(chunking))


def replay_one(client: WorkerClient, adapter: Adapter, fixture: Fixture, chunkings: Iterable[str],
               run_id: str) -> list[Record]:
    """Records of one fixture on one engine, asked and judged in turn."""
    request = parse_request(adapter, fixture, chunkings)
    answer = client.request(request)
    return list(records_of(answer, request, adapter, fixture, str(client.hello.get("version", "")), run_id))


def replay_engine(adapter: Adapter, fixtures: list[Fixture], directory: Path,
                  chunkings: Iterable[str] = feeder.CHUNKINGS) -> dict[str, int]:
    """Every fixture the engine supports, into ``directory``; returns the verdict counts (plus ``skipped``).
    Fixtures go round the adapter's worker processes, each sent one ahead of its answer being judged, so workers
    parse while the host judges; records are written in fixture order."""
    run_id = f"replay-{adapter.engine}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}"
    started = datetime.now(timezone.utc).isoformat()
    portable = Portable.here(directory)
    writer = RecordWriter(directory, portable.text)
    skipped: dict[str, str] = {}
    # A refusal holds for the family with that tokenizer: a model's own tokenizer (harvested fixtures) may differ.
    refused: set[tuple[str, Path | None]] = set()
    replayed: list[str] = []
    chunkings = list(chunkings)
    sent: deque[tuple[WorkerClient, Fixture, tuple, dict]] = deque()
    with ExitStack() as stack:
        clients = [stack.enter_context(WorkerClient(adapter.python, adapter.worker, dict(adapter.env())))
                   for _ in range(adapter.replay.processes)]
        hello = clients[0].hello
        turns = itertools.cycle(clients)
        version = str(hello.get("version", ""))

        def judge_oldest() -> None:
            client, fixture, key, request = sent.popleft()
            answer = client.receive()
            if key in refused:  # sent before an earlier answer refused its family
                return
            try:
                records = list(records_of(answer, request, adapter, fixture, version, run_id))
            except Unsupported as exc:
                skipped.setdefault(fixture.family, str(exc))
                refused.add(key)
                return
            replayed.append(fixture.id)
            for record in records:
                writer.write(Posted.of(record))

        for fixture in fixtures:
            if not adapter.supports(fixture.family, None):  # first: a family of no parser is not tokenized
                skipped[fixture.family] = adapter.supports(fixture.family, None).reason
                continue
            key = (fixture.family, feeder.fixture_tokens(fixture, get_family(fixture.family)).path)
            if key in refused:
                continue
            request = parse_request(adapter, fixture, chunkings)
            client = next(turns)
            client.send(request)
            sent.append((client, fixture, key, request))
            if len(sent) > len(clients):
                judge_oldest()
        while sent:
            judge_oldest()
    engine = _replay_engine(adapter.engine, hello.get("version"), adapter.versions().split(), skipped)
    writer.close(_replay_run(run_id, engine, started, writer, portable, replayed))
    return {**writer.counts, "skipped_families": len(skipped)}


def record_cannot_replay(spec: EngineSpec, families: Iterable[str], directory: Path, reason: str | None = None,
                         version: str | None = None) -> dict[str, int]:
    """The column of an engine no adapter can replay here (its spec's ``replay.cannot_replay``, or ``reason``
    measured for one ``version``: a release that will not install or import): a run with no record and every
    fixture family skipped with that reason, so the page says why instead of leaving the engine off."""
    reason = reason or spec.cannot_replay
    if reason is None:
        raise ValueError(f"{spec.source.name}: engine {spec.id!r} has no replay.cannot_replay reason")
    started = datetime.now(timezone.utc)
    portable = Portable.here(directory)
    writer = RecordWriter(directory, portable.text)
    skipped = {family: reason for family in sorted(set(families))}
    writer.close(_replay_run(f"replay-{spec.id}-{started:%Y%m%dT%H%M%S}", _replay_engine(spec.id, version, [], skipped),
                             started.isoformat(), writer, portable, []))
    return {**writer.counts, "skipped_families": len(skipped)}


def _replay_engine(engine: str, version: str | None, versions: list[str], skipped: dict[str, str]) -> RunEngine:
    """run.json's engine of a replay: the release whose parsers read the fixtures (``versions``: its environment),
    and the families it did not replay, with why."""
    return RunEngine(engine, version, "replay", [], tier=REPLAY, versions=versions, skipped_families=skipped)


def _replay_run(run_id: str, engine: RunEngine, started: str, writer: RecordWriter, portable: Portable,
                replayed: list[str]) -> Run:
    """run.json of a replay: the rest beside ``engine`` is the same for every engine."""
    return Run(run_id, f"parser-replay@{engine.id}", engine, RunModel("parser-replay", "*", "parser-replay"),
               {"machine": "cpu", "note": "no model ran: parser replay"},
               started, datetime.now(timezone.utc).isoformat(), toolmatrix_version(), dict(writer.counts),
               command=[program_name(sys.argv[0]), *portable.data(sys.argv[1:])], cases=replayed)

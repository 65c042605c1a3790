"""Each engine's detokenization rule as the feeder applies it, on a small byte-level tokenizer (no engine env, no
cached tokenizer needed): which special tokens print, what happens to the stop token, the record's label, and a
fixture of no ids replayed as written. test_replay_detok_engines.py holds the rules against the engines' own code."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from toolmatrix.formats import get_family
from toolmatrix.replay import feeder
from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.fixtures import Expected, Fixture
from toolmatrix.serving.registry import load_engines

HARMONY = get_family("harmony")
SPECIALS = ["<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>", "<|return|>"]
TEXT = "<|channel|>final<|message|>Hi Zürich<|end|><|start|>assistant<|channel|>x<|message|>{}<|call|>"


def _tokenizer(folder: Path) -> Path:
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIALS)
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def _pieces(engine: str, tmp_path: Path, tool_parser: str) -> tuple[str, list, str]:
    path = _tokenizer(tmp_path / engine)
    ids = Tokenizer.from_file(str(path)).encode(TEXT).ids
    fixture = Fixture(f"{engine}.x", "harmony", "m", TEXT, (), Expected((), None, None), token_ids=tuple(ids),
                      tokenizer=str(path))
    cut = feeder.engine_tokens(fixture, HARMONY, adapter_for(load_engines()[engine]).detok, tool_parser, None)
    assert [i for _, piece_ids in cut.pieces for i in piece_ids] == ids  # every id goes along, silent ones too
    return "".join(text for text, _ in cut.pieces), list(cut.pieces), cut.label


def test_llamacpp_prints_no_control_token_but_the_forced_and_preserved_ones(tmp_path: Path) -> None:
    text, _, label = _pieces("llamacpp", tmp_path, "openai-gpt-oss-120b.jinja")
    assert text == TEXT.removesuffix("<|call|>")  # <|call|> is CONTROL: ""
    assert label.endswith("llamacpp detokenization: CONTROL tokens (GGUF types) skipped but <|channel|> <|message|> "
                          "<|start|> <|constrain|> <|end|>, stop token decoded")


def test_vllm_drops_the_stop_token_and_skips_specials_for_its_harmony_parser(tmp_path: Path) -> None:
    text, pieces, _ = _pieces("vllm", tmp_path, "openai")
    assert text == "finalHi Zürichassistantx{}"
    # a skipped token sends nothing: its id rides with the next token's text
    assert pieces[0][0] == "f" and len(pieces[0][1]) == 2


def test_sglang_keeps_specials_with_tools_and_gpt_oss_call(tmp_path: Path) -> None:
    assert _pieces("sglang", tmp_path, "gpt-oss")[0] == TEXT
    assert _pieces("lmdeploy", tmp_path, "gpt-oss")[0] == TEXT.removesuffix("<|call|>")


def test_a_fixture_without_ids_here_replays_its_text_as_written() -> None:
    fixture = Fixture("granite.x", "granite", "m", "<|tool_call|>[]", (), Expected((), None, None))
    cut = feeder.engine_tokens(fixture, get_family("granite"), adapter_for(load_engines()["sglang"]).detok,
                               "granite", None)
    assert cut.path is None and "".join(text for text, _ in cut.pieces) == fixture.text
    assert cut.label == "splitter:v1; no token ids: the text as written; the stop token's step without its id or text"
    assert cut.stop_step and cut.pieces[-1] == ("", None)

"""The feeder's text is the engine's own: each engine's detokenizer, run inside its own environment on a sample of
generated fixtures with special tokens (Qwen3 ``<think>`` and ``<tool_call>``, gpt-oss Harmony ending on
``<|call|>``, Llama 3.1, DeepSeek R1), gives the same pieces as the feeder's rule for that engine (``Adapter.detok``,
``replay/detok.py``): one id a step (the engine's empty steps left out), one step per token piece, and the
``random`` chunking's multi-token steps. Each engine's
detokenizer is primed with a real generation prompt, as its server primes it, where the feeder decodes unprimed.
A second set of the same fixtures ends on the turn's stop token (``<|im_end|>``, ``<|eot_id|>``...), so each
engine's stop-token handling is compared too.

The scripts in ``detok_engines/`` drive each engine's detokenizer as its server does (they say with which code).
llama.cpp is not here: its token-to-piece needs a GGUF vocabulary, which the replay harness does not load; Dynamo
neither: its Rust DecodeStream is reached only through its frontend, and the replay worker hands it the ids, so its
parser reads its own decoding, never the feeder's text. An engine whose environment is missing skips, with the
command that installs it, unless TOOLMATRIX_REQUIRE_ENGINES=1.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import attrs
import pytest

from toolmatrix.formats import get_family
from toolmatrix.replay import feeder
from toolmatrix.replay.adapters.base import Adapter, flag_value
from toolmatrix.replay.detok import load_tokenizer, stop_ids
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.generate import generate
from toolmatrix.replay.session import adapters, reasoning_style
from toolmatrix.replay.writers import TURNS
from toolmatrix.serving.registry import data_root

SCRIPTS = Path(__file__).with_name("detok_engines")
WORKERS = Path(feeder.__file__).with_name("adapters")
# A real generation prompt's tail per family: what the engines that prime their detokenizer are primed with.
PROMPTS = {"hermes": "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n",
           "harmony": "<|start|>user<|message|>Weather?<|end|><|start|>assistant",
           "llama3_json": "<|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n",
           "deepseek_v3": "<｜User｜>Weather?<｜Assistant｜>"}
ENGINES = ("vllm", "sglang", "lmdeploy", "mlxlm", "transformers")


@functools.cache
def _fixtures() -> list[Fixture]:
    """The families' variants (unicode, reasoning, parallel calls, text only...), each also ending on its stop token."""
    found = [f for f in generate([data_root() / "cases"], list(PROMPTS), every=1 << 62) if ".variant." in f.id]
    ended = [attrs.evolve(f, id=f"{f.id}+end", text=f.text + TURNS[f.family].end) for f in found
             if TURNS[f.family].end]
    return [f for f in found + ended if feeder.fixture_tokens(f, get_family(f.family)).path is not None]


def _runs(adapter: Adapter) -> tuple[list[dict], list[list[str]]]:
    """The engine script's runs (one per fixture and chunking) and the pieces the feeder makes of each."""
    runs, expected = [], []
    for fixture in _fixtures():
        family = get_family(fixture.family)
        support = adapter.supports(fixture.family, reasoning_style(fixture))
        if not support:
            continue
        cut = feeder.engine_tokens(fixture, family, adapter.detok, support.tool_parser, support.reasoning_parser)
        text = "".join(piece for piece, _ in cut.pieces)
        ids = [token for _, piece_ids in cut.pieces for token in piece_ids or ()]
        own = [t for _, piece_ids in feeder.fixture_tokens(fixture, family).pieces for t in piece_ids or ()]
        assert ids[:len(own)] == own and len(ids) - len(own) <= 1  # and the stop token's step a stream ends on
        prompt = load_tokenizer(cut.path).encode(PROMPTS[fixture.family], add_special_tokens=False).ids
        for chunking in ("id", "token", "random"):  # id: one id a step, the engine's "" steps left out
            pieces = feeder.chunk(text, family, chunking.replace("id", "token"), fixture.id, cut=cut)
            steps = [[token] for token in ids] if chunking == "id" else [piece_ids for _, piece_ids in pieces]
            runs.append({"prompt": prompt, "steps": steps, "tokenizer": str(cut.path),
                         "skip": adapter.detok.skips(support.tool_parser, support.reasoning_parser),
                         "stop": ids[-1] in stop_ids(cut.path), "tool_parser": support.tool_parser,
                         "id": f"{fixture.id} {chunking}"})
            expected.append([piece for piece, _ in pieces])
    return runs, expected


def _engine(name: str) -> Adapter:
    (adapter,) = adapters([name])
    if adapter.ready() is not None:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(adapter.ready())
        pytest.skip(adapter.ready())
    return adapter


# MLX-LM's streaming detokenizer sends a word once the next one starts; the replay worker feeds MLX the ids and its
# own detokenizer cuts the stream, so only the text must agree (specials and the stop token as the rule says).
TEXT_ONLY = {"mlxlm"}
# Where the engine's own loader decodes otherwise, as its server at the pinned version does, and the feeder follows
# the tokenizer.json: vLLM 0.32 loads the DeepSeek V3 folder through transformers 5's LlamaTokenizerFast
# (tokenizer_config.json's tokenizer_class), which replaces its ByteLevel decoder and sends "Ġis" for " is"
# (huggingface/transformers#45488; vLLM's fix, vllm-project/vllm#43336, is open). Some run of the family must still
# show it: when the pinned release decodes right, this entry goes.
DIFFERS = {("vllm", "deepseek_v3"): "Ġ"}


def _compare(engine: str, run: dict, got: list[str], want: list[str]) -> str | None:
    """Why the engine's pieces are not the feeder's (None: they agree as this engine must)."""
    if run["id"].endswith(" id"):  # one id a step: the "" steps (a held character, the stop token's) left out
        got, want = [piece for piece in got if piece], [piece for piece in want if piece]
    if engine in TEXT_ONLY:
        got, want = ["".join(got)], ["".join(want)]
    return None if got == want else f"engine {got!r} != feeder {want!r}"


@pytest.mark.parametrize("engine", ENGINES)
def test_the_engines_own_detokenizer_gives_the_feeders_pieces(engine: str) -> None:
    adapter = _engine(engine)
    runs, expected = _runs(adapter)
    assert len(runs) >= 60  # every family of the sample this engine parses, with and without the stop token
    wrong: list[str] = []
    shown: dict[str, bool] = {}
    for tokenizer in sorted({run["tokenizer"] for run in runs}):  # one script per tokenizer: it loads it once
        mine = [n for n, run in enumerate(runs) if run["tokenizer"] == tokenizer]
        job = {"tokenizer": tokenizer, "runs": [runs[n] for n in mine]}
        done = subprocess.run([str(adapter.python), str(SCRIPTS / f"{engine}_detok.py")], input=json.dumps(job),
                              capture_output=True, text=True, cwd=SCRIPTS, timeout=300,
                              env={**adapter.env(), "WORKERS": str(WORKERS)})
        assert done.returncode == 0, done.stderr[-3000:]
        answers = json.loads(done.stdout.strip().splitlines()[-1])
        assert len(answers) == len(mine)
        for n, got in zip(mine, answers):
            family = runs[n]["id"].split(".")[0]
            if (engine, family) in DIFFERS:
                shown[family] = shown.get(family, False) or any(DIFFERS[engine, family] in piece for piece in got)
            elif why := _compare(engine, runs[n], got, expected[n]):
                wrong.append(f"{runs[n]['id']}: {why}")
    assert not wrong, f"{len(wrong)} of {len(runs)} runs differ; first: {wrong[0]}"
    right = [family for family, seen in shown.items() if not seen]
    assert not right, f"{engine} now decodes {right} as the feeder does: drop their DIFFERS entry"


def test_vllm_skips_special_tokens_where_its_parsers_say() -> None:
    """The vLLM rule's ``kept_by`` is what vLLM's own parsers set: every tool parser engines/vllm.yaml maps, alone
    and with each reasoning parser it maps, asked with each offline tokenizer the server starts with."""
    adapter = _engine("vllm")
    tools = sorted({flag_value(args, adapter.replay.tool_flag) for args in adapter.spec.family_args.values()} - {None})
    reasonings = [None, *sorted({flag_value(args, adapter.replay.reasoning_flag)
                                 for args in adapter.spec.reasoning_args.values()} - {None})]
    paths = [str(feeder.tokenizer_dir(name) / "tokenizer.json") for name in sorted(set(feeder.TOKENIZERS.values()))]
    asked = [(tool, reasoning, path, "harmony" if tool == "openai" else "x")
             for tool in tools for reasoning in reasonings for path in paths]
    done = subprocess.run([str(adapter.python), str(SCRIPTS / "vllm_skips.py")], input=json.dumps(asked),
                          capture_output=True, text=True, cwd=SCRIPTS, timeout=600,
                          env={**adapter.env(), "WORKERS": str(WORKERS)})
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    started = {(tool, reasoning): skip for (tool, reasoning, _, _), skip in zip(asked, answers) if skip is not None}
    assert len({tool for tool, _ in started}) >= 10  # most parsers start with one of the offline tokenizers
    wrong = {key: skip for key, skip in started.items() if skip != adapter.detok.skips(*key)}
    assert not wrong, f"vLLM's skip_special_tokens differs from VLLMAdapter.detok for {wrong}"

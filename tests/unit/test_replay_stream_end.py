"""Streams end as each server ends them (issue 44, item 3): the generation's stop token is the last step of every
chunking, and each worker does with it what its server does at finish."""

from __future__ import annotations

import pytest

from toolmatrix.replay.adapters import adapter_for
from toolmatrix.replay.feeder import CHUNKINGS, tokenizer_path
from toolmatrix.replay.generate import generate
from toolmatrix.replay.protocol import WorkerClient
from toolmatrix.replay.session import parse_request
from toolmatrix.serving.registry import data_root, load_engines

ENGINES = ("sglang", "vllm", "lmdeploy", "mlxlm", "transformers", "dynamo")
IM_END = 151645  # Qwen3's <|im_end|>: the eos_token of its tokenizer_config.json, the Hermes family's end of turn
needs_qwen3 = pytest.mark.skipif(tokenizer_path("hermes") is None, reason="toolmatrix replay-install tokenizers")


def _fixture(name: str):
    family = name.split(".")[0]
    return next(f for f in generate([data_root() / "cases"], [family]) if f.id == name)


def _adapter(engine: str):
    return adapter_for(load_engines()[engine])


@needs_qwen3
@pytest.mark.parametrize("engine", ENGINES)
def test_every_chunking_ends_on_the_stop_token_in_its_own_token_step(engine: str) -> None:
    request = parse_request(_adapter(engine), _fixture("hermes.choose.time_not_weather.plain"), CHUNKINGS)
    assert request["token_ids"][-1] == IM_END
    for chunking, pieces in request["streams"].items():
        assert pieces[-1][1][-1] == IM_END, chunking
        assert "".join(text for text, _ in pieces) == request["text"], chunking
    # The stop token's step alone: "" where the server drops its text, transformers feeds its text to the parser.
    stop = ("<|im_end|>" if engine == "transformers" else "", [IM_END])
    assert request["streams"]["token"][-1] == stop and request["streams"]["special"][-1] == stop


@needs_qwen3
def test_a_truncated_generation_ends_on_its_last_token_and_llamacpp_keeps_its_own_ending() -> None:
    truncated = parse_request(_adapter("sglang"), _fixture("hermes.variant.truncated"), ["token"])
    assert IM_END not in truncated["token_ids"] and truncated["streams"]["token"][-1][0]
    untouched = parse_request(_adapter("llamacpp"), _fixture("hermes.choose.time_not_weather.plain"), ["token"])
    assert IM_END not in untouched["token_ids"]


def _streamed_arguments(answer: dict) -> dict[int, str]:
    arguments: dict[int, str] = {}
    for delta in answer["deltas"]:
        for call in delta.get("tool_calls") or []:
            arguments[call["index"]] = arguments.get(call["index"], "") + (call["function"].get("arguments") or "")
    return arguments


SGLANG = _adapter("sglang")


@pytest.mark.skipif(SGLANG.ready() is not None or tokenizer_path("deepseek_v3") is None,
                    reason=str(SGLANG.ready() or "toolmatrix replay-install tokenizers"))
def test_sglang_sends_deepseek_arguments_held_back_only_when_the_stop_step_comes_alone() -> None:
    """Triage E7: SGLang's DeepSeek V3 detector streams a call's arguments only when a later step arrives; with the
    call's closing tokens in the step that carries finish_reason it sends `{}` (serving_chat.py's flush and
    unstreamed-arguments check see nothing left to send). The server's own last step, the stop token alone ("" text),
    recovers them: the loss needs the stop token to share a step (speculative decoding, stream_interval > 1)."""
    request = parse_request(SGLANG, _fixture("deepseek_v3.choose.time_not_weather.plain"), ["token"])
    *body, stop = request["streams"]["token"]
    assert stop[0] == "" and len(stop[1]) == 1
    close = next(n for n, (text, _) in enumerate(body) if "```" in text)  # the call's closing tokens, one step
    closing = ("".join(text for text, _ in body[close:]), [i for _, ids in body[close:] for i in ids])
    alone = [*body[:close], closing, stop]
    shared = [*body[:close], (closing[0], closing[1] + stop[1])]
    with WorkerClient(SGLANG.python, SGLANG.worker, dict(SGLANG.env())) as client:
        answer = client.request({**request, "streams": {"alone": alone, "shared": shared}})
    assert _streamed_arguments(answer["streams"]["alone"]) == {0: '{"timezone": "europe/london"}'}
    assert _streamed_arguments(answer["streams"]["shared"]) == {0: "{}"}


LMDEPLOY = _adapter("lmdeploy")


@needs_qwen3
@pytest.mark.skipif(LMDEPLOY.ready() is not None, reason=str(LMDEPLOY.ready()))
def test_lmdeploy_parses_the_stop_step_without_its_id_and_one_more_output_with_the_finish() -> None:
    request = parse_request(LMDEPLOY, _fixture("hermes.choose.time_not_weather.plain"), ["token"])
    with WorkerClient(LMDEPLOY.python, LMDEPLOY.worker, dict(LMDEPLOY.env())) as client:
        answer = client.request(request)
    deltas = answer["streams"]["token"]["deltas"]
    assert len(deltas) == len(request["streams"]["token"]) + 1  # one delta per engine output, the finish's too
    assert _streamed_arguments(answer["streams"]["token"]) == {0: '{"timezone": "europe/london"}'}


def test_the_engines_that_end_streams_so_say_it_in_their_spec() -> None:
    assert {engine for engine, spec in load_engines().items()
            if spec.replay is not None and adapter_for(spec).detok.stop_step} == set(ENGINES)

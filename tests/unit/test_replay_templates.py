"""Generated fixtures are what the family's official chat template writes.

For every family whose ``Turn`` names a template, each generated fixture's expected answer is rendered as an
assistant message by that template through transformers' own chat-template function; the rendering minus the
generation prompt must equal the fixture's text plus the turn's end marker. The templates are llama.cpp's copies
(``models/templates/``), which the llama.cpp build puts beside its replay harness: without that build (README
command 1) the test skips, unless TOOLMATRIX_REQUIRE_ENGINES=1.
"""

from __future__ import annotations

import functools
import os

import attrs
import pytest

from toolmatrix.replay.adapters.llamacpp import TEMPLATES
from toolmatrix.replay.fixtures import Fixture
from toolmatrix.replay.generate import generate
from toolmatrix.replay.writers import TURNS
from toolmatrix.serving.registry import cache_dir, data_root

render_jinja_template = pytest.importorskip("transformers.utils.chat_template_utils").render_jinja_template

FOLDER = cache_dir() / "bin" / TEMPLATES  # where the llama.cpp build puts them (LlamaCppAdapter.bin_dir)
TEMPLATED = {family: turn.source.removeprefix("template:") for family, turn in TURNS.items()
             if turn.source.startswith("template:") and turn.unrendered is None}
# Fixtures that are no rendering, by design, each with why.
NOT_RENDERINGS = {
    "truncated": "cut off mid-call on purpose (max_tokens)",
    "call_in_think": "a turn of reasoning alone, after which each template renders an empty answer its own way",
}


@functools.cache
def _fixtures() -> list[Fixture]:
    return [f for f in generate([data_root() / "cases"], list(TEMPLATED)) if not f.source.startswith("probe:")]


def _skip_reason(fixture: Fixture) -> str | None:
    variant = fixture.source.removeprefix("generated:")
    if variant in NOT_RENDERINGS:
        return NOT_RENDERINGS[variant]
    if TURNS[fixture.family].history is not None and not variant.startswith("history_layout"):
        return "the model's generated layout: its history_layout variants are held to the template's"
    if fixture.family == "deepseek_v31" and fixture.expected.reasoning is not None:
        return "DeepSeek V3.1's template drops a past turn's reasoning"
    return None


def _assistant(fixture: Fixture) -> dict:
    calls = [{"id": f"call{i:05d}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
             for i, c in enumerate(fixture.expected.tool_calls)]
    message = {"role": "assistant", "content": fixture.expected.content or ""}
    if calls:
        message["tool_calls"] = calls
    if fixture.expected.reasoning is not None:  # Qwen3, GLM and MiniMax read reasoning_content; gpt-oss thinking
        message["reasoning_content"] = message["thinking"] = fixture.expected.reasoning
    return message


def _render(template: str, fixture: Fixture, messages: list[dict], thinking: bool, prompt: bool) -> str:
    # gpt-oss's template reads each tool's description; the fixtures' tools need not have one.
    tools = [{**t, "function": {"description": "", **t["function"]}} for t in fixture.tools]
    rendered, _ = render_jinja_template([messages], tools=tools or None, chat_template=template,
                                        add_generation_prompt=prompt, bos_token="<s>", eos_token="</s>",
                                        enable_thinking=thinking, thinking=thinking)
    return rendered[0]


def _completion(template: str, fixture: Fixture) -> str:
    """The template's rendering of the fixture's answer, less the conversation before it and the generation
    prompt's header. A template whose thinking-off header closes an empty reasoning block that its history leaves
    out (Gemma 4) is cut at its thinking-on header: the model writes the same after either."""
    user = [{"role": "user", "content": "Go."}]
    thinking = fixture.expected.reasoning is not None
    before = _render(template, fixture, user, thinking, False)
    full = _render(template, fixture, [*user, _assistant(fixture)], thinking, False)
    assert full.startswith(before), fixture.id
    rest = full[len(before):]
    for header_thinking in (thinking, True):
        header = _render(template, fixture, user, header_thinking, True)
        header = header[len(_render(template, fixture, user, header_thinking, False)):]
        if rest.startswith(header):
            return rest[len(header):]
    raise AssertionError(f"{fixture.id}: the template's generation header does not open its rendering: {rest!r}")


def _is_rendering(completion: str, fixture: Fixture) -> bool:
    """The completion is the fixture's text, then the turn's end marker, then at most the template's newline."""
    turn = TURNS[fixture.family]
    end = turn.end if fixture.expected.tool_calls else turn.text_end
    return any(completion == fixture.text + end + tail for tail in ("", "\n"))


def _ids() -> list[str]:
    return [f.id for f in _fixtures()]


@pytest.fixture(scope="module")
def templates() -> dict[str, str]:
    missing = [name for name in TEMPLATED.values() if not (FOLDER / name).is_file()]
    if missing:
        why = f"llama.cpp's templates are not beside the harness ({FOLDER}): toolmatrix install llamacpp"
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return {family: (FOLDER / name).read_text(encoding="utf-8") for family, name in TEMPLATED.items()}


def test_every_family_with_a_template_is_held_to_it_or_says_why() -> None:
    for family, turn in TURNS.items():
        assert turn.source.startswith(("template:", "https://")), family
    assert set(TEMPLATED) == {"hermes", "qwen3_coder", "llama3_json", "glm45", "glm47", "minimax_m2", "harmony",
                              "deepseek_v31", "gemma4"}


@pytest.mark.parametrize("fixture_id", _ids())
def test_a_generated_fixture_is_its_templates_rendering(fixture_id: str, templates: dict[str, str]) -> None:
    fixture = next(f for f in _fixtures() if f.id == fixture_id)
    reason = _skip_reason(fixture)
    if reason is not None:
        pytest.skip(reason)
    completion = _completion(templates[fixture.family], fixture)
    assert _is_rendering(completion, fixture), f"{completion!r} != {fixture.text!r}"


def test_probes_are_no_rendering(templates: dict[str, str]) -> None:
    """The held-apart forms are exactly what the templates never write: the test would hold nothing if a probe
    rendered the same."""
    probes = [f for f in generate([data_root() / "cases"], ["hermes", "llama3_json"])
              if f.source in ("probe:loose", "probe:python_tag")][:20]
    assert probes
    for fixture in probes:
        assert not _is_rendering(_completion(templates[fixture.family], fixture), fixture), fixture.id


def test_a_writer_that_strays_from_its_template_fails(templates: dict[str, str]) -> None:
    """A hand-written layout the template does not share (Llama 3.1's old ``<|python_tag|>``) is caught."""
    fixture = next(f for f in _fixtures() if f.family == "llama3_json" and f.source == "generated:plain")
    assert _is_rendering(_completion(templates["llama3_json"], fixture), fixture)
    strayed = attrs.evolve(fixture, text="<|python_tag|>" + fixture.text)
    assert not _is_rendering(_completion(templates["llama3_json"], strayed), strayed)


def test_harmony_generates_another_layout_than_its_template_writes(templates: dict[str, str]) -> None:
    """gpt-oss generates channel-first calls with ``<|constrain|>json``; its template writes a past call recipient
    first: the plain fixtures are the former, no rendering, and the ``history_layout`` variants the latter."""
    harmony = {f.id: f for f in _fixtures() if f.family == "harmony"}
    for fid in ("harmony.single.get_weather_paris.plain", "harmony.variant.call_first"):
        assert not _is_rendering(_completion(templates["harmony"], harmony[fid]), harmony[fid]), fid
    for fid in ("harmony.variant.history_layout", "harmony.variant.history_layout_call_first"):
        assert _is_rendering(_completion(templates["harmony"], harmony[fid]), harmony[fid]), fid

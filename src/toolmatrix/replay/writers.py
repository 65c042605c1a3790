"""Native-format writers: tool calls (and reasoning) written as each family's model writes them.

The inverse of ``formats``' reference parsers. A writer takes calls and a ``Style`` and returns the calls' raw text;
a ``Turn`` (``TURNS``) says how the family's official chat template lays the rest of an assistant turn around them:
reasoning, text before the calls, the turn's end marker. Where a template renders calls, writer and ``Turn`` equal
its rendering (tests/unit/test_replay_templates.py holds them so), unless the model generates another layout than
the template writes into a prompt's history (``Turn.history``: gpt-oss), where the writer is the generated form and
``Turn.history`` the template's; elsewhere ``Turn.source`` names the public page the format comes from.
``Style(loose=True)`` writes a layout no template writes: robustness probes only.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import attrs

Call = tuple[str, dict]


@attrs.frozen
class Style:
    """Knobs for the variants real models produce."""

    loose: bool = False
    """Extra whitespace and newlines inside and between markers (pretty-printed JSON, blank lines)."""


def _json(value: Any, style: Style, compact: bool = False) -> str:
    """Arguments as JSON: ``json.dumps``'s spacing (what templates' ``tojson`` writes), ``compact`` without spaces
    (gpt-oss's generated arguments), pretty-printed when loose."""
    if style.loose:
        return json.dumps(value, ensure_ascii=False, indent=2)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)


def _text_value(value: Any) -> str:
    """A value as XML-ish formats write it: strings bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _jinja_string(value: Any) -> str:
    """A value as a template's ``value | string`` prints it when it is no mapping or list: Python's ``str`` (so
    ``None``, ``True``), while mappings and lists go through ``tojson`` (Qwen3-Coder's template)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _py(value: Any) -> str:
    """A value as a Python literal (pythonic formats are read with ast.literal_eval)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid Python string literal
    return repr(value)


def hermes(calls: Sequence[Call], style: Style) -> str:
    gap = "\n\n" if style.loose else "\n"
    return "\n".join(f"<tool_call>{gap}{_json({'name': n, 'arguments': a}, style)}{gap}</tool_call>" for n, a in calls)


def qwen3_coder(calls: Sequence[Call], style: Style) -> str:
    nl = "\n\n" if style.loose else "\n"
    blocks = []
    for name, args in calls:
        params = "".join(f"<parameter={k}>\n{_jinja_string(v)}\n</parameter>{nl}" for k, v in args.items())
        blocks.append(f"<tool_call>{nl}<function={name}>{nl}{params}</function>{nl}</tool_call>")
    return "\n".join(blocks)


def llama3_json(calls: Sequence[Call], style: Style) -> str:
    # The official template writes one bare call for custom tools and refuses a second; <|python_tag|> belongs to
    # the built-in tools. The `; `-joined and tagged forms are probes (``llama3_tagged``).
    return "; ".join(_json({"name": n, "parameters": a}, style) for n, a in calls)


def llama3_tagged(calls: Sequence[Call], style: Style) -> str:
    """Llama 3.1 calls behind ``<|python_tag|>`` joined by ``; ``: a form engines accept, no template writes."""
    return "<|python_tag|>" + llama3_json(calls, style)


def pythonic(calls: Sequence[Call], style: Style) -> str:
    sep = ",\n  " if style.loose else ", "
    items = [f"{n}({', '.join(f'{k}={_py(v)}' for k, v in a.items())})" for n, a in calls]
    return f"[{sep.join(items)}]"


def llama4(calls: Sequence[Call], style: Style) -> str:
    return pythonic(calls, style)


def mistral_v3(calls: Sequence[Call], style: Style) -> str:
    return "[TOOL_CALLS] " + _json([{"name": n, "arguments": a} for n, a in calls], style)


def mistral_v11(calls: Sequence[Call], style: Style) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{_json(a, style)}" for n, a in calls)


def harmony(calls: Sequence[Call], style: Style) -> str:
    """A call as gpt-oss generates it: the channel before the recipient, then ``<|constrain|>json`` (the model
    output of OpenAI's Harmony guide and the gpt-oss model card, compact JSON included; formats.md 2.6). One call
    per completion: ``<|call|>`` is a stop token, so the generator never asks for two."""
    return "".join(f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>"
                   f"{_json(a, style, compact=True)}<|call|>" for n, a in calls)


def harmony_history(calls: Sequence[Call], style: Style) -> str:
    """A past call as gpt-oss's chat template (and openai-harmony's renderer) writes it into the prompt: the
    recipient before the channel, the content type without ``<|constrain|>``. Not what the model generates."""
    return "".join(f"<|start|>assistant to=functions.{n}<|channel|>commentary json<|message|>{_json(a, style)}<|call|>"
                   for n, a in calls)


_DS_BEGIN, _DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def deepseek_v3(calls: Sequence[Call], style: Style) -> str:
    items = [f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_json(a, style)}\n```<｜tool▁call▁end｜>"
             for n, a in calls]
    return _DS_BEGIN + "\n".join(items) + _DS_END


def deepseek_v31(calls: Sequence[Call], style: Style) -> str:
    items = [f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_json(a, style)}<｜tool▁call▁end｜>" for n, a in calls]
    return _DS_BEGIN + "".join(items) + _DS_END


def kimi_k2(calls: Sequence[Call], style: Style) -> str:
    items = [f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_json(a, style)}<|tool_call_end|>"
             for i, (n, a) in enumerate(calls)]
    return "<|tool_calls_section_begin|>" + "".join(items) + "<|tool_calls_section_end|>"


def _glm(calls: Sequence[Call], nl: str, join: str) -> str:
    blocks = []
    for name, args in calls:
        pairs = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{_text_value(v)}</arg_value>{nl}"
                        for k, v in args.items())
        blocks.append(f"<tool_call>{name}{nl}{pairs}</tool_call>")
    return join.join(blocks)


def glm45(calls: Sequence[Call], style: Style) -> str:
    return _glm(calls, "\n\n" if style.loose else "\n", "\n")


def glm47(calls: Sequence[Call], style: Style) -> str:
    # GLM-4.7's template writes calls with no separator between them.
    return _glm(calls, "\n", "\n") if style.loose else _glm(calls, "", "")


def minimax_m2(calls: Sequence[Call], style: Style) -> str:
    nl = "\n\n" if style.loose else "\n"
    invokes = []
    for name, args in calls:
        params = "".join(f'<parameter name="{k}">{_text_value(v)}</parameter>{nl}' for k, v in args.items())
        invokes.append(f'<invoke name="{name}">{nl}{params}</invoke>{nl}')
    return f"<minimax:tool_call>{nl}{''.join(invokes)}</minimax:tool_call>"


def _gemma4_value(value: Any) -> str:
    """A value as Gemma 4's template writes it: keys sorted (``dictsort``), strings quoted with ``<|"|>``, ``None``
    printed as Jinja prints it, booleans lower-case."""
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma4_value(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma4_value(v) for v in value) + "]"
    return "None" if value is None else json.dumps(value)


def gemma4(calls: Sequence[Call], style: Style) -> str:
    return "".join(f"<|tool_call>call:{n}{_gemma4_value(a)}<tool_call|>" for n, a in calls)


def granite(calls: Sequence[Call], style: Style) -> str:
    return "<|tool_call|>" + _json([{"name": n, "arguments": a} for n, a in calls], style)


def phi4_mini(calls: Sequence[Call], style: Style) -> str:
    return "functools" + _json([{"name": n, "arguments": a} for n, a in calls], style)


Writer = Callable[[Sequence[Call], Style], str]
WRITERS: dict[str, Writer] = {
    "hermes": hermes, "qwen3_coder": qwen3_coder, "llama3_json": llama3_json, "pythonic": pythonic,
    "llama4": llama4, "mistral_v3": mistral_v3, "mistral_v11": mistral_v11, "harmony": harmony,
    "deepseek_v3": deepseek_v3, "deepseek_v31": deepseek_v31, "kimi_k2": kimi_k2, "glm45": glm45, "glm47": glm47,
    "minimax_m2": minimax_m2, "gemma4": gemma4, "granite": granite, "phi4_mini": phi4_mini,
}


@attrs.frozen
class Turn:
    """How a family's official chat template lays out an assistant turn around its calls."""

    source: str
    """``template:FILE``: the official template, as llama.cpp's models/templates/ keeps it, renders calls and the
    fixtures equal its rendering; otherwise the public page the format comes from (and why no template)."""
    end: str = ""
    """The marker the model ends a calling turn with (its stop token). Engines leave it out of the text, so the
    fixture text stops before it; the template test puts it back."""
    text_end: str = attrs.field(default=attrs.Factory(lambda turn: turn.end, takes_self=True))
    """The end of a turn without calls, where it is not ``end`` (Gemma 4 ends a call with ``<|tool_response>``)."""
    lead: str = ""
    """What every turn opens with after the generation prompt (GLM-4.5: a newline)."""
    text_gap: str | None = "\n\n"
    """Between text and the calls; None where the template writes no text before calls."""
    gap_always: bool = False
    """The gap is written with no text too (MiniMax-M2)."""
    think: tuple[str, str] | None = None
    """Reasoning's opening and closing markers, the whitespace the template puts around them included."""
    prompt_opens_think: bool = False
    """With thinking on, the generation prompt already ends with the opening marker: the model starts inside it."""
    always_reasons: bool = False
    """The model reasons before every answer (gpt-oss, MiniMax-M2): a fixture without reasoning is a variant."""
    prompt_tail: str = ""
    """The generation prompt's last text, which an answer's first message does not repeat (Harmony's
    ``<|start|>assistant``)."""
    one_call: bool = False
    """The template writes one call a turn (Llama 3.1 refuses a second; Harmony's ``<|call|>`` ends the turn)."""
    text_after: bool = False
    """The template writes a message's text after its calls (Gemma 4), not before."""
    unrendered: str | None = None
    """Why the fixtures of a family with a template are not held to its rendering."""
    history: Writer | None = None
    """Where the template writes a past call in another layout than the model generates (gpt-oss), that layout's
    writer: the fixtures are the generated form, and the ``history_layout`` variants hold the template's."""


_QWEN_THINK = ("<think>\n", "\n</think>\n\n")
_LLAMA = "https://www.llama.com/docs/model-cards-and-prompt-formats/"
TURNS: dict[str, Turn] = {
    "hermes": Turn("template:Qwen-Qwen3-0.6B.jinja", "<|im_end|>", text_gap="\n", think=_QWEN_THINK),
    "qwen3_coder": Turn("template:Qwen3-Coder.jinja", "<|im_end|>"),
    "llama3_json": Turn("template:meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>", text_gap=None,
                        one_call=True),
    "pythonic": Turn(f"{_LLAMA}llama3_2/ (pythonic zero-shot calls; llama.cpp's 3.2 template asks for JSON)"),
    "llama4": Turn(f"{_LLAMA}llama4/ (no Llama 4 template among llama.cpp's)"),
    "mistral_v11": Turn("template:Mistral-Small-3.2-24B-Instruct-2506.jinja", "</s>",
                        unrendered="the template writes a past call with the client's [CALL_ID]; whether the model "
                                   "writes one in a fresh call is not verified, so the writer writes none"),
    "harmony": Turn("template:openai-gpt-oss-120b.jinja", text_gap=None, think=("<|channel|>analysis<|message|>", "<|end|>"),
                    always_reasons=True, prompt_tail="<|start|>assistant", one_call=True, history=harmony_history),
    "deepseek_v3": Turn("https://huggingface.co/deepseek-ai/DeepSeek-R1-0528 (model card's tool-call format)",
                        "<｜end▁of▁sentence｜>", text_gap="", think=_QWEN_THINK, always_reasons=True),  # R1 always thinks
    "deepseek_v31": Turn("template:deepseek-ai-DeepSeek-V3.1.jinja", "<｜end▁of▁sentence｜>", text_gap="",
                         think=("<think>", "</think>"), prompt_opens_think=True),
    "kimi_k2": Turn("template:Kimi-K2-Instruct.jinja", "<|im_end|>",
                    unrendered="transformers' sandboxed Jinja refuses the template's list.append"),
    "glm45": Turn("template:GLM-4.6.jinja", lead="\n", text_gap="\n", think=("<think>", "</think>\n")),
    "glm47": Turn("template:GLM-4.7-Flash.jinja", text_gap="", think=("<think>", "</think>"), prompt_opens_think=True),
    "minimax_m2": Turn("template:MiniMax-M2.jinja", "[e~[", text_gap="\n", gap_always=True,
                       think=("<think>\n", "\n</think>\n\n"), prompt_opens_think=True, always_reasons=True),
    "gemma4": Turn("template:google-gemma-4-31B-it.jinja", "<|tool_response>", text_end="<turn|>", text_gap=None,
                   think=("<|channel>thought\n", "\n<channel|>"), text_after=True),
    "granite": Turn("https://huggingface.co/ibm-granite/granite-3.3-2b-instruct (model card: <|tool_call|> + a "
                    "JSON list; its template renders no calls)"),
    "phi4_mini": Turn("https://huggingface.co/microsoft/Phi-4-mini-instruct (model card: functools[...])"),
}


def final_text(family: str, text: str) -> str:
    """Plain answer text as the family writes it outside a call (Harmony puts it on the final channel)."""
    if family == "harmony":
        return f"<|start|>assistant<|channel|>final<|message|>{text}<|return|>"
    return text


def answer(family: str, calls: Sequence[Call], content: str | None = None, reasoning: str | None = None,
           write: Writer | None = None, style: Style = Style()) -> str:
    """One assistant turn as the family's model writes it after the generation prompt: reasoning, text, then the
    calls (``write``, default the family's writer), laid out as ``TURNS`` says, without the end marker."""
    turn = TURNS[family]
    if not calls:
        text = "" if content is None else final_text(family, content)
    else:
        text = (write or WRITERS[family])(calls, style)
        if content or turn.gap_always:
            if turn.text_gap is None:
                raise ValueError(f"{family}: its template writes no text before calls")
            text = f"{content or ''}{turn.text_gap}{text}"
    if reasoning is not None:
        if turn.think is None:
            raise ValueError(f"{family}: the family does not reason")
        opener, closer = turn.think
        text = f"{'' if turn.prompt_opens_think else opener}{reasoning}{closer}{text}"
    return turn.lead + text.removeprefix(turn.prompt_tail)

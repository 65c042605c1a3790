"""Native-format writers: tool calls (and reasoning) written as each family's model writes them.

The inverse of ``formats``' reference parsers, from the literal examples of reference/formats.md. A writer takes
calls and a ``Style`` (how loosely the model spaced its markers) and returns raw text; reasoning goes in front
the family's own way. Families with no writer here are listed by ``WRITERS`` not holding them.
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


def _json(value: Any, style: Style) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2 if style.loose else None)


def _text_value(value: Any) -> str:
    """A value as XML-ish formats write it: strings bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
        params = "".join(f"<parameter={k}>\n{_text_value(v)}\n</parameter>{nl}" for k, v in args.items())
        blocks.append(f"<tool_call>{nl}<function={name}>{nl}{params}</function>{nl}</tool_call>")
    return "\n".join(blocks)


def llama3_json(calls: Sequence[Call], style: Style) -> str:
    body = "; ".join(_json({"name": n, "parameters": a}, style) for n, a in calls)
    return f"<|python_tag|>{body}"


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
    # One call per completion: <|call|> is a stop token (formats.md 2.6); the generator never asks for two.
    return "".join(f"<|start|>assistant<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>"
                   f"{_json(a, style)}<|call|>" for n, a in calls)


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


def _glm(calls: Sequence[Call], nl: str) -> str:
    blocks = []
    for name, args in calls:
        pairs = "".join(f"<arg_key>{k}</arg_key>{nl}<arg_value>{_text_value(v)}</arg_value>{nl}"
                        for k, v in args.items())
        blocks.append(f"<tool_call>{name}{nl}{pairs}</tool_call>")
    return "\n".join(blocks)


def glm45(calls: Sequence[Call], style: Style) -> str:
    return _glm(calls, "\n\n" if style.loose else "\n")


def glm47(calls: Sequence[Call], style: Style) -> str:
    return _glm(calls, "\n" if style.loose else "")


def minimax_m2(calls: Sequence[Call], style: Style) -> str:
    nl = "\n\n" if style.loose else "\n"
    invokes = []
    for name, args in calls:
        params = "".join(f'<parameter name="{k}">{_text_value(v)}</parameter>{nl}' for k, v in args.items())
        invokes.append(f'<invoke name="{name}">{nl}{params}</invoke>{nl}')
    return f"<minimax:tool_call>{nl}{''.join(invokes)}</minimax:tool_call>"


def _gemma4_value(value: Any) -> str:
    if isinstance(value, str):
        return f'<|"|>{value}<|"|>'
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma4_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma4_value(v) for v in value) + "]"
    return json.dumps(value)


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


def think_wrap(style_key: str, reasoning: str, rest: str) -> str:
    """``rest`` preceded by ``reasoning`` the way a model of that reasoning style writes it."""
    if style_key == "harmony":
        return f"<|channel|>analysis<|message|>{reasoning}<|end|>{rest}"
    if style_key == "gemma4":
        return f"<|channel>thought\n{reasoning}<channel|>{rest}"
    return f"<think>\n{reasoning}\n</think>\n\n{rest}"


def final_text(family: str, text: str) -> str:
    """Plain answer text as the family writes it outside a call (Harmony puts it on the final channel)."""
    if family == "harmony":
        return f"<|start|>assistant<|channel|>final<|message|>{text}<|return|>"
    return text

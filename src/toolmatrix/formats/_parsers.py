"""The reference parsers by name; `families.yaml` refers to them by these names.

Each entry is a generic reader configured with the format's tokens (formats.md section in brackets).
"""

from __future__ import annotations

import re
from typing import Any

from ._brace import BraceArguments
from ._items import ItemSpec, SectionSpec, items, sections
from ._json_calls import JsonSpec, json_blocks
from ._model import ParsedCall, ParseResult
from ._pythonic import parse_pythonic, parse_tool_code
from ._scan import Parser
from ._tags import TagArguments

_hermes = json_blocks(  # [2.1], Granite 4 [2.10]
    JsonSpec(opener=re.compile(r"<tool_call>"), closer="</tool_call>", closer_required=True)
)


def _chain(*parsers: Parser) -> Parser:
    """Run parsers one after another, each on the content the previous one left."""

    def parse(text: str, tools: list[dict[str, Any]] | None = None) -> ParseResult:
        calls: list[ParsedCall] = []
        errors: list[str] = []
        for parser in parsers:
            result = parser(text, tools)
            calls += result.calls
            errors += result.errors
            text = result.content
        return ParseResult(tuple(calls), text, tuple(errors))

    return parse


def _tag_item(head: str, close: str, arg_open: str, arg_close: str) -> ItemSpec:
    """A call whose arguments are tags around raw text."""
    return ItemSpec(
        head=re.compile(head),
        tail=re.compile(r"\s*" + re.escape(close)),
        end_token=close,
        decode=TagArguments(re.compile(arg_open), arg_close, close),
    )


def _brace_item(opener: str, close: str, quote: str) -> ItemSpec:
    return ItemSpec(
        head=re.compile(re.escape(opener) + r"\s*call:(?P<name>[^\s{<]+)"),
        tail=re.compile(r"\s*" + re.escape(close)),
        end_token=close,
        decode=BraceArguments(quote),
    )


def _deepseek(head: str) -> Parser:
    """[2.7] V3 and V3.1 differ only in the item header (and V3's ```json fence)."""
    end = "<｜tool▁call▁end｜>"
    return sections(
        SectionSpec(
            opener=re.compile("<｜tool▁calls▁begin｜>"),
            closer=re.compile("<｜tool▁calls▁end｜>"),
            item=ItemSpec(re.compile(head), re.compile(r"\s*(?:```)?\s*" + end), end),
        )
    )


_HARMONY_RECIPIENT = r"(?:<\|start\|>[^<]*?)?(?:<\|channel\|>[^<]*?)?to=functions\."
# Only whitespace may separate the name from the rest of the header (` code`, ` <|constrain|>json`):
# a name class overlapping what follows made the regex backtrack quadratically on long runs.
_HARMONY_HEADER = r"(?P<name>[^\s<]+)(?:\s[^<]*)?(?:<\|(?:channel|constrain)\|>[^<]*)*<\|message\|>"

PARSERS: dict[str, Parser] = {
    "hermes": _hermes,
    "llama3_json": json_blocks(  # [2.3] the bare form counts only at the start of the text
        JsonSpec(opener=re.compile(r'<\|python_tag\|>|\A\s*(?=\{\s*"name"\s*:)'), separator=";")
    ),
    # toolmatrix's Qwen2.5-Coder template: one bare call object per line, each at the start of a line
    "json_lines": json_blocks(JsonSpec(opener=re.compile(r'^[ \t]*(?=\{\s*"name"\s*:)', re.MULTILINE))),
    "mistral_v3": json_blocks(JsonSpec(opener=re.compile(r"\[TOOL_CALLS\]"))),  # [2.5]
    "granite": json_blocks(  # [2.10] 3.0 and 3.1
        JsonSpec(opener=re.compile(r"<\|tool_call\|>|<tool_call>"), closer="</tool_call>")
    ),
    "phi4_mini": json_blocks(  # [2.13] vLLM and SGLang spellings
        JsonSpec(opener=re.compile(r"functools(?=\s*\[)|<\|tool_call\|>"), closer="<|/tool_call|>")
    ),
    "pythonic": parse_pythonic,  # [2.3] Llama 3.2, [2.4] Llama 4, [2.11] Gemma 3 vLLM template
    "gemma3": _chain(_hermes, parse_tool_code, parse_pythonic),  # [2.11] and the shipped template
    "mistral_v11": items(  # [2.5]; `[CALL_ID]` is an unverified variant
        re.compile(r"\[TOOL_CALLS\]"),
        ItemSpec(
            head=re.compile(
                r"\[TOOL_CALLS\]\s*(?P<name>[^\s\[\]{]+)\s*(?:\[CALL_ID\]\s*(?P<id>[^\s\[\]]+)\s*)?\[ARGS\]"
            ),
            tail=re.compile(""),
        ),
    ),
    "harmony": items(  # [2.6] recipient on the channel, in the role header, or on analysis
        re.compile(_HARMONY_RECIPIENT),
        ItemSpec(
            head=re.compile(_HARMONY_RECIPIENT + _HARMONY_HEADER),
            tail=re.compile(r"\s*<\|call\|>"),
            end_token="<|call|>",
        ),
    ),
    "deepseek_v3": _deepseek(
        r"<｜tool▁call▁begin｜>\s*(?:function\s*)?<｜tool▁sep｜>\s*(?P<name>[^\s<]+)\s*(?:```json)?"
    ),
    "deepseek_v31": _deepseek(r"<｜tool▁call▁begin｜>\s*(?P<name>[^\s<]+)\s*<｜tool▁sep｜>"),
    "deepseek_v32": sections(  # [2.7] DSML; V4 says tool_calls
        SectionSpec(
            opener=re.compile("<｜DSML｜(?:function_calls|tool_calls)>"),
            closer=re.compile("</｜DSML｜(?:function_calls|tool_calls)>"),
            item=_tag_item(
                r'<｜DSML｜invoke\s+name="(?P<name>[^"]+)"\s*>',
                "</｜DSML｜invoke>",
                r'<｜DSML｜parameter\s+name="(?P<key>[^"]*)"(?:\s+string="(?P<string>true|false)")?\s*>',
                "</｜DSML｜parameter>",
            ),
        )
    ),
    "kimi_k2": sections(  # [2.8] the id `functions.NAME:IDX` is returned as the call id
        SectionSpec(
            opener=re.compile(r"<\|tool_calls?_section_begin\|>"),
            closer=re.compile(r"<\|tool_calls?_section_end\|>"),
            item=ItemSpec(
                head=re.compile(
                    r"<\|tool_call_begin\|>\s*(?P<id>(?:functions\.)?(?P<name>[^\s<:]+)(?::\d+)?)"
                    r"\s*<\|tool_call_argument_begin\|>"
                ),
                tail=re.compile(r"\s*<\|tool_call_end\|>"),
                end_token="<|tool_call_end|>",
            ),
        )
    ),
    "glm4": items(  # [2.9] 4.5/4.6 put newlines between the tags, 4.7 does not
        re.compile(r"<tool_call>"),
        _tag_item(
            r"<tool_call>\s*(?P<name>[^\s<]+)",
            "</tool_call>",
            r"<arg_key>(?P<key>[^<]*)</arg_key>\s*<arg_value>",
            "</arg_value>",
        ),
    ),
    "qwen3_coder": sections(  # [2.2] models sometimes omit the opening <tool_call>
        SectionSpec(
            opener=re.compile(r"<tool_call>"),
            closer=re.compile(r"</tool_call>"),
            item=_tag_item(
                r"<function=(?P<name>[^>\n]+)>", "</function>", r"<parameter=(?P<key>[^>\n]+)>", "</parameter>"
            ),
        ),
        bare=re.compile(r"<function="),
    ),
    "minimax_m2": sections(  # [2.13]
        SectionSpec(
            opener=re.compile(r"<minimax:tool_call>"),
            closer=re.compile(r"</minimax:tool_call>"),
            item=_tag_item(
                r'<invoke\s+name="(?P<name>[^"]+)"\s*>',
                "</invoke>",
                r'<parameter\s+name="(?P<key>[^"]*)"\s*>',
                "</parameter>",
            ),
        )
    ),
    "gemma4": items(re.compile(r"<\|tool_call>"), _brace_item("<|tool_call>", "<tool_call|>", '<|"|>')),  # [2.12]
    "functiongemma": items(  # [2.11]
        re.compile(r"<start_function_call>"), _brace_item("<start_function_call>", "<end_function_call>", "<escape>")
    ),
}

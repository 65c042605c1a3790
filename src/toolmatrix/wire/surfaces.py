"""The API surfaces a case is sent over: Chat Completions, OpenAI's Responses API, Anthropic's Messages API.

The case library and the runner speak Chat Completions. A surface translates a chat request into its own wire
form, faithfully (tools, ``tool_choice``, parallel calls, multi-turn calls and results joined by their ids), and
reads its answers, whole or streamed, back into the one ``Message`` every check reads, as that surface's official
client reads them. What only a surface has is judged here for the checks: its stream's grammar and its stop words.
No I/O here: ``client`` sends, ``checks`` judge.
"""

from __future__ import annotations

from toolmatrix.wire.base import CHAT, MESSAGES, RESPONSES, Surface
from toolmatrix.wire.chat import Chat
from toolmatrix.wire.messages import Messages
from toolmatrix.wire.responses import Responses

__all__ = ["CHAT", "MESSAGES", "RESPONSES", "SURFACES", "Surface", "surface"]

SURFACES: dict[str, Surface] = {s.id: s for s in (Chat(), Responses(), Messages())}


def surface(api: str) -> Surface:
    return SURFACES[api]

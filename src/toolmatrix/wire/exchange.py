"""One request and its answer, captured raw, and read back into one message by its surface's reader.

No I/O here: ``client`` fills an ``Exchange``; ``checks`` read it. Streams are kept chunk by chunk, exactly as
parsed from the wire, so a check can look at the deltas and a person can read them later.
"""

from __future__ import annotations

from typing import Any

import attrs

from toolmatrix.wire.answer import Cut, Message
from toolmatrix.wire.surfaces import surface

Mode = str  # "nonstream" | "stream"
MODES: tuple[Mode, ...] = ("nonstream", "stream")


@attrs.frozen
class Exchange:
    """A request and what came back: a JSON body, a list of stream chunks, or an error."""

    mode: Mode
    request: dict[str, Any]
    http_status: int | None = None  # None when nothing came back
    response: Any = None  # parsed JSON body (non-stream, or the error body)
    chunks: tuple[Any, ...] = ()  # every stream chunk in order, parsed JSON (or the raw line if not JSON)
    error: str | None = None  # transport problem: timeout, refused connection, broken stream, answer over the limit
    latency_s: float = 0.0
    raw_text: str | None = None  # body text when it was not JSON
    cut: Cut | None = None  # the answer was longer than the client keeps
    broken_off: bool = False  # the engine began an answer (status and headers) and closed it unfinished
    api: str = "chat"  # the surface it went over (see ``surfaces``)

    @property
    def ok(self) -> bool:
        return self.error is None and self.http_status is not None and 200 <= self.http_status < 300

    def message(self) -> Message | None:
        """The answer as one message; None when there is none to read (error, or a body with no choice)."""
        if not self.ok:
            return None
        read = surface(self.api)
        return read.assemble(self.chunks) if self.mode == "stream" else read.message(self.response)

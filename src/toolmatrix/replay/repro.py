"""A replay finding as a maintainer runs it: a snippet that needs the engine's own package alone, no toolmatrix.

Each engine's template (``toolmatrix/data/repro/ENGINE.py``, or ``ENGINE.sh`` where the engine has no Python
parser) calls the engine's own parser API exactly as its replay worker does (``adapters/ENGINE_worker.py``), or
sends the engine's server the chat request (llama.cpp, Dynamo: that needs the server and a model, and the
template says so). ``snippet`` puts above it, as constants the template reads, the very request the worker gets
for the fixture: text, the model's token ids (where the fixture has them), tools, parser names, thinking switch,
tokenizer and the stream's pieces. No import shim:
a maintainer has the engine installed as usual, torch and all. Which constants a template gets is what it names,
so engine differences stay in the templates.
"""

from __future__ import annotations

import json
import pprint
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from .adapters import Adapter
from .feeder import CHUNKINGS
from .fixtures import Fixture
from .session import parse_request

CONSTANTS = ("FAMILY", "TEXT", "TOKEN_IDS", "TOOLS", "TOOL_PARSER", "REASONING_PARSER", "CHAT_TEMPLATE_KWARGS", "TOKENIZER",
             "PIECES")


def _python(name: str, value: Any) -> str:
    return f"{name} = {pprint.pformat(value, width=116, sort_dicts=False)}"


def _shell(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else "" if value is None else json.dumps(value, ensure_ascii=False)
    return f"{name}={shlex.quote(text)}"


# A template's suffix -> how its constants are written.
LANGUAGES: dict[str, Callable[[str, Any], str]] = {".py": _python, ".sh": _shell}


def template(engine: str) -> tuple[str, str]:
    """(suffix, text) of the engine's repro template."""
    folder = resources.files("toolmatrix.data") / "repro"
    found = [(suffix, folder / f"{engine}{suffix}") for suffix in LANGUAGES if (folder / f"{engine}{suffix}").is_file()]
    if not found:
        raise LookupError(f"{engine}: no repro template (toolmatrix/data/repro/{engine}.py or .sh)")
    suffix, path = found[0]
    return suffix, path.read_text(encoding="utf-8")


def _values(adapter: Adapter, fixture: Fixture, chunking: str | None) -> dict[str, Any]:
    """The constants every template may read, from the worker's own request for the fixture."""
    request = parse_request(adapter, fixture, [chunking] if chunking else [])
    return {"FAMILY": request["family"], "TEXT": request["text"], "TOKEN_IDS": request.get("token_ids"),
            "TOOLS": request["tools"],
            "TOOL_PARSER": request["tool_parser"], "REASONING_PARSER": request["reasoning_parser"],
            "CHAT_TEMPLATE_KWARGS": request["chat_template_kwargs"],
            "TOKENIZER": str(Path(request["tokenizer"]).parent) if request["tokenizer"] else None,
            "PIECES": [tuple(piece) for piece in request["streams"][chunking]] if chunking else None}


def snippet(adapter: Adapter, fixture: Fixture, chunking: str | None = None) -> str:
    """The standalone repro of ``fixture`` on the adapter's engine: the non-streamed parse, and the stream cut by
    ``chunking`` (one of ``feeder.CHUNKINGS``; None: non-streamed only)."""
    if chunking is not None and chunking not in CHUNKINGS:
        raise ValueError(f"unknown chunking {chunking!r}; known: {', '.join(CHUNKINGS)}")
    support = adapter.supports(fixture.family, None)
    if not support:
        raise LookupError(f"{fixture.id}: {support.reason}")
    suffix, body = template(adapter.engine)
    given = _values(adapter, fixture, chunking)
    used = [name for name in CONSTANTS if re.search(rf"\b{name}\b", body)]
    # the engine as replayed: its package's pinned line, else its build's first line (llama.cpp), else its name
    versions = adapter.versions().splitlines()
    pin = next((line for line in versions if line.lower().startswith(adapter.replay.package.lower() + "==")),
               None) if adapter.replay.package else (versions or [None])[0]
    expected = {"content": fixture.expected.content, "reasoning": fixture.expected.reasoning,
                "tool_calls": [dict(call) for call in fixture.expected.tool_calls]}
    head = [f"# Replay fixture {fixture.id} on {pin or adapter.engine}: the non-streamed answer"
            + (f", and the stream cut by chunking {chunking!r}." if chunking else "."),
            "# Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.",
            f"# The fixture expects: {json.dumps(expected, ensure_ascii=False)}"]
    return "\n".join([*head, *(LANGUAGES[suffix](name, given[name]) for name in used), "", body])

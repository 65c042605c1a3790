"""Files replaced whole: written under a temporary name beside their place, then renamed into it in one step.

A reader (the matrix, a CI job, kubectl, a second process) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import IO, Any


class Replacing:
    """``path``'s next content, written to ``partial`` (by default a name of its own beside ``path``, so that two
    writers of one file never share one) until ``publish`` renames it into place; ``discard`` removes it.

    As a context manager: published when the block ends, removed when it raises. The file is created with the
    umask's mode, as ``open`` would create ``path`` itself."""

    def __init__(self, path: Path, partial: Path | None = None, binary: bool = False):
        self.path = Path(path)
        self.partial = partial or self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        self.handle: IO = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")

    def publish(self) -> None:
        self.handle.close()
        os.replace(self.partial, self.path)

    def discard(self) -> None:
        self.handle.close()
        self.partial.unlink(missing_ok=True)

    def __enter__(self) -> IO:
        return self.handle

    def __exit__(self, kind: type | None, *_: Any) -> None:
        if kind is None:
            self.publish()
        else:
            self.discard()


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole; a failed write leaves no temporary file behind."""
    with Replacing(path) as handle:
        handle.write(text)
    return Path(path)


def write_json(path: Path, data: Any) -> Path:
    """``data`` as indented JSON, written whole (its folder made first)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")

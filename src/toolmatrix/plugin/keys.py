"""What a suite item names: its case, mode, surface and sample, read from its node id; and the key its record
travels under from the worker that ran it to the controller that writes it."""

from __future__ import annotations

import re
from typing import NamedTuple

from toolmatrix.wire.surfaces import CHAT

RECORD_KEY = "toolmatrix_record"  # a Posted record, as a plain tuple


class ItemKey(NamedTuple):
    case_id: str
    mode: str
    api: str = CHAT
    sample: int | None = None


def item_key(nodeid: str) -> ItemKey | None:
    """What a suite item's node id names (``...::test_case[CASE-MODE]``, ``[CASE-MODE-sN]`` for sample N of
    ``--samples``, then ``-API`` over a surface other than chat, maybe with xdist's ``@group``)."""
    found = re.search(r"::test_case\[(.+)-(nonstream|stream)(?:-s(\d+))?(?:-(responses|messages))?\]", nodeid)
    if not found:
        return None
    sample = int(found.group(3)) if found.group(3) else None
    return ItemKey(found.group(1), found.group(2), found.group(4) or CHAT, sample)

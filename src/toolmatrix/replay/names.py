"""How replay names what it did in its records, read back by the triage without the machinery that wrote them:
a chunking's record mode, and what a record's tokenizer label says."""

from __future__ import annotations

SPLITTER = "splitter:v1"  # the label of text cut by the documented splitter: no tokenizer of the family's here


def mode_of(chunking: str) -> str:
    """The record mode of a chunking: ``none`` is the non-streamed parse, ``whole`` one delta, the rest by name."""
    return {"none": "nonstream", "whole": "stream"}.get(chunking, f"stream:{chunking}")


def own_vocabulary(label: str) -> bool:
    """Whether a replay record's ``replay.tokenizer`` label says the fixture reached the engine as ids of its own
    family's (or model's) vocabulary. False where it starts with ``SPLITTER``: no such vocabulary here, so the engine
    read the text as written, or ids of another family's vocabulary (Dynamo's frontend needs ids: Qwen3's), where a
    server reads the model's own and its special tokens are special. None of such a record's failures is an engine
    bug; triage classes them apart."""
    return not label.startswith(SPLITTER)

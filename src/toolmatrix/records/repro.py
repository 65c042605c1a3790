"""The command lines that run a case again: ``repro_prefix`` (what a run's command targeted) and ``repro_command``
(that prefix narrowed to one case x mode), as the page, the gate and ``show`` print them."""

from __future__ import annotations

import shlex

from toolmatrix.records.run import Run


def repro_prefix(run: Run) -> list[str]:
    """``pytest`` and the target options of ``run``: the engine spec, or the URL of an external server; for a
    parser-replay run, ``toolmatrix replay`` with the run's fixture file and engine (``ENGINE@VERSION`` where the
    run replayed one release: a sweep's, or one named so)."""
    engine, model = run.engine, run.model
    if engine.replay:
        release = run.command[1:2] == ["replay-sweep"] or "@" in (run.option("--engine") or "")
        return ["toolmatrix", "replay", "--fixtures", run.option("--fixtures") or "FIXTURES.jsonl", "--engine",
                f"{engine.id}@{engine.version}" if release and engine.version else engine.id]
    options = [f"--api={run.api}"] if run.api != "chat" else []
    # Repeated samples ask at their own temperature and seeds: the repro asks the same K.
    options += [f"{name}={run.option(name)}" for name in ("--samples", "--temperature") if run.option(name)]
    if engine.launcher == "external" and engine.base_url:
        return ["pytest", f"--base-url={engine.base_url}", f"--model={model.served_name}", *options]
    return ["pytest", f"--engine={engine.id}", f"--model={model.id}", *options]


def repro_command(prefix: list[str], case_id: str, mode: str) -> str:
    """The command that runs one case x mode again."""
    if prefix[:2] == ["toolmatrix", "replay"]:  # parser replay: that one fixture, in that chunking
        chunking = mode.split(":", 1)[1] if ":" in mode else "whole"
        needle = '"id": "' + case_id + '"'
        one = f"grep -F {shlex.quote(needle)} {shlex.quote(prefix[3])} > /tmp/one.jsonl"
        return f"{one} && " + shlex.join([*prefix[:2], "--fixtures", "/tmp/one.jsonl", "--results-dir", "/tmp/repro",
                                          *prefix[4:], "--chunking", chunking])
    # -k matches substrings, and "stream" is one of "nonstream".
    selector = f"{case_id} and nonstream" if mode == "nonstream" else f"{case_id} and stream and not nonstream"
    return shlex.join([*prefix, "-k", selector])


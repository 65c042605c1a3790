"""Small results directories for tests: ``results.jsonl`` + ``run.json``, valid against their schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolmatrix.testing import fakesurfaces

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def answer(content: str | None = None, calls: list[dict] | None = None) -> dict:
    """A chat-completions body with an optional content and tool calls ``[{"name", "arguments"}]``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
            for n, c in enumerate(calls)
        ]
    return {"id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}


def chunks_of(body: dict) -> list[dict]:
    """The same answer as stream chunks: the content, then each call's name and arguments in two pieces."""
    message = body["choices"][0]["message"]
    out = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    if message.get("content"):
        out.append({"choices": [{"index": 0, "delta": {"content": message["content"]}}]})
    def delta(**fields: Any) -> dict:
        return {"choices": [{"index": 0, "delta": fields}]}

    for index, call in enumerate(message.get("tool_calls", [])):
        name, args = call["function"]["name"], call["function"]["arguments"]
        out.append(delta(tool_calls=[{"index": index, "id": call["id"], "type": "function",
                                      "function": {"name": name, "arguments": args[:3]}}]))
        out.append(delta(tool_calls=[{"index": index, "function": {"arguments": args[3:]}}]))
    out.append({"choices": [{"index": 0, "delta": {}, "finish_reason": body["choices"][0]["finish_reason"]}]})
    return out


def record(case_id: str, verdict: str = "pass", *, mode: str = "nonstream", category: str | None = None,
           blame: str | None = None, reason: str | None = None, run_id: str = "run-1",
           body: dict | None = None, expect_calls: list[dict] | None = None, api: str = "chat") -> dict:
    """One record; a non-pass one gets a failing check, a blame and a reason unless given. ``body`` is a chat
    answer; over another surface (``api``) it is sent in that surface's shapes, as the fake server writes them."""
    expect_calls = [{"name": "get_weather", "arguments": {"city": "Paris"}}] if expect_calls is None else expect_calls
    body = body or answer(calls=expect_calls)
    failing = verdict != "pass"
    blame = blame if blame is not None or not failing else "engine"
    reason = reason if reason is not None else ("ARGS_NOT_OBJECT: arguments are not an object" if failing else "")
    rec = {
        "schema_version": 2, "run_id": run_id, "case_id": case_id,
        "category": category or case_id.split(".")[0], "mode": mode, "verdict": verdict,
        "blame": blame if failing else None, "reason": reason,
        "checks": [{"name": "call_names", "outcome": "pass", "blame": None, "detail": ""},
                   {"name": "args_object", "outcome": "fail" if failing else "pass", "blame": blame if failing else None,
                    "detail": reason}],
        "request": {"model": "m", "messages": [{"role": "user", "content": f"{case_id}: weather in Paris?"}],
                    "tools": TOOLS, "stream": mode == "stream"},
        "http_status": 200, "latency_s": 0.25,
        "expect": {"calls": expect_calls, "ordered": False, "allow_extra_calls": False, "no_call": not expect_calls,
                   "any_call": False, "reject": False, "completes": False, "content_contains_any": []},
    }
    if api != "chat":
        choice = body["choices"][0]
        wire = fakesurfaces.answer(api, choice["message"]["content"], None, choice["message"].get("tool_calls", []),
                                   choice["finish_reason"], frozenset(), mode == "stream")
        rec["api"] = api
        rec["chunks" if mode == "stream" else "response"] = wire
    elif mode == "stream":
        rec["chunks"] = chunks_of(body)
    else:
        rec["response"] = body
    return rec


def run_info(model: str, engine: str, run_id: str, started: str, *, launcher: str = "process",
             version: str | None = "b1234", flags: list[str] | None = None, counts: dict | None = None,
             host: str | None = None, gpus: tuple[str, ...] = (), case_shard: str | None = None,
             batch: str | None = None, shard: str | None = None, api: str = "chat") -> dict:
    """run.json of a run; ``host`` and ``gpus`` (names) say which machine ran it, ``case_shard`` which slice,
    ``batch`` and ``shard`` which fan-out and which of its shards, ``api`` the surface."""
    engine_info: dict[str, Any] = {"id": engine, "version": version, "launcher": launcher,
                                   "flags": flags if flags is not None else ["--port", "8080", "--jinja"]}
    if launcher == "external":
        engine_info["base_url"] = "http://staging.example:8000/v1"
    hardware: dict[str, Any] = {"cpu": "test", "cores": 2}
    if host is not None:
        hardware.update(host=host, gpus=[{"name": name, "memory": "81559 MiB", "driver": "550.1"} for name in gpus])
    return {
        "schema_version": 2, "run_id": run_id, "pair": f"{model}@{engine}", "engine": engine_info,
        "model": {"id": model, "family": "hermes", "served_name": f"{model}-served"},
        "hardware": hardware, "started": started, "finished": started,
        "toolmatrix_version": "0.1.0", "counts": counts or {}, "exit_status": "complete", "case_shard": case_shard,
        "batch": batch, "shard": shard, **({"api": api} if api != "chat" else {}),
    }


def write_results(directory: Path, records: list[dict], *, model: str = "m1", engine: str = "e1",
                  run_id: str = "run-1", started: str = "2026-01-01T10:00:00+00:00", **run_options: Any) -> Path:
    """Write a results directory; records get ``run_id`` so the directory is self-consistent."""
    directory.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with (directory / "results.jsonl").open("w", encoding="utf-8") as handle:
        for rec in records:
            rec = {**rec, "run_id": run_id}
            counts[str(rec.get("verdict"))] = counts.get(str(rec.get("verdict")), 0) + 1
            handle.write(json.dumps(rec, ensure_ascii=False) + "\n")
    info = run_info(model, engine, run_id, started, counts=counts, **run_options)
    (directory / "run.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return directory


def suite(verdicts: dict[str, str], modes: tuple[str, ...] = ("nonstream", "stream"),
          **record_options: Any) -> list[dict]:
    """Records for ``{case_id: verdict}`` in every mode; a verdict may be ``"pass/fail"`` (nonstream/stream)."""
    out = []
    for case_id, verdict in verdicts.items():
        split = verdict.split("/") if "/" in verdict else [verdict] * len(modes)
        per_mode = dict(zip(modes, split, strict=True))
        out += [record(case_id, per_mode[mode], mode=mode, **record_options) for mode in modes]
    return out


def write_replay_results(directory: Path, engine: str, verdicts: dict[str, str], skipped: dict[str, str],
                         version: str = "b1234") -> Path:
    """A parser-replay run of ``engine`` at ``version`` as the replay tier writes it: pair ``parser-replay@ENGINE``,
    records of category ``replay.FAMILY`` (``{family: verdict}``, non-streamed and token-streamed),
    ``skipped_families``."""
    records = [{**record(f"{family}.case", verdict, mode=mode, category=f"replay.{family}"),
                "replay": {"tier": "replay", "engine": engine, "engine_version": version, "parser": family,
                           "chunking": "none" if mode == "nonstream" else "token", "family": family}}
               for family, verdict in verdicts.items() for mode in ("nonstream", "stream:token")]
    write_results(directory, records, model="parser-replay", engine=engine, run_id=f"replay-{engine}", version=version)
    run = json.loads((directory / "run.json").read_text())
    run["engine"].update(tier="replay", flags=[], skipped_families=skipped)
    (directory / "run.json").write_text(json.dumps(run))
    return directory

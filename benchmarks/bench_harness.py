"""How much does the harness cost? Two figures, both measured in one run (these machines are noisy).

1. Overhead against a real engine: the suite (``pytest -n 2 --evidence off``) against llama-server with 2 slots,
   beside a bare asyncio load generator that sends the very same request bodies (read back from the suite's
   results) at the same concurrency to the same server. The generator runs before and after the suite; the ratio
   is the suite's wall time over the mean of the two. Target: <= 1.10. Then the cost of evidence: the same
   items with ``--evidence failures`` and ``all`` (each failure asks the engine for its render and raw text).
2. Throughput against an instant server: the suite against the fake server (answers in microseconds), over
   the case library copied until there are enough items to dwarf start-up, at -n 0 and -n 2. Targets: >= 250
   items/s at -n 0, >= 300 at -n 2. Then where the time goes: the -n 0 session once more under cProfile, its own
   time summed by component (pytest, the HTTP client, checks, records, ...) and the costliest functions.

    python benchmarks/bench_harness.py [--subset "single or irrelevance or types"] [--copies 8] [--skip-live]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from toolmatrix.records import read_records
from toolmatrix.serving.launchers import ProcessLauncher
from toolmatrix.serving.registry import data_root, load_engines, load_models
from toolmatrix.testing.fake import FakeServer, Reply

ROOT = Path(__file__).resolve().parents[1]


def run_suite(args: list[str], cwd: Path, env: dict[str, str] | None = None,
              python: tuple[str, ...] = ()) -> tuple[float, str]:
    cmd = [sys.executable, *python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", str(ROOT), "-c",
           str(ROOT / "pyproject.toml"), *args]
    # pytest rewrites the asserts of every plugin module (toolmatrix's, hypothesis's) and caches the result as
    # bytecode, as a user's Python does; with PYTHONDONTWRITEBYTECODE it would redo that (~2 s) in every session.
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**environ, **(env or {})})
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"suite failed to run (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


async def _post(host: str, port: int, path: str, body: dict) -> int:
    """One request over a fresh connection, read to the end (streams too): the least a client can do."""
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return len(data)


async def bare_load(base_url: str, bodies: list[dict], concurrency: int) -> float:
    url = urlsplit(base_url)
    path = url.path.rstrip("/") + "/chat/completions"
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def worker() -> None:
        while not queue.empty():
            await _post(url.hostname, url.port, path, queue.get_nowait())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


def sent_bodies(results: Path) -> list[dict]:
    bodies = []
    for record in read_records(results):
        bodies.append(record.request)
        if record.followup is not None:
            bodies.append(record.followup.request)
    return bodies


def overhead(subset: str, workdir: Path) -> None:
    engine, model = load_engines()["llamacpp"], load_models()["gemma3-270m"]
    launcher = ProcessLauncher(engine, model, slots=2)
    endpoint = launcher.start()
    evidence_walls = {}
    try:
        results = workdir / "live"
        # --engine with --base-url: the running server, with llamacpp's spec telling how to ask for evidence.
        target = ["--base-url", endpoint.base_url, "--engine", "llamacpp", "--model", "gemma3-270m", "-n", "2",
                  "-k", subset]
        # A warm-up pass fills the server's prompt cache, so neither side below gets it first.
        run_suite(target + ["--evidence", "off", "--results-dir", str(results)], workdir)
        bodies = sent_bodies(results)
        bare_before = asyncio.run(bare_load(endpoint.base_url, bodies, 2))
        suite_wall, out = run_suite(target + ["--evidence", "off"], workdir)
        bare_after = asyncio.run(bare_load(endpoint.base_url, bodies, 2))
        for mode in ("failures", "all"):
            evidence_walls[mode], _ = run_suite(target + ["--evidence", mode, "--results-dir", str(workdir / mode)],
                                                workdir)
    finally:
        launcher.stop()
    bare = (bare_before + bare_after) / 2
    items = re.findall(r"(\d+) (?:passed|failed|xfailed)", out.splitlines()[-1])
    print(f"overhead vs llama-server (-n 2, 2 slots, {sum(map(int, items))} items, {len(bodies)} requests):")
    print(f"  bare asyncio generator: {bare_before:.1f}s before, {bare_after:.1f}s after (mean {bare:.1f}s)")
    print(f"  toolmatrix suite:       {suite_wall:.1f}s (--evidence off; whole pytest command, start-up included)")
    print(f"  ratio suite/bare:       {suite_wall / bare:.3f}  (target <= 1.10)")
    print("cost of evidence (the same items, the same server, after the runs above):")
    for mode, wall in evidence_walls.items():
        records = list(read_records(workdir / mode))
        asked = [r.evidence.status.value for r in records if r.evidence is not None]
        counts = ", ".join(f"{asked.count(s)} {s}" for s in sorted(set(asked))) or "none asked"
        print(f"  --evidence {mode:8} {wall:6.1f}s = {wall / suite_wall:.2f}x off; evidence: {counts}")


def multiplied_library(copies: int, folder: Path) -> Path:
    """The built-in library `copies` times over, each copy under new ids and categories."""
    source = data_root() / "cases"
    shutil.copytree(source / "tools", folder / "tools")
    for path in sorted(source.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        for n in range(copies):
            copy = dict(doc, category=f"{doc['category']}{n}")
            copy["cases"] = [dict(c, id=f"{doc['category']}{n}." + c["id"].split(".", 1)[1]) for c in doc["cases"]]
            (folder / f"{path.stem}{n}.yaml").write_text(yaml.safe_dump(copy, allow_unicode=True))
    return folder


def throughput(copies: int, workdir: Path) -> None:
    def instant(body: dict) -> Reply:
        tools = body.get("tools") or []
        return Reply(calls=((tools[0]["function"]["name"], {}),)) if tools else Reply(content="Hello!")

    cases = multiplied_library(copies, workdir / "cases")
    rates = {}
    with FakeServer(instant) as fake:
        target = ["--base-url", fake.base_url, "--model", "fake", "--only-cases", "--cases", str(cases)]
        for workers, goal in (("0", 250), ("2", 300)):
            wall, out = run_suite([*target, "-n", workers, "--results-dir", str(workdir / f"fake{workers}")], workdir)
            last = out.splitlines()[-1]
            items = sum(map(int, re.findall(r"(\d+) (?:passed|failed|xfailed)", last)))
            session = float(re.search(r"in ([\d.]+)s", last).group(1))
            rates[workers] = items / session
            print(f"throughput vs instant fake server (-n {workers}): {items} items, {len(fake.requests)} requests so far")
            print(f"  {items / session:.0f} items/s in the pytest session ({session:.1f}s), "
                  f"{items / wall:.0f} items/s for the whole command ({wall:.1f}s)  (target >= {goal})")
        print(f"  -n 2 / -n 0: {rates['2'] / rates['0']:.2f}")
        profile = workdir / "suite.prof"
        run_suite([*target, "-n", "0", "--results-dir", str(workdir / "profiled")], workdir,
                  python=("-m", "cProfile", "-o", str(profile)))
    print_profile(profile)


# Where a function's own time goes, by the file it lives in: the first pattern that matches names it.
COMPONENTS = (("pytest and xdist", r"/(_pytest|pluggy|xdist|execnet)/"),
              ("HTTP client (openai, httpx)", r"/(openai|httpx2?|httpcore2?|h11|anyio|pydantic\w*)/|socket|ssl"),
              ("JSON Schema", r"/(jsonschema\w*|referencing|rpds)/"),
              ("toolmatrix checks and formats", r"toolmatrix/(checks|formats/|blame|evidence)"),
              ("toolmatrix records", r"toolmatrix/results|/(cattrs|orjson)/|json/"),
              ("toolmatrix other", r"toolmatrix/"),
              ("other", r""))


def print_profile(path: Path, top: int = 12) -> None:
    stats = pstats.Stats(str(path))
    total = sum(row[2] for row in stats.stats.values())  # own time of every function: the session's CPU time
    shares: dict[str, float] = dict.fromkeys((name for name, _ in COMPONENTS), 0.0)

    def component(filename: str) -> str:
        return next(name for name, pattern in COMPONENTS if re.search(pattern, filename))

    for (filename, _, _), row in stats.stats.items():
        callers = row[4]
        if filename == "~" and callers:  # a builtin (socket.recv, compile): its time is its callers'
            spent = sum(c[3] for c in callers.values()) or 1.0
            for (caller_file, _, _), c in callers.items():
                shares[component(caller_file)] += row[2] * c[3] / spent
        else:
            shares[component(filename)] += row[2]
    print(f"profile of the -n 0 session under cProfile ({total:.1f}s of own time), by component:")
    for name, seconds in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {name:32} {seconds:6.2f}s  {seconds / total:5.1%}")
    print("  costliest functions (own time):")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    for (filename, line, function), row in rows:
        where = re.sub(r".*/(site-packages|src|lib/python3\.\d+)/", "", filename)
        print(f"    {row[2]:6.2f}s {row[1]:8} calls  {where}:{line}({function})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subset", default="single or irrelevance or types", help="-k expression for the live part")
    parser.add_argument("--copies", type=int, default=8, help="copies of the library for the throughput part")
    parser.add_argument("--skip-live", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_live:
            overhead(args.subset, Path(tmp))
        throughput(args.copies, Path(tmp))


if __name__ == "__main__":
    main()

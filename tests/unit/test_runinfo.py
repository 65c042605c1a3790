"""What run.json says about the machine."""

import re
from pathlib import Path

from toolmatrix.serving.registry import cache_dir
from toolmatrix.serving.runinfo import Portable, gpus, hardware, program_name

ROOT = Path(__file__).parents[2]


def test_gpus_are_read_from_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpus() == [] and hardware()["gpus"] == []  # no nvidia-smi: no GPU, no error
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 570.86.15'\necho 'NVIDIA H100 80GB HBM3, 81559 MiB, 570.86.15'\n")
    smi.chmod(0o755)
    assert gpus() == [{"name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB", "driver": "570.86.15"}] * 2


# The layout of the machines that make snapshots and of this one: a checkout, the cache, a home's dot folders (an
# interpreter's packages among them), our temporary folders. (A path in a case or a model's answer, "/home/user/x",
# is not the machine's; "{cache}/venvs/..." in an engine's traceback is its portable form.)
MACHINE_PATH = re.compile("|".join(re.escape(root) for root in {
    "/work/main/", str(ROOT) + "/", str(cache_dir()), str(Path.home() / "."), "/tmp/toolmatrix-"}))


def test_machine_paths_become_portable(tmp_path):
    results, checkout, cache = tmp_path / "out" / "pair", tmp_path / "checkout", tmp_path / "home" / ".cache" / "tm"
    portable = Portable.of([(str(results), "."), (str(checkout), "."), (str(cache), "{cache}"), ("/home/me", "~")])
    assert portable.text(f"-m {cache}/weights/a.gguf") == "-m {cache}/weights/a.gguf"
    assert portable.text(f"{checkout}/engines/templates/q.jinja") == "engines/templates/q.jinja"
    assert portable.text(f"{results}/logs/x/llamacpp.log") == "logs/x/llamacpp.log"
    assert portable.text(f"--results-dir={results}") == "--results-dir=."
    assert portable.text(f"{checkout}2/x") == f"{checkout}2/x", "only whole path components"
    assert portable.text("Read /tmp/notes.txt and /home/me/a") == "Read /tmp/notes.txt and ~/a"
    assert portable.data({"a": [f"{cache}/w", 3, None]}) == {"a": ["{cache}/w", 3, None]}
    assert program_name("/v/lib/python3.11/site-packages/pytest/__main__.py") == program_name("/v/bin/pytest") == "pytest"


def test_committed_results_hold_no_machine_path():
    """What is published (records, run.json, matrix.md, the page) says nothing of the machine that made it."""
    published = [p for p in (ROOT / "results").rglob("*") if p.is_file() and "logs" not in p.parts]
    assert len(published) > 20
    leaks = {str(p.relative_to(ROOT)): found.group(0) for p in published
             if (found := MACHINE_PATH.search(p.read_text(errors="replace")))}
    assert leaks == {}

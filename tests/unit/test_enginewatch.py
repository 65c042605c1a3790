"""EngineWatch: a dead engine turns the failed records after it into errors that say so, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers_results import record
from toolmatrix.base.exitcodes import describe_exit, meaning
from toolmatrix.base.specs import validate_instance
from toolmatrix.live.enginewatch import EngineWatch
from toolmatrix.records import Posted
from toolmatrix.serving.launchers import ExternalLauncher


class StubLauncher:
    def __init__(self) -> None:
        self.running = True
        self.asked = 0
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
        self.proc.wait()

    def alive(self) -> bool:
        self.asked += 1
        return self.running

    def log_tail(self, lines: int = 40) -> str:
        return "GGML_ASSERT failed\nAborted"

    def exit_code(self) -> int | None:
        return self.proc.poll()


def refused(case_id: str, verdict: str = "error", reason: str = "http_status: connection error: refused") -> dict:
    """A record whose request found no server."""
    rec = record(case_id, verdict, blame="infra", reason=reason)
    rec["checks"][1].update(name="http_status", detail="connection error: refused")
    return rec


def seen(watch: EngineWatch, rec: dict) -> dict:
    posted = watch.observe(Posted(json.dumps(rec), rec["category"], rec["mode"], rec["verdict"], rec["blame"], None))
    out = json.loads(posted.line)
    assert (out["verdict"], out["blame"]) == (posted.verdict, posted.blame)
    return out


def test_answered_records_never_ask_the_launcher():
    launcher = StubLauncher()
    watch = EngineWatch(launcher)
    for rec in (record("single.a"), record("single.b", "fail", blame="model")):
        assert seen(watch, rec) == rec
    assert launcher.asked == 0 and watch.death is None


def test_an_error_while_the_engine_runs_is_kept_as_it_came():
    launcher = StubLauncher()
    watch = EngineWatch(launcher)
    rec = refused("single.a")
    assert seen(watch, rec) == rec
    assert launcher.asked == 1 and watch.death is None


def test_after_death_failed_records_are_engine_errors_and_answers_stay():
    launcher = StubLauncher()
    watch = EngineWatch(launcher)
    seen(watch, record("single.a"))
    launcher.running = False
    died = seen(watch, refused("single.b"))
    assert died["verdict"] == "error" and died["blame"] == "infra"
    assert died["reason"] == "engine died (exit 7); http_status: connection error: refused"
    assert died["engine_death"] == {"exit_code": 7, "log_tail": "GGML_ASSERT failed\nAborted", "records_before": 1}
    assert validate_instance(died, "record.schema.json") == []
    # An unsupported case whose request met the dead engine is an error too; a late real answer is not touched.
    marked = seen(watch, refused("tool_choice.named", "unsupported", "tool_choice.named: read as auto (...)"))
    assert marked["verdict"] == "error" and marked["reason"] == "engine died (exit 7); http_status: connection error: refused"
    late = record("single.c", "fail", blame="model")
    assert seen(watch, late) == late
    assert launcher.asked == 1  # death is noticed once


def test_exit_descriptions():
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(139) == "exit 139"
    assert describe_exit(None) == "exit status unknown"
    assert meaning(-15) == "killed by SIGTERM" and meaning(6) == "engine died"  # a pair's exit code, same words
    assert ExternalLauncher("http://127.0.0.1:9/v1", "m", "external").exit_code() is None  # nothing to tell

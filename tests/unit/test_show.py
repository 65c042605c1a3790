"""toolmatrix show: brief by default (failing checks, what the answer said, capped raw text), --full on request,
and a curl that resends what a client would send."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers_results import record, write_results
from toolmatrix.cli import main

RAW = "<tool_call>" + "x" * 2000 + "</tool_call>"


def failing_run(tmp_path: Path, launcher: str = "process") -> Path:
    failing = record("single.a", "fail", blame="engine", reason="ARGS_NOT_OBJECT: arguments are not an object")
    failing["request"]["verbose"] = True  # what the harness adds on llama-server for same-generation evidence
    failing["evidence"] = {"status": "obtained", "source": "same_generation", "method": "llamacpp_verbose",
                           "raw_text": RAW}
    return write_results(tmp_path / "r", [failing, record("single.b")], launcher=launcher)


def show(capsys, *args: str | Path) -> str:
    assert main(["show", *map(str, args)]) == 0
    return capsys.readouterr().out


def curl_of(out: str) -> str:
    return out[out.index("curl "):out.index("\nJSON\n") + 6]


def test_the_brief_view_shows_the_failure_and_what_the_answer_said(tmp_path, capsys):
    out = show(capsys, failing_run(tmp_path), "single.a")
    assert "single.a [nonstream] on m1@e1" in out and "FAIL, blamed engine" in out
    assert "failing checks:\n  FAIL        args_object [engine]: ARGS_NOT_OBJECT" in out
    assert "  (1 others passed or were skipped)" in out and "call_names" not in out
    assert "the answer said:\n  finish_reason: tool_calls\n  content: null\n  calls: 1\n" \
           '    get_weather {"city": "Paris"}' in out
    assert RAW[:600] + "\n... (cut: 1423 more characters)" in out and RAW not in out
    assert "request (as sent):" not in out and '"choices"' not in out  # the body as it came is --full's
    assert "--full: every check" in out


def test_full_shows_every_check_the_request_as_sent_and_the_answer(tmp_path, capsys):
    out = show(capsys, failing_run(tmp_path), "single.a", "--full")
    assert "  PASS        call_names" in out and "others passed" not in out
    request = out[out.index("request (as sent):"):out.index("answer (HTTP 200):")]
    assert '"verbose": true' in request  # as sent: the harness's field is part of the record
    assert '"choices"' in out and RAW in out


def test_the_curl_sends_what_a_client_would_and_needs_base_url_for_a_server_the_run_started(tmp_path, capsys):
    curl = curl_of(show(capsys, failing_run(tmp_path), "single.a"))
    assert "verbose" not in curl and '"tools": [' in curl
    assert curl.startswith('curl -sS "${BASE_URL:?set BASE_URL to your server, e.g. http://127.0.0.1:8080/v1}'
                           '/chat/completions"')  # the run's own port died with its engine
    sent = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
    assert sent.returncode != 0 and "BASE_URL: set BASE_URL to your server" in sent.stderr


def test_the_curl_of_a_base_url_run_defaults_to_the_server_it_reached(tmp_path, capsys):
    curl = curl_of(show(capsys, failing_run(tmp_path, launcher="external"), "single.a"))
    assert curl.startswith('curl -sS "${BASE_URL:-http://staging.example:8000/v1}/chat/completions"')

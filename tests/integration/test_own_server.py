"""Pointing the suite at your own server: a mistyped ``--model`` or a URL that is no OpenAI-compatible API is the
user's one-line mistake before any case runs, and an answer that is none of the API's is ``infra``, never
``engine``.

The stand-ins answer as the real servers do where it matters here: vLLM's and SGLang's 404 for a model they do not
serve, llama-server's model list that names its file while it answers to any name, and Python's own
``http.server`` (a real server of another kind).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers_engine import pytest_cmd
from toolmatrix.base.exitcodes import NO_ANSWER
from toolmatrix.records import read_records
from toolmatrix.serving.launchers import NotServed
from toolmatrix.serving.launchers.served import check_served
from toolmatrix.testing.fake import FakeServer, first_tool
from toolmatrix.testing.hostile import MODES, HostileServer

USAGE_ERROR = 4
# How each engine says it does not serve a model (its words, its status).
NOT_SERVED = {
    "vllm": (404, {"object": "error", "message": "The model `{model}` does not exist.", "type": "NotFoundError",
                   "param": None, "code": 404}),
    "sglang": (404, {"object": "error", "message": "The model '{model}' does not exist.", "type": "NotFoundError",
                     "param": None, "code": 404}),
}


class ServedOnly(ThreadingHTTPServer):
    """A server that lists ``served`` at /v1/models and answers every POST that its model is unknown, in one
    engine's words: with ``served`` named in the run, the model is listed but gone behind the list."""

    def __init__(self, engine: str, served: str):
        status, body = NOT_SERVED[engine]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})

            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers["Content-Length"]))).get("model")
                self._send(status, {**body, "message": body["message"].format(model=asked)})

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextlib.contextmanager
def served_only(engine: str, served: str) -> Iterator[ServedOnly]:
    server = ServedOnly(engine, served)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def plain_http_server(folder: Path) -> Iterator[str]:
    """``python -m http.server``, the real one: a 404 page for /v1/models, 501 for every POST."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


def suite(tmp_path: Path, base_url: str, model: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(pytest_cmd("-p", "no:randomly", f"--base-url={base_url}", f"--model={model}", "-k", "single",
                                     "--results-dir", str(tmp_path / "out"), *args),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("engine", sorted(NOT_SERVED))
def test_a_model_the_server_does_not_serve_is_a_usage_error_naming_what_it_serves(tmp_path, engine):
    with served_only(engine, "Qwen/Qwen3-8B") as server:
        run = suite(tmp_path, server.base_url, "Qwen/Qwen3-8b")
    assert run.returncode == USAGE_ERROR, run.stdout + run.stderr
    said = run.stderr + run.stdout
    assert "--model Qwen/Qwen3-8b: the server at" in said and "does not exist" in said, said
    assert "it serves: Qwen/Qwen3-8B (did you mean Qwen/Qwen3-8B?)" in said, said
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written, not even the folder


def test_a_server_of_another_kind_is_named_before_any_case_runs(tmp_path):
    with plain_http_server(tmp_path) as url:
        run = suite(tmp_path, url, "qwen3")
    said = run.stderr + run.stdout
    assert run.returncode == USAGE_ERROR, said
    assert f"--base-url {url} is no OpenAI-compatible API: GET /models answered HTTP 404 (an HTML page" in said, said
    assert "POST /chat/completions HTTP 501" in said, said
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_a_server_that_lists_one_name_and_answers_to_any_runs_the_cases(tmp_path):
    # llama-server lists its model file's name and answers whatever the request names: the run goes on.
    with FakeServer(first_tool) as fake:
        run = suite(tmp_path, fake.base_url, "qwen2.5-coder-0.5b", "-p", "no:xdist")
    assert run.returncode == 1, run.stdout + run.stderr  # a fake that calls the first tool fails some cases
    assert "reached at" in run.stdout and "serves fake; answers to " in run.stdout, run.stdout
    records = list(read_records(tmp_path / "out"))
    assert records and not [r.reason for r in records if r.verdict.value == "error"]  # every answer judged


@pytest.mark.parametrize("engine", sorted(NOT_SERVED))
def test_a_model_listed_but_not_served_ends_every_exchange_as_infra_on_every_surface(tmp_path, engine):
    with served_only(engine, "qwen3") as server:
        run = suite(tmp_path, server.base_url, "qwen3", "--api", "chat,responses,messages", "-p", "no:xdist")
    said = run.stdout + run.stderr
    assert run.returncode == NO_ANSWER, said
    assert "no case got an answer to judge: all " in said and "does not serve this model" in said, said
    for api in ("chat", "responses", "messages"):
        records = list(read_records(tmp_path / "out" / api))
        assert records and {(r.verdict.value, r.blame.value) for r in records} == {("error", "infra")}, api
        assert all("HTTP 404: The model" in r.reason for r in records), records[0].reason
        assert not [c for r in records for c in r.checks if c.blame and c.blame.value == "engine"]


def test_a_key_the_server_refuses_is_named_before_any_case_runs_and_never_printed(tmp_path):
    key = "sk-own-server-secret-7"
    with HostileServer("echo_key") as server:  # its 401 body echoes the key it was sent
        run = subprocess.run(pytest_cmd(f"--base-url={server.base_url}", "--model=m", "--api-key-env=TM_KEY",
                                        "--results-dir", str(tmp_path / "out")),
                             cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TM_KEY": key})
    said = run.stdout + run.stderr
    assert run.returncode == USAGE_ERROR, said
    assert "POST /chat/completions was refused (HTTP 401: Invalid key: Bearer [REDACTED])" in said, said
    assert key not in said and not (tmp_path / "out" / "results.jsonl").exists()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_check_before_the_run_survives_a_hostile_server(mode):
    """Its one-token request meets every hostile answer (never-ending, trickling, 50 MB, deep, not Unicode, the key
    echoed): it returns or refuses in one line, in bounded time, and never prints the key."""
    started = time.monotonic()
    with HostileServer(mode) as server:
        try:
            said = check_served(server.base_url, "m", api_key="sk-hostile-9", timeout=2.0, answer_timeout=2.0)
        except NotServed as exc:
            said = str(exc)
    assert time.monotonic() - started < 30 and "\n" not in said and "sk-hostile-9" not in said, said

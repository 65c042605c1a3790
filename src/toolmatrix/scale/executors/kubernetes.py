"""Kubernetes Jobs from a plan: one ``batch/v1`` Job per shard, the engine and toolmatrix in one Pod.

The engine runs as a native sidecar (an init container with ``restartPolicy: Always``): its ``startupProbe`` on
the engine's readiness path holds the toolmatrix container back until the engine answers, and the sidecar is
stopped when the toolmatrix container ends, so the Job completes. The engine container is built from the same
``container_config`` the docker launcher starts (image, entrypoint, arguments, environment), so a shard runs
the engine as ``toolmatrix plan`` prints it. The toolmatrix container runs the shard's own pytest command
against the sidecar (``--launcher=external``) and writes into a PersistentVolumeClaim at
``/results/<shard>/<pod name>``, so a retried pod never overwrites the files of the one before it.

Volumes: local weights come from a models claim (mounted read-only where the docker launcher mounts the host's
weights folder), toolmatrix's chat templates are copied from the toolmatrix image by an init container, and the
engine's caches are emptyDirs (hub weights are downloaded by each pod). Secrets the engine reads by name
(``env_pass``, e.g. HF_TOKEN) come from an optional Secret.
"""

from __future__ import annotations

import hashlib
import math
import re
import shlex
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from toolmatrix.scale.executors import EmitError, header
from toolmatrix.scale.shards import Plan, Shard, safe_name, with_options
from toolmatrix.serving.launchers.base import LaunchError, docker_of
from toolmatrix.serving.launchers.docker import TEMPLATES_DIR, ContainerConfig, Mount, container_config
from toolmatrix.serving.placeholders import render
from toolmatrix.serving.registry import EngineSpec, ModelSpec, data_root, registry, resolve_model

RESULTS_MOUNT = "/results"
DEFAULT_RESULTS_CLAIM = "toolmatrix-results"
DEFAULT_MODELS_CLAIM = "toolmatrix-models"
DEFAULT_ENV_SECRET = "toolmatrix-env"
GPU_RESOURCE = "nvidia.com/gpu"
PROBE_PERIOD_S = 10
NAME_MAX = 63  # a Job's name is a DNS-1123 label (it becomes the value of the pods' job-name label)
LABELS = {"app.kubernetes.io/name": "toolmatrix"}
SHARD_LABEL = "toolmatrix/shard"  # a label value allows no '@' or '+': it holds the Job name, the annotation the id
SHARD_ANNOTATION = "toolmatrix/shard-id"
RUN_BUDGET_S = 6 * 3600  # past the engine's readiness timeout: a Job that outlives this is ended, its GPU freed
# pytest exits 1 when cases fail and 5 when a slice selects none: a finished shard, which Kubernetes must neither
# retry nor call failed (a retried pod would run the whole shard again). Other codes stay failures.
FINISHED_IS_SUCCESS = ("sh", "-c", 'status=0; "$@" || status=$?; case "$status" in 0|1|5) exit 0;; esac; exit "$status"',
                       "shard")


def job_name(shard: Shard) -> str:
    """A DNS-1123 label for the shard: its id lowercased to ``[a-z0-9-]``, cut short, and a hash of the whole id,
    so two ids that sanitize alike (or differ only past the cut) still get different names."""
    digest = hashlib.sha256(shard.id.encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "-", shard.id.lower()).strip("-")
    return f"{slug[:NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def _env(config: ContainerConfig, secret: str) -> list[dict[str, Any]]:
    values = [{"name": name, "value": value} for name, value in config.env.items()]
    # Passed-through variables (tokens) are named only: their values come from the Secret, if there is one.
    secrets = [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name, "optional": True}}}
               for name in config.env_pass]
    return values + secrets


def _volume(mount: Mount, spec_models_dir: str, models_claim: str, index: int) -> tuple[dict, dict]:
    """The Pod volume for one of the config's host mounts, and the engine's mount of it."""
    if mount.container == spec_models_dir:
        volume = {"name": "models", "persistentVolumeClaim": {"claimName": models_claim, "readOnly": True}}
    elif mount.container == TEMPLATES_DIR:
        volume = {"name": "templates", "emptyDir": {}}
    else:
        volume = {"name": f"cache-{index}", "emptyDir": {}}
    return volume, {"name": volume["name"], "mountPath": mount.container, "readOnly": mount.read_only}


def _shm(config: ContainerConfig) -> list[tuple[dict, dict]]:
    """Docker's ``--ipc host`` / ``--shm-size`` as a memory-backed /dev/shm (PyTorch workers share tensors there)."""
    if not (config.ipc or config.shm_size):
        return []
    empty = {"medium": "Memory", **({"sizeLimit": quantity(config.shm_size)} if config.shm_size else {})}
    return [({"name": "shm", "emptyDir": empty}, {"name": "shm", "mountPath": "/dev/shm"})]


def quantity(docker_size: str) -> str:
    """Docker's size (``32g``: binary units, as ``--shm-size`` reads it) as a Kubernetes quantity (``32Gi``)."""
    match = re.fullmatch(r"(\d+)([bkmg]?)", docker_size.lower())
    if match is None:  # engine.schema.json lets no other size through
        raise ValueError(f"not a docker size: {docker_size!r}")
    number, unit = match.groups()
    return number + {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[unit]


def engine_container(engine: EngineSpec, config: ContainerConfig, gpus: int, mounts: list[dict],
                     secret: str) -> dict[str, Any]:
    """The engine as a native sidecar: it starts first, and the Pod goes on only once its startupProbe passes."""
    container: dict[str, Any] = {"name": "engine", "image": config.image}
    if config.entrypoint:
        container["command"] = list(config.entrypoint)
    container.update({
        "args": list(config.command),
        "env": _env(config, secret),
        "ports": [{"name": "api", "containerPort": config.port}],
        "restartPolicy": "Always",
        "startupProbe": {"httpGet": {"path": engine.readiness_path, "port": config.port},
                         "periodSeconds": PROBE_PERIOD_S,
                         "failureThreshold": math.ceil(engine.readiness_timeout_s / PROBE_PERIOD_S)},
        "volumeMounts": mounts,
    })
    if gpus > 0:
        container["resources"] = {"limits": {GPU_RESOURCE: str(gpus)}}  # a quantity is a string
    return container


def templates_container(mount: Mount, image: str) -> dict[str, Any]:
    """Copies toolmatrix's chat templates out of the toolmatrix image for the engine (the docker launcher mounts
    them from this checkout; a Pod has no checkout, but the image holds the same files)."""
    relative = Path(mount.host).relative_to(data_root()).as_posix()
    code = ("import shutil; from toolmatrix.serving.registry import data_root; "
            f"shutil.copytree(data_root() / {relative!r}, {TEMPLATES_DIR!r}, dirs_exist_ok=True)")
    return {"name": "templates", "image": image, "command": ["python", "-c", code],
            "volumeMounts": [{"name": "templates", "mountPath": TEMPLATES_DIR}]}


def model_option(engine: EngineSpec, model: ModelSpec, shard: Shard, config: ContainerConfig,
                 registry: Mapping[str, ModelSpec]) -> tuple[str, list[dict[str, str]]]:
    """``--model`` for pytest against the sidecar, and the environment it needs.

    Against a URL pytest resolves a registry id to its spec (format, template, defaults) and asks for the spec's
    served name; any other name is taken as the served name, its format from $TOOLMATRIX_FAMILY.
    """
    served = render(engine.served_model, config.values)
    if shard.model in registry and served == model.served_name:
        return shard.model, []
    return served, [{"name": "TOOLMATRIX_FAMILY", "value": model.family}]


def test_container(shard: Shard, engine: EngineSpec, config: ContainerConfig, model_arg: str,
                   extra_env: list[dict[str, str]], image: str) -> dict[str, Any]:
    """toolmatrix running the shard's pytest against the sidecar, writing into the results claim."""
    command = with_options(shard.command, {
        "--launcher": "external",
        "--base-url": f"http://127.0.0.1:{config.port}{engine.api_prefix}",
        "--model": model_arg,
        # Kubernetes expands $(POD_NAME) in command and args: a retried pod writes beside the one before it.
        "--results-dir": f"{RESULTS_MOUNT}/{safe_name(shard.id)}/$(POD_NAME)",
    })
    return {"name": "toolmatrix", "image": image, "command": [*FINISHED_IS_SUCCESS, *command],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}, *extra_env],
            "volumeMounts": [{"name": "results", "mountPath": RESULTS_MOUNT}]}


def _config(shard: Shard, engine: EngineSpec, model: ModelSpec) -> ContainerConfig:
    if engine.docker is None:
        raise EmitError(f"{shard.id}: engine {engine.id!r} has no docker section ({engine.source.name}): "
                        "Kubernetes runs the engine from its container image")
    if engine.readiness_steps:
        steps = ", ".join(f"{s.method} {s.path}" for s in engine.readiness_steps)
        raise EmitError(f"{shard.id}: engine {engine.id!r} is ready only after {steps}, which a startupProbe "
                        "cannot do")
    try:
        return container_config(engine, model, run_id=shard.id)
    except LaunchError as exc:
        raise EmitError(f"{shard.id}: {exc}") from None


def job(shard: Shard, engines: Mapping[str, EngineSpec], models: Mapping[str, ModelSpec], *, toolmatrix_image: str,
        namespace: str | None = None, results_claim: str = DEFAULT_RESULTS_CLAIM,
        models_claim: str = DEFAULT_MODELS_CLAIM, env_secret: str = DEFAULT_ENV_SECRET) -> dict[str, Any]:
    """One shard's Job. Raises EmitError when the shard's engine cannot run in a Pod (the message says why)."""
    engine, model = engines[shard.engine], resolve_model(models, shard.model)
    config = _config(shard, engine, model)
    models_dir = docker_of(engine).models_dir  # _config: the engine has a docker launcher
    pairs = [_volume(m, models_dir, models_claim, i) for i, m in enumerate(config.mounts)] + _shm(config)
    init = [templates_container(m, toolmatrix_image) for m in config.mounts if m.container == TEMPLATES_DIR]
    model_arg, extra_env = model_option(engine, model, shard, config, models)
    name = job_name(shard)
    labels = {**LABELS, SHARD_LABEL: name}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": labels,
                "annotations": {SHARD_ANNOTATION: shard.id, "toolmatrix/command": shlex.join(shard.command)}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        # A copy of the labels: one dict in two places would be dumped as a YAML anchor and alias.
        # One retry, for a pod lost with its node; a drained or preempted node does not count, and a usage or
        # internal error (which a retry would only repeat) ends the Job at once. A sidecar that never gets ready
        # would hold its GPU forever: the deadline ends it.
        "spec": {"backoffLimit": 1,
                 "activeDeadlineSeconds": int(engine.readiness_timeout_s) + RUN_BUDGET_S,
                 "podFailurePolicy": {"rules": [
                     {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                     {"action": "FailJob", "onExitCodes": {"containerName": "toolmatrix", "operator": "NotIn",
                                                           "values": [0]}}]},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": {
            "restartPolicy": "Never",
            "initContainers": [*init, engine_container(engine, config, shard.gpus, [m for _, m in pairs],
                                                       env_secret)],
            "containers": [test_container(shard, engine, config, model_arg, extra_env, toolmatrix_image)],
            "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": results_claim}},
                        *_unique(v for v, _ in pairs)],
        }}},
    }


def _unique(volumes: Iterable[dict]) -> list[dict]:
    """Each volume once (two mounts of the models claim, say, share one volume)."""
    seen: dict[str, dict] = {}
    for volume in volumes:
        seen.setdefault(volume["name"], volume)
    return list(seen.values())


def manifests(plan: Plan, *, command_line: str, toolmatrix_image: str, namespace: str | None = None,
              results_claim: str = DEFAULT_RESULTS_CLAIM, models_claim: str = DEFAULT_MODELS_CLAIM,
              env_secret: str = DEFAULT_ENV_SECRET) -> str:
    """Every shard's Job as one multi-document YAML (``kubectl apply -f``).

    Args:
        plan: the shards; each runs its own pytest command, changed only to reach the sidecar and the volume.
        command_line: the command that generated it, named in the header comment.
        toolmatrix_image: an image with toolmatrix installed (none is published; docs/scale-out.md says how to build one).
        namespace: the Jobs' namespace (None: kubectl's current one).
        results_claim: the PersistentVolumeClaim the results go to, ``<shard>/<pod>/`` under its root.
        models_claim: the claim holding local weights (by file or folder name, at its root).
        env_secret: the Secret whose keys feed the variables engines read by name (e.g. HF_TOKEN); optional.

    Raises EmitError naming every shard that cannot run in a Pod.
    """
    engines, models = registry().engines, registry().models
    jobs, problems = [], []
    for shard in plan.shards:
        try:
            jobs.append(job(shard, engines, models, toolmatrix_image=toolmatrix_image, namespace=namespace,
                            results_claim=results_claim, models_claim=models_claim, env_secret=env_secret))
        except EmitError as exc:
            problems.append(str(exc))
    if problems:
        raise EmitError("; ".join(dict.fromkeys(problems)))
    return header(command_line) + yaml.safe_dump_all(jobs, sort_keys=False, width=10**6)

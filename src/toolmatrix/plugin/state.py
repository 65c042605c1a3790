"""One process's run (controller and workers alike): the options checked, the cases loaded, the engine and model
looked up, and (asked by the controller) the launcher, each surface's runner, and the ``Run`` each writer closes."""

from __future__ import annotations

import functools
import os
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs
import pytest

from toolmatrix.base.specs import SpecErrors
from toolmatrix.formats import get_family
from toolmatrix.library.bfcl import BfclUnavailable, case_source
from toolmatrix.library.cases import Case, CaseShard, case_files, load_cases
from toolmatrix.live.client import Target, make_client, make_http
from toolmatrix.live.evidence import MissingDependency, Witness, read_template, require_renderer
from toolmatrix.live.runner import EvidenceMode, Profile, Runner
from toolmatrix.live.sampling import Sampling
from toolmatrix.plugin.baseurl import base_url
from toolmatrix.records import SCHEMA_VERSION, EngineDeath, ExitStatus, Posted, RecordWriter, Run
from toolmatrix.serving.launchers import LAUNCHERS, ExternalLauncher, Launcher, LaunchError, default_launcher
from toolmatrix.serving.registry import (
    EngineSpec,
    EvidenceSpec,
    ModelSpec,
    data_root,
    family_from_env,
    load_registry,
    resolve_model,
)
from toolmatrix.serving.runinfo import Portable, hardware, program_name, toolmatrix_version
from toolmatrix.wire.surfaces import CHAT

if TYPE_CHECKING:
    from toolmatrix.library.fuzz import FuzzRun

state_key = pytest.StashKey["RunState"]()


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(f"--base-url {url!r}: not an http(s) URL (e.g. http://host:8000/v1)")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError as exc:
        raise pytest.UsageError(f"--base-url {url!r}: {exc}") from None


class RunState:
    """Everything the suite needs in one process: the cases, the pair, and (controller only) the engine."""

    def __init__(self, config: pytest.Config):
        self.config = config
        opt = config.getoption
        if not opt("--model"):
            raise pytest.UsageError("--model is required with --engine/--base-url (e.g. --model=gemma3-270m)")
        if opt("--api-key-env") and not os.environ.get(opt("--api-key-env")):
            raise pytest.UsageError(f"--api-key-env {opt('--api-key-env')}: that environment variable is not set "
                                    f"(or empty); nothing was started")
        if url := base_url(config):
            check_base_url(url)
        paths = [] if opt("--only-cases") else [data_root() / "cases"]
        try:  # a worker reads the bfcl: files its controller has just converted
            paths += [case_source(p, convert=is_controller(config)) for p in opt("--cases")]
        except BfclUnavailable as exc:
            raise pytest.UsageError(f"--cases: {exc}") from None
        try:
            # A worker reads the files its controller has just validated (a bad file stops the run before workers).
            self.cases: dict[str, Case] = {c.id: c for c in load_cases(paths, validate=is_controller(config))}
            self.fuzz = fuzz_run(config)
            if self.fuzz:
                from toolmatrix.library.fuzz import fuzz_cases  # hypothesis is imported only by a fuzzed run

                # A case kept by fuzz-keep and loaded from its file is this very case: the file's copy runs.
                generated = fuzz_cases(self.fuzz.seed, self.fuzz.count, validate=is_controller(config))
                self.cases.update({c.id: c for c in generated if c.id not in self.cases})
            self.case_shard: CaseShard | None = opt("--case-shard")
            if self.case_shard:
                self.cases = {i: c for i, c in self.cases.items() if self.case_shard.holds(i)}
            self.engine, self.model = self._pair(opt("--engine"), opt("--model"), base_url(config))
        except SpecErrors as exc:
            raise pytest.UsageError("invalid toolmatrix data:\n" + str(exc)) from None
        self.case_files = [str(p) for p in case_files(paths)]
        if not self.cases:
            where = ", ".join(self.case_files or map(str, paths))
            raise pytest.UsageError(f"no cases to run: {where} hold no case" if where
                                    else "no cases to run: --only-cases needs --cases PATH")
        self.family = get_family(self.model.family)  # registry families and TOOLMATRIX_FAMILY are validated
        if self.model.chat_template and EvidenceMode(opt("--evidence")) is not EvidenceMode.OFF:
            try:
                require_renderer()
            except MissingDependency as exc:
                raise pytest.UsageError(str(exc)) from None
        self.apis: tuple[str, ...] = opt("--api")
        self.sampling = Sampling(opt("--samples"), opt("--temperature"))
        self.launcher: Launcher | None = None
        self.writers: dict[str, RecordWriter] = {}  # per surface: its own results directory and run
        self.endpoint: dict[str, str] | None = None
        self.started = datetime.now(timezone.utc)
        results_dir = opt("--results-dir")
        self.results_dir = Path(results_dir) if results_dir else None
        self.portable = Portable.here(self.results_dir)
        self.run_id = config.workerinput["toolmatrix"]["run_id"] if hasattr(config, "workerinput") else (
            # The random tail keeps ids apart when shards of one pair start in the same second on many machines.
            f"{self.model.id}@{self.engine_id}-{self.started:%Y%m%dT%H%M%S}Z-{secrets.token_hex(3)}")
        self.verdicts: list[Posted] = []  # for the summary table (their lines are not kept)
        self.paired: dict[str, frozenset[tuple[str, int | None]]] = {}  # per surface: (case, sample) selected in
        # both modes (after -k, -m)

    def run_id_of(self, api: str) -> str:
        """The id of the run of one surface: a run (and a matrix cell) is one pair over one surface."""
        return self.run_id if api == CHAT else f"{self.run_id}-{api}"

    def results_dir_of(self, api: str) -> Path:
        """Where one surface's run is written: the results directory itself, or DIR/API when there are several."""
        assert self.results_dir is not None
        return self.results_dir if len(self.apis) == 1 else self.results_dir / api

    def open_writers(self) -> None:
        if self.results_dir is not None:
            self.writers = {api: RecordWriter(self.results_dir_of(api), self.portable.text) for api in self.apis}

    @property
    def engine_id(self) -> str:
        return self.engine.id if self.engine else "external"

    def _pair(self, engine_id: str | None, model_id: str, base_url: str | None) -> tuple[EngineSpec | None, ModelSpec]:
        engines, models = load_registry()
        engine = None
        if engine_id:
            if engine_id not in engines:
                raise pytest.UsageError(f"--engine {engine_id!r}: unknown engine; known: {', '.join(sorted(engines))}")
            engine = engines[engine_id]
        if base_url and model_id not in models:  # any served name works against a URL; its format: TOOLMATRIX_FAMILY
            try:
                return engine, ModelSpec.served_as(model_id, family_from_env())
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
        try:
            return engine, resolve_model(models, model_id)  # a registry id, or a source such as hf:ORG/NAME
        except ValueError as exc:
            raise pytest.UsageError(f"--model {model_id!r}: unknown model; known: {', '.join(sorted(models))}; "
                                    f"or {exc}") from None

    @property
    def launcher_kind(self) -> str:
        """``--launcher``, else the default for this run's engine (``default_launcher``)."""
        return self.config.getoption("--launcher") or default_launcher(base_url(self.config), self.engine)

    def make_launcher(self) -> Launcher:
        opt = self.config.getoption
        kind = self.launcher_kind
        if kind == "external":
            url = base_url(self.config)
            if not url:
                raise pytest.UsageError("--launcher=external needs --base-url")
            key_env = opt("--api-key-env")
            # The one-token request of its check takes no longer than a case's answer may (30 s at most).
            return ExternalLauncher(url, self.model.served_name, self.engine_id,
                                    os.environ.get(key_env) if key_env else None,
                                    min(opt("--request-timeout"), 30.0))
        if self.engine is None:
            raise pytest.UsageError(f"--launcher={kind} needs --engine")
        refusal = self.engine.refusal(self.model, kind)  # before anything is installed, pulled or started
        if refusal:
            raise pytest.UsageError(f"{self.model.id}@{self.engine.id} cannot be served: {refusal}")
        extra = {}
        if opt("--variant"):
            if kind != "docker":
                raise pytest.UsageError(f"--variant picks a docker image; it needs --launcher=docker (not {kind})")
            extra["variant"] = opt("--variant")
        try:
            if self.results_dir is not None:  # the engine's log is kept with the results it explains
                extra["log_dir"] = self.results_dir / "logs"
            return LAUNCHERS[kind](self.engine, self.model, slots=opt("--slots"), run_id=self.run_id, **extra)
        except LaunchError as exc:  # the pair cannot be served this way: say why, start nothing
            raise pytest.UsageError(f"--launcher={kind}: {exc}") from None

    @functools.cache  # noqa: B019 - one runner per surface for the session, which the state outlives
    def runner(self, api: str) -> Runner:
        assert self.endpoint is not None
        target = Target(self.endpoint["base_url"], self.endpoint["model"], self.config.getoption("--api-key-env"),
                        self.config.getoption("--request-timeout"), self.config.getoption("--max-answer-bytes"),
                        self.engine.keep_alive if self.engine else True)
        mode = EvidenceMode(self.config.getoption("--evidence"))
        witness = None if mode is EvidenceMode.OFF else Witness(
            self.engine.evidence if self.engine else EvidenceSpec.from_dict(
                {"unavailable": "no engine spec (--engine) says how this server tells the model's raw text"}),
            make_http(target), self.family,
            read_template(self.model.chat_template) if self.model.chat_template else None, self.model.special_tokens)
        return Runner(make_client(target, api), target.model, self.family, self.profile,
                      self.engine.pair_unsupported(self.model) if self.engine else {}, self.run_id_of(api), witness, mode,
                      self.paired.get(api, frozenset()), self.sampling)

    @property
    def profile(self) -> Profile:
        """What the model's spec adds to every request: the prelude and request defaults."""
        return Profile(self.model.prelude, self.model.request_defaults)

    def run_info(self, api: str, finished: datetime | None, exit_status: ExitStatus,
                 engine_death: EngineDeath | None) -> Run:
        describe = self.launcher.describe() if self.launcher else {
            "id": self.engine_id, "version": None, "launcher": self.launcher_kind, "flags": []}
        weights = self.launcher.weights_info() if self.launcher else {}
        return Run.from_dict(self.portable.data({
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id_of(api),
            "pair": f"{self.model.id}@{self.engine_id}",
            "api": api,
            "engine": describe,
            "model": {"id": self.model.id, "family": self.model.family, "served_name": self.model.served_name,
                      "weights": weights.get("weights"), "weights_sha256": weights.get("weights_sha256"),
                      "revision": weights.get("revision"),
                      "chat_template": weights.get("chat_template"),  # the file the launcher handed the engine
                      "chat_template_sha256": weights.get("chat_template_sha256")},
            "hardware": hardware(),
            "started": self.started.isoformat(),
            "finished": finished.isoformat() if finished else None,
            "toolmatrix_version": toolmatrix_version(),
            "command": [program_name(sys.argv[0]), *sys.argv[1:]],
            "cases": self.case_files,
            "case_shard": str(self.case_shard) if self.case_shard else None,
            "batch": self.config.getoption("--batch"),
            "shard": self.config.getoption("--shard"),
            "fuzz": self.fuzz.to_dict() if self.fuzz else None,
            "counts": dict(self.writers[api].counts) if api in self.writers else {},
            "exit_status": exit_status,
            "engine_death": engine_death and attrs.asdict(engine_death),
        }))


def is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def fuzz_run(config: pytest.Config) -> FuzzRun | None:
    """``--fuzz N`` with its seed: the one given, else a fresh one drawn by the controller (a worker is handed it)."""
    count, given = config.getoption("--fuzz"), config.getoption("--fuzz-seed")
    if count is None:
        if given is not None:
            raise pytest.UsageError("--fuzz-seed needs --fuzz N (how many cases to draw with it)")
        return None
    from toolmatrix.library.fuzz import FuzzRun, fresh_seed

    if not is_controller(config):
        return FuzzRun(config.workerinput["toolmatrix"]["fuzz_seed"], count)  # type: ignore[attr-defined]  # xdist's
    return FuzzRun(fresh_seed() if given is None else given, count)

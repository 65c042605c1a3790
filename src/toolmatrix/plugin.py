"""The pytest plugin: options, one engine per run, results, and the summary table.

``pytest`` alone tests the harness; ``pytest --engine=E --model=M`` (or ``--base-url=URL --model=M``) runs the
compatibility suite instead. The controller (the only process without ``workerinput``) loads and validates
the case library, starts the engine once, hands its URL to xdist workers through ``workerinput``, writes every
record, and stops the engine on every way out: pass, failure, Ctrl-C, SIGTERM. Comma lists in ``--engine`` or
``--model`` run one child pytest per pair instead (``pairs``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import re
import secrets
import shlex
import signal
import tempfile
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

import attrs
import pytest

from toolmatrix.argtypes import base_url, base_url_shared, case_shard, positive_int, positive_seconds, seed, temperature
from toolmatrix.library.bfcl import BfclUnavailable, case_source
from toolmatrix.library.cases import Case, CaseShard, case_files, load_cases
from toolmatrix.live.client import MAX_ANSWER_BYTES, Target, make_client, make_http
from toolmatrix.live.evidence import MissingDependency, Witness, read_template, require_renderer
from toolmatrix.live.enginewatch import EngineWatch
from toolmatrix.base.exitcodes import ENGINE_DIED, death_message
from toolmatrix.formats import get_family
from toolmatrix.serving.launchers import LAUNCHERS, ExternalLauncher, LaunchError, default_launcher
from toolmatrix.scale.pairs import run_on_cluster, run_pairs, wants_pairs
from toolmatrix.serving.registry import EngineSpec, EvidenceSpec, ModelSpec, data_root, family_from_env, load_registry, resolve_model
from toolmatrix.records import RUN, SCHEMA_VERSION, EngineDeath, ExitStatus, Posted, RecordWriter, Run
from toolmatrix.serving.runinfo import Portable, hardware, program_name, toolmatrix_version
from toolmatrix.live.runner import EvidenceMode, Profile, Runner, build_request, lost_record
from toolmatrix.live.sampling import SAMPLED_TEMPERATURE, Sampling, sample_suffix
from toolmatrix.scheduling import GroupScheduling, wants_grouping
from toolmatrix.report.summary import summary_table
from toolmatrix.base.specs import SpecErrors
from toolmatrix.wire.exchange import MODES
from toolmatrix.wire.surfaces import CHAT, SURFACES

if TYPE_CHECKING:
    from toolmatrix.library.fuzz import FuzzRun

SUITE = Path(__file__).parent / "suite" / "test_toolcalling.py"
RECORD_KEY = "toolmatrix_record"  # a Posted record, as a plain tuple
state_key = pytest.StashKey["RunState"]()


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("toolmatrix", "tool-calling compatibility suite")
    group.addoption("--engine", metavar="ENGINE", help="engine spec id (engines/ENGINE.yaml), e.g. llamacpp; a,b: several pairs, in turn")
    group.addoption("--model", metavar="MODEL", help="model id from engines/models.yaml, or the served model name with --base-url; a,b: several pairs")
    if not base_url_shared(pluginmanager):
        group.addoption("--base-url", metavar="URL", help="test a running OpenAI-compatible server (e.g. http://host:8000/v1)")
    group.addoption("--api", metavar="API[,API]", type=api_list, default=(CHAT,),
                    help=f"the surfaces each case is sent over: {', '.join(SURFACES)} (Chat Completions, the "
                         f"Responses API, the Anthropic Messages API); default chat. Several: a results directory "
                         f"each, DIR/API")
    group.addoption("--api-key-env", metavar="VAR", help="name of the environment variable holding the API key (the key is never written anywhere)")
    group.addoption("--launcher", choices=sorted(LAUNCHERS), default=None, help="how to start the engine (default: process, or external with --base-url)")
    group.addoption("--variant", metavar="NAME", help="docker variant of the engine spec, with --launcher=docker (e.g. llamacpp: cpu, local)")
    group.addoption("--cases", metavar="PATH", action="append", default=[], help="extra case file or directory, or bfcl:CATEGORY (BFCL's data, converted at run time; repeatable)")
    group.addoption("--only-cases", action="store_true", help="run only the --cases files' cases, not the built-in library's (its tool sets stay usable)")
    group.addoption("--results-dir", metavar="DIR", help="write DIR/results.jsonl and DIR/run.json")
    group.addoption("--no-matrix", action="store_true", help="do not build the matrix page into DIR/matrix after the run")
    group.addoption("--slots", metavar="N", type=positive_int, default=2, help="parallel request slots the engine is started with (default 2)")
    group.addoption("--request-timeout", metavar="S", type=positive_seconds, default=180.0,
                    help="seconds a whole exchange may take (headers, body, every stream chunk) before it is a timeout")
    group.addoption("--max-answer-bytes", metavar="N", type=positive_int, default=MAX_ANSWER_BYTES,
                    help=f"bytes of one answer that are kept and checked; a longer one is an error (default {MAX_ANSWER_BYTES})")
    group.addoption("--evidence", choices=[m.value for m in EvidenceMode], default=EvidenceMode.FAILURES.value,
                    help="ask the engine what the model itself wrote (its render and raw completion) to decide blame: "
                         "off, failures (default: only where blame is in question), all (conformance on passes too)")
    group.addoption("--ray", metavar="ADDRESS",
                    help="run each pair as a Ray task on the cluster at ADDRESS (auto, HOST:PORT or ray://...); "
                         "results come back into --results-dir (pip install 'toolmatrix[ray]')")
    group.addoption("--record-lost", metavar="REASON",
                    help="start no engine: record every selected case x mode as an infra error with REASON "
                         "(what an executor writes for a shard it lost with its machine)")
    group.addoption("--batch", metavar="ID", default=os.environ.get("TOOLMATRIX_BATCH") or None,
                    help="the fan-out this run is a shard of (default $TOOLMATRIX_BATCH): the runs of one batch "
                         "are one matrix cell per pair; executors set it")
    group.addoption("--shard", metavar="ID", help="which shard of a fan-out plan this run is (set by the plan)")
    group.addoption("--samples", metavar="K", type=positive_int, default=1,
                    help=f"ask each case x mode K times (ids and records get the sample, -s1..-sK); a case that is "
                         f"greedy by default samples at temperature {SAMPLED_TEMPERATURE:g} when K > 1 (default 1)")
    group.addoption("--temperature", metavar="T", type=temperature, default=None,
                    help="the sampling temperature of every case (default: the case's; see --samples)")
    group.addoption("--fuzz", metavar="N", type=positive_int, default=None,
                    help="add N generated cases (category fuzz): tool schemas and argument values drawn by "
                         "hypothesis; the failing ones are written to DIR/fuzz-failures.yaml")
    group.addoption("--fuzz-seed", metavar="S", type=seed, default=None,
                    help="the seed --fuzz draws its cases with (default: a fresh one, printed in the header and "
                         "kept in run.json and on every fuzz record)")
    group.addoption("--case-shard", metavar="I/N", type=case_shard, default=None,
                    help="run only the I-th of N slices of the cases (1 <= I <= N; a case stays in its slice as cases are added)")


def api_list(value: str) -> tuple[str, ...]:
    """``--api``: a comma list of known surfaces, each once, in the order given."""
    apis = tuple(dict.fromkeys(a.strip() for a in value.split(",") if a.strip()))
    unknown = [a for a in apis if a not in SURFACES]
    if unknown or not apis:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or repr(value)}: not a surface; known: {', '.join(SURFACES)}")
    return apis


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(f"--base-url {url!r}: not an http(s) URL (e.g. http://host:8000/v1)")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError as exc:
        raise pytest.UsageError(f"--base-url {url!r}: {exc}") from None


def check_results_dir(directory: str) -> None:
    """A results directory that can be written, made here if it is new: found out before any engine starts."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"--results-dir {directory}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        raise pytest.UsageError(f"--results-dir {directory}: cannot write there: {exc.strerror or exc}") from None


def target_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("--engine") or base_url(config))


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """--ray: every pair a Ray task on a cluster; comma lists in --engine/--model: each pair in a child pytest,
    one after another (pairs.py)."""
    if config.option.help or config.option.version:
        return None
    if not target_requested(config):
        given = [o for o in ("--ray", "--record-lost", "--case-shard", "--fuzz", "--fuzz-seed")
                 if config.getoption(o) is not None]
        if given:  # without a target pytest would run toolmatrix's own tests, and these would mean nothing
            raise pytest.UsageError(f"{given[0]} needs a target: --engine/--model (or --base-url)")
        return None
    if config.getoption("--record-lost") and config.getoption("numprocesses", None):
        raise pytest.UsageError("--record-lost writes its records from the one process: run it with -n 0")
    if config.getoption("--ray"):
        return run_on_cluster(config, config.getoption("--launcher"))
    return run_pairs(config, config.getoption("--launcher")) if wants_pairs(config) else None


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
        if base_url(config):
            check_base_url(base_url(config))
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
        self.launcher: Any = None
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

    def make_launcher(self) -> Any:
        opt = self.config.getoption
        kind = self.launcher_kind
        if kind == "external":
            if not base_url(self.config):
                raise pytest.UsageError("--launcher=external needs --base-url")
            return ExternalLauncher(base_url(self.config), self.model.served_name, self.engine_id)
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
        weights = self.launcher.weights_info() if hasattr(self.launcher, "weights_info") else {}
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


class ItemKey(NamedTuple):
    case_id: str
    mode: str
    api: str = CHAT
    sample: int | None = None


def item_key(nodeid: str) -> ItemKey | None:
    """What a suite item's node id names (``...::test_case[CASE-MODE]``, ``[CASE-MODE-sN]`` for sample N of
    ``--samples``, then ``-API`` over a surface other than chat, maybe with xdist's ``@group``)."""
    found = re.search(r"::test_case\[(.+)-(nonstream|stream)(?:-s(\d+))?(?:-(responses|messages))?\]", nodeid)
    if not found:
        return None
    return ItemKey(found.group(1), found.group(2), found.group(4) or CHAT, found.group(3) and int(found.group(3)))


def option_given(config: pytest.Config, pattern: str) -> bool:
    """Whether the user gave a pytest option (an argument matching ``pattern``) on the command line, in
    PYTEST_ADDOPTS or in the ini's addopts."""
    given = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
             *config.getini("addopts")]
    return any(re.fullmatch(pattern, str(arg)) for arg in given)


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
        return FuzzRun(config.workerinput["toolmatrix"]["fuzz_seed"], count)
    return FuzzRun(fresh_seed() if given is None else given, count)


def pytest_report_header(config: pytest.Config) -> str | None:
    state: RunState | None = config.stash.get(state_key, None)
    if state is None or state.fuzz is None:
        return None
    fuzz = state.fuzz
    return (f"toolmatrix fuzz: {fuzz.count} generated cases, seed {fuzz.seed} (hypothesis {fuzz.hypothesis}; "
            f"the same cases again: --fuzz {fuzz.count} --fuzz-seed {fuzz.seed})")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not target_requested(config):
        return
    state = config.stash[state_key] = RunState(config)
    # A matrix run ends with its table: pytest's per-failure sections before it and its per-item list after it
    # (hundreds of FAILED lines) would scroll it away, and the sections cost time quadratic in the failures at
    # the end of a big run: on each xdist worker too, whose terminal summary nobody reads (2.8 s of 2,016 items).
    # The records hold every failure; --tb=short and -rf bring both back.
    if not option_given(config, r"--tb.*"):
        config.option.tbstyle = "no"
    if not option_given(config, r"-[a-zA-Z]*r.*"):
        config.option.reportchars = ""
    if is_controller(config):
        config.pluginmanager.register(Controller(state), "toolmatrix-controller")
    else:
        state.endpoint = config.workerinput["toolmatrix"]["endpoint"]
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(), "toolmatrix-xdist")
    if config.args_source != pytest.Config.ArgsSource.ARGS or all(Path(a).is_dir() for a in config.args):
        config.args = [str(SUITE)]


class XdistHooks:
    """Registered only when xdist is present: hand the running engine to every worker."""

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        state: RunState = node.config.stash[state_key]
        node.workerinput["toolmatrix"] = {"run_id": state.run_id, "endpoint": state.endpoint,
                                          "fuzz_seed": state.fuzz.seed if state.fuzz else None}

    @pytest.hookimpl(tryfirst=True)  # before xdist's own choice from --dist
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Both modes of a case on one worker, so the stream is compared with its own non-streamed answer."""
        if not wants_grouping(config):
            return None
        return GroupScheduling(config, log, key=lambda nodeid: (item_key(nodeid) or (nodeid,))[0])

    @pytest.hookimpl
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died mid-case and xdist replaced it: remember the case, so it gets a record in any event."""
        controller = report.node.config.pluginmanager.get_plugin("toolmatrix-controller")
        key = item_key(crashitem)
        if controller is not None and key is not None:
            controller.crashed[key] = str(report.longrepr)


class Controller:
    """The controller's side of a run: start the engine once, write every record, stop the engine."""

    def __init__(self, state: RunState):
        self.state = state
        self.exit_status = ExitStatus.COMPLETE
        self.page: Path | None = None
        self.watch: EngineWatch | None = None
        self.crashed: dict[ItemKey, str] = {}  # why, for cases lost with a worker
        self.kept: list[str] = []  # what became of each run's failing generated cases (--fuzz)

    @property
    def death(self) -> EngineDeath | None:
        return self.watch.death if self.watch else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # tryfirst: before xdist starts its workers (trylast), which need the URL in workerinput.
        config, state = session.config, self.state
        if config.getoption("collectonly"):
            return
        if config.getoption("--record-lost"):
            self.exit_status = ExitStatus.LOST
            if config.getoption("--results-dir"):
                check_results_dir(config.getoption("--results-dir"))
                state.open_writers()
            return
        _stop_on_sigterm()
        state.launcher = state.make_launcher()  # refuses a pair it cannot serve, starting nothing
        if config.getoption("--results-dir"):
            check_results_dir(config.getoption("--results-dir"))
        started = time.monotonic()
        try:
            endpoint = state.launcher.start()
        except LaunchError as exc:
            raise pytest.UsageError(f"could not start {state.engine_id} with {state.model.id}: {exc}") from None
        state.endpoint = {"base_url": endpoint.base_url, "model": endpoint.served_model}
        self.watch = EngineWatch(state.launcher)
        config.get_terminal_writer().line(
            f"toolmatrix: {state.model.id}@{state.engine_id} ready at {endpoint.base_url} "
            f"in {time.monotonic() - started:.1f}s")
        state.open_writers()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The single writer: records reach the controller inside the call report, from any worker."""
        props = dict(report.user_properties) if report.when == "call" else {}
        if RECORD_KEY not in props:
            return
        if self.crashed:  # the crashed case ran again after all
            self.crashed.pop(item_key(report.nodeid), None)
        self.write(Posted(*props[RECORD_KEY]))

    def write(self, posted: Posted) -> None:
        posted = self.watch.observe(posted) if self.watch else posted
        self.state.verdicts.append(posted._replace(line=""))  # the summary counts; the line is on disk
        if posted.api in self.state.writers:
            self.state.writers[posted.api].write(posted)

    def _write_lost(self, key: ItemKey, model: str, why: str, **check: str) -> None:
        state = self.state
        case = state.cases[key.case_id]
        body = build_request(case, model, state.profile, state.sampling.fields(case.id, case.options, key.sample))
        self.write(Posted.of(lost_record(case, key.mode, body, state.run_id_of(key.api), why, api=key.api,
                                         sample=key.sample, **check)))

    def record_lost(self, items: list[pytest.Item], reason: str) -> None:
        """An error record, blamed on infra, for every selected item of a shard its executor lost."""
        for key in filter(None, (item_key(item.nodeid) for item in items)):
            self._write_lost(key, self.state.model.served_name, reason, check="executor", kind="SHARD_LOST")

    def write_lost(self) -> None:
        """Records for the cases that died with a worker and were not run again (a scope scheduler reruns the
        rest of a crashed worker's group, the crashed case included; load and worksteal drop it)."""
        for key, why in self.crashed.items():
            self._write_lost(key, self.state.endpoint["model"], why)
        self.crashed.clear()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write_lost()
        if exitstatus == pytest.ExitCode.INTERRUPTED:  # Ctrl-C or SIGTERM (xdist swallows the interrupt hook)
            self.exit_status = ExitStatus.INTERRUPTED
        elif exitstatus == pytest.ExitCode.INTERNAL_ERROR:  # never "complete": records may be missing
            self.exit_status = ExitStatus.INTERNAL_ERROR
        elif self.death is not None:
            self.exit_status = ExitStatus.ENGINE_DIED
            if exitstatus != pytest.ExitCode.INTERNAL_ERROR:
                session.exitstatus = ENGINE_DIED  # pytest returns what this hook leaves here
        self.finish()

    def pytest_unconfigure(self) -> None:
        self.finish()  # also reached when sessionstart failed half-way

    def finish(self) -> None:
        state = self.state
        finished = datetime.now(timezone.utc)
        runs = {api: state.run_info(api, finished, self.exit_status, self.death) for api in state.writers}
        if state.launcher is not None:
            state.launcher.stop()
        writers, state.writers = state.writers, {}
        for api, writer in writers.items():
            writer.close(runs[api])
        if writers:
            self.page = self.build_page([w.directory for w in writers.values()], state.results_dir)
        if writers and state.fuzz:
            self.kept = [self.keep_fuzz_failures(w.directory) for w in writers.values()]

    def keep_fuzz_failures(self, directory: Path) -> str:
        """The failing generated cases written out as a case file beside the records (fuzzkeep); what was done."""
        from toolmatrix.library.fuzzkeep import FAILURES, keep_failures

        try:
            kept = keep_failures(directory, directory / FAILURES)
        except Exception as exc:  # noqa: BLE001 - the run's results are already safe on disk
            return f"fuzz failures not written: {exc}"
        if not kept:
            return f"fuzz: no generated case failed ({directory})"
        return (f"fuzz: {kept} failing generated case(s) written to {directory / FAILURES} "
                f"(again: --only-cases --cases {directory / FAILURES})")

    def build_page(self, directories: list[Path], results_dir: Path) -> Path | None:
        """The matrix page of this run (a cell per surface), beside its results (a page problem never hides the
        results)."""
        if self.state.config.getoption("--no-matrix"):
            return None
        from toolmatrix.matrix import build_matrix

        try:
            build_matrix(directories, results_dir / "matrix")
        except Exception as exc:  # noqa: BLE001 - the run's results are already safe on disk
            self.state.config.get_terminal_writer().line(f"toolmatrix: matrix page not built: {exc}", red=True)
            return None
        return results_dir / "matrix" / "index.html"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state = self.state
        if not state.verdicts:
            return
        for api in state.apis:
            posted = [p for p in state.verdicts if p.api == api]
            if not posted:
                continue
            over = "" if state.apis == (CHAT,) else f" over {api}"
            terminalreporter.write_sep("=", f"toolmatrix: {state.model.id}@{state.engine_id}{over}")
            terminalreporter.write_line(summary_table(posted))
            if state.results_dir is not None:
                results = state.results_dir_of(api)
                terminalreporter.write_line(f"results: {results / 'results.jsonl'} and {results / RUN}")
        if self.page:
            terminalreporter.write_line(f"matrix page: {self.page}  (merge runs: toolmatrix matrix build DIR... -o OUT)")
        for line in self.kept:
            terminalreporter.write_line(line)
        if self.death:
            death = self.death
            terminalreporter.write_line(
                f"engine died ({death_message(death.exit_code, self.state.engine_id)}) after "
                f"{death.records_before} records: every later failed case is an error "
                f"(exit code {ENGINE_DIED}); engine log tail:", red=True, bold=True)
            terminalreporter.write_line(death.log_tail)


def _stop_on_sigterm() -> None:
    # SIGTERM takes the same orderly path as Ctrl-C: pytest unwinds, sessionfinish stops the engine.
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, handler)


# A record's line holds all the engine answered (up to --max-answer-bytes), and pytest keeps every item and every
# report to the end of the session: the line lives in the call report alone, and only until it is written.

def forget_record(properties: list) -> None:
    properties[:] = [(k, v) for k, v in properties if k != RECORD_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield  # a report copies the item's properties: the teardown report would carry the line again
    if call.when == "call":
        forget_record(item.user_properties)
    return report


@pytest.hookimpl(trylast=True)  # after the controller has written it, or xdist has sent it from a worker
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    forget_record(report.user_properties)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state: RunState | None = config.stash.get(state_key, None)
    if state is None:
        return
    modes: dict[tuple[str, str, int | None], set[str]] = {}
    for item in items:
        key = item_key(item.nodeid)
        if key is not None:
            modes.setdefault((key.api, key.case_id, key.sample), set()).add(key.mode)
            item.repr_failure = functools.partial(case_failure_repr, item)  # type: ignore[method-assign]
    paired = [(api, (case, sample)) for (api, case, sample), selected in modes.items() if len(selected) == len(MODES)]
    state.paired = {api: frozenset(asking for a, asking in paired if a == api) for api in state.apis}
    reason = config.getoption("--record-lost")
    if reason and is_controller(config):  # with -n 0: the executor runs this on its own machine
        config.pluginmanager.get_plugin("toolmatrix-controller").record_lost(items, reason)
        config.hook.pytest_deselected(items=items[:])
        items[:] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built lives to the end of the run, never garbage: a matrix run moves it out of the
    collector's sight, so each full collection while items run (and the ten at the end, in pytest's
    unraisable-exception plugin) walks only what the run made since."""
    if session.config.stash.get(state_key, None) is not None:
        gc.collect()
        gc.freeze()


def case_failure_repr(item: pytest.Function, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
    """A case fails with its record's reason (``pytest.fail`` without a traceback), so that is all pytest is
    given to print: the message, as a plain string. Its own ``repr_failure`` filters the traceback first, only
    to show the message (a millisecond per failure, a fifth of an item's time against a fast server), and its
    structured repr is a few dozen objects that xdist serializes from worker to controller, where one string
    is one."""
    if isinstance(excinfo.value, pytest.fail.Exception) and not excinfo.value.pytrace \
            and not item.config.getoption("fulltrace", False):
        return str(excinfo.value)
    return type(item).repr_failure(item, excinfo)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state: RunState | None = metafunc.config.stash.get(state_key, None)
    if state is None or "tm_case" not in metafunc.fixturenames:
        return
    params = [
        pytest.param(case, mode, api, sample,
                     id=f"{case.id}-{mode}{sample_suffix(sample)}" + ("" if api == CHAT else f"-{api}"))
        for api in state.apis
        for case in state.cases.values()
        for sample in state.sampling.indexes
        for mode in MODES
    ]
    metafunc.parametrize(("tm_case", "tm_mode", "tm_api", "tm_sample"), params)


@pytest.fixture(scope="session")
def toolmatrix_runners(pytestconfig: pytest.Config) -> Any:
    """The runner of each surface (``runners(api)``), made when first asked for."""
    state: RunState = pytestconfig.stash[state_key]
    if state.endpoint is None:
        pytest.skip("no engine running")
    return state.runner

"""The pytest plugin: its options and hooks. The rest of a run is the controller's (``controller``) and each
process's run state (``state``), registered and called from here, the way pytest-xdist's plugin registers its own.

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
import shlex
from pathlib import Path
from typing import Any

import pytest

from toolmatrix.base import settings
from toolmatrix.base.argtypes import positive_int, positive_seconds, seed, temperature
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.library.cases import case_shard
from toolmatrix.live.client import MAX_ANSWER_BYTES
from toolmatrix.live.runner import EvidenceMode
from toolmatrix.live.sampling import SAMPLED_TEMPERATURE, sample_suffix
from toolmatrix.plugin.baseurl import base_url, base_url_shared
from toolmatrix.plugin.controller import Controller
from toolmatrix.plugin.keys import RECORD_KEY, item_key
from toolmatrix.plugin.scheduling import GroupScheduling, wants_grouping
from toolmatrix.plugin.state import RunState, is_controller, state_key
from toolmatrix.scale.pairs import PairsRequest, run_on_cluster, run_pairs, wants_pairs
from toolmatrix.serving.launchers import LAUNCHERS
from toolmatrix.wire.exchange import MODES
from toolmatrix.wire.surfaces import CHAT, SURFACES

SUITE = Path(__file__).parent.parent / "suite" / "test_toolcalling.py"


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
    group.addoption("--batch", metavar="ID", default=settings.batch(),
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
    opt = config.getoption
    if not (opt("--ray") or wants_pairs(opt("--engine"), opt("--model"))):
        return None
    request = PairsRequest(opt("--engine"), opt("--model"), base_url(config), opt("--launcher"), opt("--results-dir"),
                           opt("--no-matrix"), tuple(config.invocation_params.args), config.invocation_params.dir)
    try:
        return run_on_cluster(request, opt("--ray")) if opt("--ray") else run_pairs(request)
    except ToolmatrixError as exc:  # the one place the pairs' errors become pytest's: a line, exit 4
        raise pytest.UsageError(str(exc)) from None


def option_given(config: pytest.Config, pattern: str) -> bool:
    """Whether the user gave a pytest option (an argument matching ``pattern``) on the command line, in
    PYTEST_ADDOPTS or in the ini's addopts."""
    given = [*config.invocation_params.args, *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
             *config.getini("addopts")]
    return any(re.fullmatch(pattern, str(arg)) for arg in given)


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
        state.endpoint = config.workerinput["toolmatrix"]["endpoint"]  # type: ignore[attr-defined]  # xdist's
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
            if isinstance(item, pytest.Function):  # a suite case always is
                item.repr_failure = functools.partial(case_failure_repr, item)  # type: ignore[method-assign]
    paired = [(api, (case, sample)) for (api, case, sample), selected in modes.items() if len(selected) == len(MODES)]
    state.paired = {api: frozenset(asking for a, asking in paired if a == api) for api in state.apis}
    reason = config.getoption("--record-lost")
    if reason and is_controller(config):  # with -n 0: the executor runs this on its own machine
        controller = config.pluginmanager.get_plugin("toolmatrix-controller")
        assert isinstance(controller, Controller)  # registered on the controller by pytest_configure
        controller.record_lost(items, reason)
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

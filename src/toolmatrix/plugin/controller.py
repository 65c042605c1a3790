"""The controller: the one process without ``workerinput``, registered by the plugin as an object of hooks. It
starts the engine once (its URL goes to the workers), writes every record, and on every way out (pass, failure,
Ctrl-C, SIGTERM) stops the engine, closes each run and builds its page."""

from __future__ import annotations

import contextlib
import json
import signal
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from toolmatrix.base.exitcodes import ENGINE_DIED, NO_ANSWER, death_message
from toolmatrix.live.enginewatch import EngineWatch
from toolmatrix.live.runner import build_request, lost_record
from toolmatrix.plugin.keys import RECORD_KEY, ItemKey, item_key
from toolmatrix.plugin.state import RunState
from toolmatrix.records import RUN, Blame, EngineDeath, ExitStatus, Posted, Record, Verdict
from toolmatrix.report.summary import summary_table
from toolmatrix.serving.launchers import LaunchError, NotServed
from toolmatrix.wire.surfaces import CHAT


def check_results_dir(directory: str) -> bool:
    """A results directory that can be written, made here if it is new (True: it was): found out before any
    engine starts."""
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise pytest.UsageError(f"--results-dir {directory}: exists and is not a directory")
    made = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        raise pytest.UsageError(f"--results-dir {directory}: cannot write there: {exc.strerror or exc}") from None
    return made


class Controller:
    """The controller's side of a run: start the engine once, write every record, stop the engine."""

    def __init__(self, state: RunState):
        self.state = state
        self.exit_status = ExitStatus.COMPLETE
        self.page: Path | None = None
        self.watch: EngineWatch | None = None
        self.crashed: dict[ItemKey, str] = {}  # why, for cases lost with a worker
        self.kept: list[str] = []  # what became of each run's failing generated cases (--fuzz)
        self.first_error: str | None = None  # the reason of the first infra error, for a run that had only those

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
        results_dir = config.getoption("--results-dir")
        made = check_results_dir(results_dir) if results_dir else False
        started = time.monotonic()
        try:
            endpoint = state.launcher.start()
        except LaunchError as exc:
            if made:  # a run that never began leaves no empty results directory behind
                with contextlib.suppress(OSError):
                    Path(results_dir).rmdir()
            if isinstance(exc, NotServed):  # nothing was started: the server or --model is not what the user thought
                raise pytest.UsageError(str(exc)) from None
            raise pytest.UsageError(f"could not start {state.engine_id} with {state.model.id}: {exc}") from None
        state.endpoint = {"base_url": endpoint.base_url, "model": endpoint.served_model}
        self.watch = EngineWatch(state.launcher)
        ready = (f"reached at {endpoint.base_url}: {endpoint.served}" if endpoint.served
                 else f"ready at {endpoint.base_url} in {time.monotonic() - started:.1f}s")
        config.get_terminal_writer().line(f"toolmatrix: {state.model.id}@{state.engine_id} {ready}")
        state.open_writers()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The single writer: records reach the controller inside the call report, from any worker."""
        props: dict[str, Any] = dict(report.user_properties) if report.when == "call" else {}  # ours: Posted tuples
        if RECORD_KEY not in props:
            return
        if self.crashed and (key := item_key(report.nodeid)) is not None:  # the crashed case ran again after all
            self.crashed.pop(key, None)
        self.write(Posted(*props[RECORD_KEY]))

    def write(self, posted: Posted) -> None:
        posted = self.watch.observe(posted) if self.watch else posted
        if self.first_error is None and posted.verdict == Verdict.ERROR and posted.blame == Blame.INFRA:
            self.first_error = Record.from_dict(json.loads(posted.line)).reason
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
        if not self.crashed:
            return
        endpoint = self.state.endpoint
        assert endpoint is not None  # a worker crashed on a case: the engine was up
        for key, why in self.crashed.items():
            self._write_lost(key, endpoint["model"], why)
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
        elif self.nothing_answered:
            session.exitstatus = NO_ANSWER
        self.finish()

    @property
    def nothing_answered(self) -> bool:
        """Every exchange of the run an infra error: it says nothing of tool calling, and 1 would say it did."""
        verdicts = self.state.verdicts
        return bool(verdicts) and all(p.verdict == Verdict.ERROR and p.blame == Blame.INFRA for p in verdicts)

    def pytest_keyboard_interrupt(self) -> None:
        # Also reached when the interrupt lands in a later plugin's sessionstart, where sessionfinish never runs.
        self.exit_status = ExitStatus.INTERRUPTED

    def pytest_unconfigure(self) -> None:
        if self.state.writers and self.exit_status == ExitStatus.COMPLETE:  # sessionfinish never ran: not complete
            self.exit_status = ExitStatus.INTERNAL_ERROR
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
        if writers and state.results_dir is not None:  # writers write under a results directory
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
        if self.nothing_answered and not self.death:
            terminalreporter.write_line(
                f"no case got an answer to judge: all {len(state.verdicts)} exchanges ended as infra errors, the "
                f"first: {self.first_error} (exit code {NO_ANSWER})", red=True, bold=True)
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

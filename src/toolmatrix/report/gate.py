"""The pre-deploy gate: compare runs with baseline runs and answer with an exit status.

Each side is a results directory or a folder of them (a snapshot, a run over several surfaces): each pair (model x
engine x surface) is judged against the baseline's run of the same pair; a pair only one side holds is an input
error. Two single runs are compared whatever their pairs (with a warning where they differ).

Exit status: 0 the gate passed; 1 it failed (a case x mode that passed in the baseline does not pass now, or a
category is under its ``--min-pass-rate``); 2 usage or input error (a missing, unreadable, invalid or damaged
baseline, results or allowlist: never read as a pass, nor as a regression). A case x mode that passes now and did
not in the baseline is listed as fixed. The same pair at another engine version (two releases of one engine's
replay runs, ``toolmatrix replay-sweep``'s ``DIR/ENGINE@VERSION``) is gated like any pair, the upgrade said in the
output: a team gates an engine bump on its parser replay without a GPU. Cells in the allowlist are known not
to work: they are neither regressions nor counted in pass rates. The JUnit XML has one test per case x mode and
one per threshold. ``--min-pass-lower`` thresholds the lower end of pass@1's 95 % Wilson interval (``passk``), so a
verdict over repeated samples (``--samples K``) gates on what the samples prove, not on their luck; a case x mode
passes the regression check only when all its samples passed (pass^k).
"""

from __future__ import annotations

import argparse
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Iterable, Mapping

import attrs
from junitparser import Failure, JUnitXml, Skipped, TestCase, TestSuite

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.specs import SpecErrors, read_yaml, schema_errors
from toolmatrix.records import (
    REPLAY,
    Outcome,
    ResultsError,
    RunInfo,
    Verdict,
    Word,
    fold,
    read_run_info,
    read_samples,
    repro_command,
    repro_prefix,
    run_dirs,
)
from toolmatrix.report.passk import sample_stats

EXIT_PASS, EXIT_FAILED, EXIT_INPUT = 0, 1, 2
ALL = "*"  # --min-pass-rate '*=0.8': every category together
Key = tuple[str, str]  # (case_id, mode)
Loaded = tuple[RunInfo, dict[Key, list[Outcome]]]  # a run and the outcome of each sample of each case x mode
Threshold = tuple["Measure", str, float]


class GateInputError(ToolmatrixError):
    """Inputs the gate cannot judge (exit 2); the message names the file or option and the problem."""


@attrs.frozen
class AllowEntry:
    """One known-unsupported cell of the allowlist; unset fields match anything."""

    reason: str
    case: str | None = None
    category: str | None = None
    mode: str | None = None
    pair: str | None = None
    where: str = ""  # file:line, to name stale entries

    def matches(self, pair: str, key: Key, category: str) -> bool:
        return all(pattern is None or fnmatchcase(value, pattern) for pattern, value in (
            (self.case, key[0]), (self.category, category), (self.mode, key[1]), (self.pair, pair)))


def load_allowlist(path: Path) -> tuple[AllowEntry, ...]:
    """The entries of a YAML allowlist; every problem (file, line, field) raised at once as GateInputError."""
    try:
        doc = read_yaml(path)
        errors = schema_errors(doc, "allowlist.schema.json")
        if errors:
            raise SpecErrors(errors)
    except SpecErrors as exc:
        raise GateInputError(f"invalid allowlist:\n{exc}") from None
    fields = ("reason", "case", "category", "mode", "pair")
    return tuple(
        AllowEntry(**{k: item.get(k) for k in fields}, where=f"{path}:{doc.line(('allow', index))}")
        for index, item in enumerate(doc.data["allow"])
    )


def parse_threshold(text: str) -> tuple[str, float]:
    """``CATEGORY=RATE`` with RATE in 0..1 or a percentage (``single=0.9``, ``single=90%``)."""
    category, sep, value = text.partition("=")
    try:
        rate = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        rate = -1.0
    if not sep or not category.strip() or not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"expected CATEGORY=RATE with RATE in 0..1 or 0%..100% (got {text!r})")
    return category.strip(), rate


class Ruling(Word):
    """The gate's word on one case x mode."""

    PASSED = "passed"
    FIXED = "fixed"  # passes now, did not in the baseline
    REGRESSION = "regression"  # passed in the baseline, does not now
    ALLOWED = "allowed"  # in the allowlist: not gated
    NOT_GATED = "not_gated"  # fails, but did not pass in the baseline either


@attrs.frozen
class Judgement:
    key: Key
    category: str
    ruling: Ruling
    message: str


class Measure(Word):
    """What a threshold is on."""

    PASS_RATE = "pass rate"  # end to end: the model and the engine together
    CONFORMANCE = "engine conformance"  # the engine alone: it returned what the model said, honouring the request
    PASS_LOWER = "pass@1 lower bound"  # the low end of the pass rate's 95 % Wilson interval, over case x mode


@attrs.frozen
class Rate:
    """One threshold and what the results scored on it."""

    measure: Measure
    category: str
    passed: int  # passing (pass rate) or conformant (conformance) records
    total: int  # records gated (pass rate) or answered and gated (conformance)
    threshold: float
    present: bool = True  # the category has records in the results at all
    lower: float | None = None  # PASS_LOWER: the interval's low end (passed/total then count samples)
    mean: float | None = None  # PASS_LOWER: pass@1, the mean over case x mode of their passing samples' share

    @property
    def score(self) -> float:
        return self.lower if self.lower is not None else self.passed / self.total

    @property
    def breached(self) -> bool:
        # No record left: all allowlisted (nothing to judge), or none run at all (a breach).
        return not self.present or (self.total > 0 and self.score < self.threshold)

    @property
    def option(self) -> str:
        return {Measure.PASS_RATE: "min_pass_rate", Measure.CONFORMANCE: "min_conformance",
                Measure.PASS_LOWER: "min_pass_lower"}[self.measure]

    def __str__(self) -> str:
        got = f"{100 * self.score:.1f}%" if self.total else "no records"
        if self.measure is Measure.PASS_LOWER and self.total and self.mean is not None:
            return (f"{self.category}: {self.measure} {got} (pass@1 {100 * self.mean:.1f}%, {self.passed}/{self.total} "
                    f"samples) < {100 * self.threshold:g}%")
        return f"{self.category}: {self.measure} {got} ({self.passed}/{self.total}) < {100 * self.threshold:g}%"


@attrs.frozen
class GateReport:
    """Everything the gate found on one pair; ``exit_code`` is its answer."""

    pair: str
    baseline: str
    results: str
    judgements: tuple[Judgement, ...]
    rates: tuple[Rate, ...]  # one per threshold
    warnings: tuple[str, ...]
    repro: Mapping[Key, str] = attrs.field(factory=dict, repr=False)
    tier: str = "live"  # replay: the engine's output parser fed given text (no model ran)
    versions: tuple[str | None, str | None] = (None, None)  # the engine's version in the baseline, in the results

    @property
    def breaches(self) -> tuple[Rate, ...]:
        return tuple(r for r in self.rates if r.breached)

    @property
    def regressions(self) -> tuple[Judgement, ...]:
        return tuple(v for v in self.judgements if v.ruling is Ruling.REGRESSION)

    @property
    def fixed(self) -> tuple[Judgement, ...]:
        return tuple(v for v in self.judgements if v.ruling is Ruling.FIXED)

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.regressions or self.breaches else EXIT_PASS

    def lines(self) -> list[str]:
        allowed = [v for v in self.judgements if v.ruling is Ruling.ALLOWED]
        known = [v for v in self.judgements if v.ruling is Ruling.NOT_GATED]
        tier = " (parser replay: the engine's parser on given text, no model ran)" if self.tier == REPLAY else ""
        out = [f"gate: {self.pair}{tier}: results {self.results} against baseline {self.baseline}"]
        if self.versions[0] != self.versions[1]:
            out.append(f"upgrade: engine version {self.versions[0] or '?'} in the baseline, {self.versions[1] or '?'} "
                       "in the results")
        out += [f"warning: {w}" for w in self.warnings]
        for v in self.regressions:
            out += [f"REGRESSION {v.key[0]} [{v.key[1]}]: {v.message}", f"  repro: {self.repro[v.key]}"]
        out += [f"UNDER THRESHOLD {b}" for b in self.breaches]
        out += [f"fixed {v.key[0]} [{v.key[1]}]: {v.message}" for v in self.fixed]
        if allowed:
            out.append(f"allowlisted: {len(allowed)} case x mode(s) not gated")
        if known:
            out.append(f"not gated: {len(known)} case x mode(s) failing but not passing in the baseline either")
        verdict = "PASSED" if self.exit_code == EXIT_PASS else (
            f"FAILED ({len(self.regressions)} regression(s), {len(self.breaches)} category(ies) under threshold)")
        return out + [f"gate: {verdict}"]


@attrs.frozen
class Gating:
    """The gate over every pair: a report each, and the allowlist entries that matched nothing in any."""

    reports: tuple[GateReport, ...]
    unused_allow: tuple[AllowEntry, ...]

    @property
    def exit_code(self) -> int:
        return max(r.exit_code for r in self.reports)

    def lines(self) -> list[str]:
        out = [line for r in self.reports for line in r.lines()]
        out += [f"warning: allowlist entry {e.where} matched nothing (stale?)" for e in self.unused_allow]
        if len(self.reports) > 1:
            failed = [r.pair for r in self.reports if r.exit_code != EXIT_PASS]
            out.append(f"gate: {len(self.reports)} pairs: " + (
                f"FAILED ({len(failed)} pair(s): {', '.join(failed)})" if failed else "PASSED"))
        return out


def _runs(root: Path, role: str) -> dict[str, Loaded]:
    """Each pair's run at or under ``root``, read (one, without ``--samples``, outcome per case x mode)."""
    try:
        directories = run_dirs(root)
        runs: dict[str, Loaded] = {}
        for directory in directories:
            info = read_run_info(directory)
            if info.pair in runs:  # which would be the pair's verdict is not the gate's to guess
                raise GateInputError(f"{role}: {root} holds two runs of {info.pair}: {runs[info.pair][0].path} "
                                     f"and {directory}; name one")
            runs[info.pair] = info, read_samples(info)
        return runs
    except ResultsError as exc:
        raise GateInputError(f"{role}: {exc}") from None


def _pairs(before: dict[str, Loaded], now: dict[str, Loaded], baseline: Path,
           results: Path) -> list[tuple[Loaded, Loaded]]:
    """(baseline run, run) of each pair; two single runs are a pair whatever their pairs."""
    if len(before) == 1 and len(now) == 1:
        (only_before,), (only_now,) = before.values(), now.values()
        return [(only_before, only_now)]
    missing = [f"pair {p} is in the results but not in the baseline {baseline}"
               for p in sorted(now.keys() - before.keys())]
    missing += [f"pair {p} is in the baseline but not in the results {results}"
                for p in sorted(before.keys() - now.keys())]
    if missing:
        raise GateInputError("; ".join(missing))
    return [(before[p], now[p]) for p in sorted(now)]


def _judge(pair: str, before: dict[Key, Outcome], now: dict[Key, Outcome],
           allow: tuple[AllowEntry, ...], used: set[AllowEntry]) -> list[Judgement]:
    judgements = []
    for key in sorted(before.keys() | now.keys()):
        was, cur = before.get(key), now.get(key)
        outcome = cur or was
        assert outcome is not None  # the key is in one of the two
        category = outcome.category
        entry = next((e for e in allow if e.matches(pair, key, category)), None)
        if entry is not None:
            used.add(entry)
            judgements.append(Judgement(key, category, Ruling.ALLOWED, f"allowlisted ({entry.where}): {entry.reason}"))
        elif cur is not None and cur.verdict is Verdict.PASS:
            judgements.append(Judgement(key, category, Ruling.PASSED, "") if was is None or was.verdict is Verdict.PASS
                              else Judgement(key, category, Ruling.FIXED, f"{was.verdict} in the baseline, passes now"))
        elif was is not None and was.verdict is Verdict.PASS:
            message = ("passed in the baseline, missing from the results" if cur is None else
                       f"passed in the baseline, now {cur.verdict} (blame: {cur.blame}): {cur.reason}")
            judgements.append(Judgement(key, category, Ruling.REGRESSION, message))
        elif cur is not None:
            origin = "new case" if was is None else f"{was.verdict} in the baseline too"
            judgements.append(Judgement(key, category, Ruling.NOT_GATED, f"{cur.verdict} ({origin}): {cur.reason}"))
    return judgements


def _check_thresholds(thresholds: Iterable[Threshold], known: set[str]) -> None:
    """GateInputError for a threshold on a category no run on either side holds (a typo gates nothing)."""
    for measure, category, threshold in thresholds:
        if category != ALL and category not in known:
            raise GateInputError(f"--{Rate(measure, category, 0, 0, threshold).option.replace('_', '-')} "
                                 f"{category}={threshold}: unknown category {category!r} "
                                 f"(known: {', '.join(sorted(known)) or 'none'})")


def _categories(*runs: Loaded) -> set[str]:
    return {o.category for _, samples in runs for outcomes in samples.values() for o in outcomes}


def _rates(judgements: list[Judgement], samples: dict[Key, list[Outcome]],
           thresholds: Iterable[Threshold]) -> list[Rate]:
    """Each threshold over the results' records that are not allowlisted."""
    now = {key: fold(outcomes) for key, outcomes in samples.items()}
    gated = [j for j in judgements if j.key in now and j.ruling is not Ruling.ALLOWED]
    rates = []
    for measure, category, threshold in thresholds:
        scope = [j for j in gated if category in (ALL, j.category)]
        present = any(category in (ALL, o.category) for o in now.values())
        if measure is Measure.PASS_LOWER:
            rates.append(_lower_rate(category, threshold, present, {j.key: samples[j.key] for j in scope}))
            continue
        if measure is Measure.PASS_RATE:
            passed, total = sum(j.ruling in (Ruling.PASSED, Ruling.FIXED) for j in scope), len(scope)
        else:
            judged = [conformant for j in scope if (conformant := now[j.key].conformant) is not None]
            passed, total = sum(judged), len(judged)
        rates.append(Rate(measure, category, passed, total, threshold, present))
    return rates


def _lower_rate(category: str, threshold: float, present: bool, samples: dict[Key, list[Outcome]]) -> Rate:
    """``--min-pass-lower``: pass@1 of the gated case x mode and the low end of its interval."""
    outcomes = [o for group in samples.values() for o in group]
    passed = sum(o.verdict is Verdict.PASS for o in outcomes)
    if not samples:
        return Rate(Measure.PASS_LOWER, category, passed, 0, threshold, present)
    stats = sample_stats(samples)["pass_at_1"]
    return Rate(Measure.PASS_LOWER, category, passed, len(outcomes), threshold, present, stats["interval"][0],
                stats["mean"])


def run_gate(baseline: Path, results: Path, *, min_pass_rates: Mapping[str, float] | None = None,
             min_conformance: Mapping[str, float] | None = None, min_pass_lower: Mapping[str, float] | None = None,
             allowlist: Path | None = None, junit_xml: Path | None = None) -> Gating:
    """Judge ``results`` against ``baseline`` (each a results directory or a folder of them), pair by pair.
    Raises GateInputError for exit 2."""
    allow = load_allowlist(allowlist) if allowlist else ()
    before, now = _runs(baseline, "baseline"), _runs(results, "results")
    pairs = _pairs(before, now, baseline, results)
    thresholds = [(Measure.PASS_RATE, c, t) for c, t in (min_pass_rates or {}).items()]
    thresholds += [(Measure.CONFORMANCE, c, t) for c, t in (min_conformance or {}).items()]
    thresholds += [(Measure.PASS_LOWER, c, t) for c, t in (min_pass_lower or {}).items()]
    _check_thresholds(thresholds, _categories(*before.values(), *now.values()))
    used: set[AllowEntry] = set()
    gating = Gating(tuple(_gate_pair(base, run, allow, used, thresholds) for base, run in pairs),
                    tuple(e for e in allow if e not in used))
    if junit_xml is not None:
        write_junit(gating, junit_xml)
    return gating


def _gate_pair(baseline: Loaded, results: Loaded, allow: tuple[AllowEntry, ...], used: set[AllowEntry],
               thresholds: list[Threshold]) -> GateReport:
    """One pair's run against its baseline run; ``used`` gathers the allowlist entries that matched. A threshold
    on a category neither run holds does not apply to the pair."""
    (base_info, base_samples), (info, samples) = baseline, results
    if not base_samples:
        raise GateInputError(f"baseline: {base_info.path}: no records (a gate against nothing would always pass)")
    before = {key: fold(outcomes) for key, outcomes in base_samples.items()}
    now = {key: fold(outcomes) for key, outcomes in samples.items()}
    warnings = []
    if base_info.pair != info.pair:
        warnings.append(f"comparing different pairs: results {info.pair}, baseline {base_info.pair}")
    judgements = _judge(info.pair, before, now, allow, used)
    known = _categories(baseline, results)
    rates = _rates(judgements, samples, [t for t in thresholds if t[1] in (ALL, *known)])
    prefix = repro_prefix(info.run)
    return GateReport(
        info.pair, f"{base_info.path} (run {base_info.run_id})", f"{info.path} (run {info.run_id})",
        tuple(judgements), tuple(rates), tuple(warnings),
        {v.key: repro_command(prefix, *v.key) for v in judgements if v.ruling is Ruling.REGRESSION},
        info.run.engine.tier, (base_info.run.engine.version, info.run.engine.version))


_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    return _XML_BAD.sub("\ufffd", text)  # model output may hold characters XML 1.0 cannot carry


def write_junit(gating: Gating, path: Path) -> None:
    """A testsuite per pair: one test per case x mode (failure = regression, skipped = not gated) and one per
    threshold."""
    xml = JUnitXml("toolmatrix gate")
    for report in gating.reports:
        xml.add_testsuite(_junit_suite(report))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        xml.write(str(path), pretty=True)
    except OSError as exc:
        raise GateInputError(f"--junit-xml {path}: cannot write: {exc.strerror}") from None


def _junit_suite(report: GateReport) -> TestSuite:
    suite = TestSuite(_xml(f"toolmatrix gate {report.pair}"))
    for v in report.judgements:
        case = TestCase(_xml(f"{v.key[0]}[{v.key[1]}]"), classname=_xml(f"{report.pair}.{v.category}"))
        if v.ruling is Ruling.REGRESSION:
            failure = Failure(_xml(v.message), type_="regression")
            failure.text = _xml(f"{v.message}\nrepro: {report.repro[v.key]}")
            case.result = [failure]
        elif v.ruling in (Ruling.ALLOWED, Ruling.NOT_GATED):
            case.result = [Skipped(_xml(v.message))]
        suite.add_testcase(case)
    for rate in report.rates:
        case = TestCase(_xml(f"{rate.option}[{rate.category}]"), classname=_xml(f"{report.pair}.gate"))
        if rate.breached:
            case.result = [Failure(_xml(str(rate)), type_="threshold")]
        suite.add_testcase(case)
    return suite

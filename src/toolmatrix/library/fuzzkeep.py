"""``toolmatrix fuzz-keep``: the generated cases that failed in a fuzzed run, written out as an ordinary case file.

A fuzzed run (``--fuzz N``) keeps its seed, count and hypothesis version in run.json and the seed on every
generated case's record. From those the failing cases are drawn again (``toolmatrix.library.fuzz``: the same seed and
version draw the same case) and written as a case file of category ``fuzz``, checked by the case loader before it
is written: ``--cases FILE`` runs them again without hypothesis, so a failure found once reproduces forever. A
run writes the file itself at its end (``DIR/fuzz-failures.yaml``) when a generated case failed.

A failing case is one whose record in either mode is a ``fail``, or an ``error`` that is not the infrastructure's
(a timeout on a slow machine says nothing about the schema).
"""

from __future__ import annotations

from pathlib import Path

import hypothesis

from toolmatrix.base.atomic import write_text
from toolmatrix.base.specs import SpecErrors
from toolmatrix.library.cases import load_case_text
from toolmatrix.library.fuzz import FuzzRun, case_entry, case_file, draw_scenario
from toolmatrix.records import Blame, ResultsError, Verdict, read_records, read_run_info

FAILURES = "fuzz-failures.yaml"  # what a fuzzed run writes beside its records


def failure_reasons(directory: Path) -> tuple[FuzzRun, str, dict[int, str]]:
    """The run's fuzz settings, a line naming the run, and each failing generated case's number -> its reason."""
    info = read_run_info(directory)
    if info.run.fuzz is None:
        raise ResultsError(f"{directory}: not a fuzzed run (its run.json has no fuzz: run pytest with --fuzz N)")
    fuzz = FuzzRun(**info.run.fuzz)
    if fuzz.hypothesis != hypothesis.__version__:
        raise ResultsError(f"{directory}: its cases were drawn by hypothesis {fuzz.hypothesis}, this is "
                           f"{hypothesis.__version__}, which may draw others for the seed: install hypothesis=="
                           f"{fuzz.hypothesis} to keep them")
    reasons: dict[int, str] = {}
    for record in read_records(directory):
        failed = record.verdict is Verdict.FAIL or (record.verdict is Verdict.ERROR and record.blame is not Blame.INFRA)
        if record.fuzz_seed is not None and failed:
            number = int(record.case_id.rpartition(".")[2])
            reasons.setdefault(number, f"{record.mode}: {record.verdict} ({record.blame}) {record.reason}")
    run = f"{info.run.cell_key}, run {info.run_id} ({info.run.started[:10]})"
    return fuzz, run, dict(sorted(reasons.items()))


def keep_failures(directory: Path, out: Path) -> int:
    """Write the failing generated cases of the results ``directory`` to the case file ``out``; how many (none:
    no file is written)."""
    fuzz, run, reasons = failure_reasons(directory)
    if not reasons:
        return 0
    entries = []
    for number, reason in reasons.items():
        entry = case_entry(draw_scenario(fuzz.seed, number), fuzz.seed, number)
        entry["description"] += f"; failed on {run}: {reason[:300]}"
        entries.append(entry)
    text = case_file(entries, f"Generated cases (--fuzz {fuzz.count} --fuzz-seed {fuzz.seed}, hypothesis "
                              f"{fuzz.hypothesis}) that failed on {run}; written by toolmatrix fuzz-keep. Run them "
                              f"again, without hypothesis: pytest --engine=E --model=M --only-cases --cases THIS_FILE")
    try:
        load_case_text(text, str(out))  # a file that does not load would reproduce nothing
    except SpecErrors as exc:
        raise RuntimeError(f"fuzz-keep wrote a case file the loader refuses (a toolmatrix bug):\n{exc}") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, text)
    return len(entries)

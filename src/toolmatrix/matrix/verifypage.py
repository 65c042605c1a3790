"""What ``toolmatrix replay-verify`` leaves beside its records: ``DIR/verify.json`` and ``DIR/index.html``.

verify.json: the engine and release, the change's applied and not-applied files, the counts, the exit status the
command gives, and per fixture (broken first, then fixed, then unchanged) its outcome, the modes that flipped and,
for each side (``base``: the release, ``change``: the release with the change), the path of its results.jsonl
(relative to DIR, so the folder can be moved or committed whole) and the line of each mode's record there.

index.html: the same as a static page, no script and nothing fetched (it opens from disk): the summary line, each
broken and fixed fixture with its modes' verdicts before -> after and both records side by side (the reason, the
failing checks and the parser's output, as the matrix page shows a failing record: ``detail.failure_detail``; the
fixture's expectation once), each record linked to its line; the unchanged fixtures collapsed, a line a mode. Every
text from a record goes through ``html.escape``, and the Content-Security-Policy (``page``'s, from the template's
own style) admits no script at all.
"""

from __future__ import annotations

import html
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple
from urllib.parse import quote

from toolmatrix.base.atomic import write_json, write_text
from toolmatrix.matrix.detail import BLOB_CAP, REASON_CAP, cap, failure_detail
from toolmatrix.matrix.page import csp_hashes
from toolmatrix.records import read_run_info, scan_records
from toolmatrix.replay.verify import BROKEN, FIXED, UNCHANGED, Change, outcome

SIDES = ("base", "change")
SIDE_NAMES = {"base": "the release", "change": "with the change"}
ORDER = (BROKEN, FIXED, UNCHANGED)
PLACEHOLDER = "<!--TOOLMATRIX_VERIFY-->"
DETAIL_BUDGET = 2_000_000  # characters of records (as written) whose output the page embeds; past it, a link alone


class _Seen(NamedTuple):
    """One record as the report needs it; ``size``: its line's length, what embedding it may cost the page."""

    line: int
    verdict: str
    reason: str
    size: int


_Sides = Mapping[str, Mapping[str, Mapping[str, _Seen]]]  # side -> fixture -> mode -> its record


def _results(side: str, engine: str) -> str:
    return f"{side}/{engine}/results.jsonl"


def _scan(directory: Path) -> dict[str, dict[str, _Seen]]:
    """fixture -> mode -> its record of one side's run."""
    seen: dict[str, dict[str, _Seen]] = defaultdict(dict)
    for line in scan_records(read_run_info(directory)):
        data = line.data
        seen[data["case_id"]][data["mode"]] = _Seen(line.number, data["verdict"], data["reason"], len(line.raw))
    return seen


def _modes(*sides: Mapping[str, Any]) -> list[str]:
    """The modes of a fixture's records in the order its runs wrote them (the first side's, then any other)."""
    return list(dict.fromkeys(mode for side in sides for mode in side))


def verify_report(seen: _Sides, engine: str, release: str | None, change: Change,
                  flips: Mapping[str, Mapping[str, list[str]]]) -> dict:
    """verify.json's data: ``verify``'s comparison with the records of both sides (``_scan``)."""
    by = {kind: sorted(f for f, modes in flips.items() if outcome(modes) == kind) for kind in ORDER}
    fixtures = []
    for kind in ORDER:
        for fixture in by[kind]:
            entry: dict[str, Any] = {"id": fixture, "outcome": kind, FIXED: list(flips[fixture][FIXED]),
                                     BROKEN: list(flips[fixture][BROKEN])}
            for side in SIDES:
                records = seen[side].get(fixture, {})
                entry[side] = {"results": _results(side, engine),
                               "lines": {m: records[m].line for m in _modes(records)},
                               "verdicts": {m: records[m].verdict for m in _modes(records)}}
            fixtures.append(entry)
    return {
        "engine": engine,
        "release": release,
        "change": {"applied": list(change.applied), "not_applied": list(change.not_applied)},
        "counts": {**{kind: len(by[kind]) for kind in ORDER}, "fixtures": len(flips)},
        "exit_status": 1 if by[BROKEN] else 0,
        "results": {side: _results(side, engine) for side in SIDES},
        "fixtures": fixtures,
    }


def _embedded(directory: Path, report: dict, seen: _Sides) -> dict[tuple[str, str, str], dict]:
    """(side, fixture, mode) -> what the page shows of that record (``failure_detail``, and the fixture's
    description), for the broken and fixed fixtures in page order while their records fit ``DETAIL_BUDGET``. The page
    shows the fixture's expectation once (``_about``), not each record's diff against it."""
    wanted: set[str] = set()
    left = DETAIL_BUDGET
    for entry in report["fixtures"]:
        if entry["outcome"] == UNCHANGED:
            break
        size = sum(min(r.size, 3 * BLOB_CAP) for side in SIDES for r in seen[side].get(entry["id"], {}).values())
        if size > left:
            break  # first come: a later, smaller one would read as a random pick
        left -= size
        wanted.add(entry["id"])
    details = {}
    for side in SIDES:
        if not wanted:
            break
        for line in scan_records(read_run_info(directory / side / report["engine"])):
            if line.data["case_id"] in wanted:
                details[side, line.data["case_id"], line.data["mode"]] = {
                    **failure_detail(line.data), "description": line.data.get("description")}
    return details


def _text(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _verdict(verdict: str | None) -> str:
    shown = verdict or "none"
    return f'<span class="verdict {_text(shown)}">{_text(verdict or "no record")}</span>'


def _pre(text: str, kind: str) -> str:
    return f'<pre class="{kind}">{_text(text)}</pre>'


def _record(side: str, entry: dict, mode: str, seen: _Seen | None, detail: dict | None) -> str:
    """One side's record of a mode: its link (file and line), verdict, reason, and what the parser made of it."""
    if seen is None:
        return f'<td class="side {side}"><p class="muted">no record of this mode</p></td>'
    results = entry[side]["results"]
    parts = [f'<a class="record" href="{_text(quote(results))}" title="line {seen.line} of {_text(results)}">'
             f'{_text(results)} line {seen.line}</a> {_verdict(seen.verdict)}']
    if seen.reason:
        parts.append(f'<p class="reason">{_text(cap(seen.reason, REASON_CAP))}</p>')
    if detail is None:
        if entry["outcome"] != UNCHANGED:
            parts.append('<p class="note">Output not embedded (page size cap): the record is the line linked.</p>')
        return f'<td class="side {side}">{"".join(parts)}</td>'
    if detail["checks"]:
        parts.append('<ul class="checks">' + "".join(
            f'<li><strong>{_text(c["name"])}</strong>: {_text(c["detail"])}</li>' for c in detail["checks"]) + "</ul>")
    if "chunks" in detail:
        parts.append("<h4>The parser's output: stream chunks, in order</h4>" + _pre(detail["chunks"], "output chunks"))
    if "response" in detail:
        parts.append("<h4>The parser's output: the response</h4>" + _pre(detail["response"], "output response"))
    if detail.get("error"):
        parts.append("<h4>Error</h4>" + _pre(detail["error"], "error"))
    return f'<td class="side {side}">{"".join(parts)}</td>'


def _mode_row(entry: dict, mode: str, seen: _Sides, details: dict) -> str:
    flipped = FIXED if mode in entry[FIXED] else BROKEN if mode in entry[BROKEN] else None
    before, after = (entry[side]["verdicts"].get(mode) for side in SIDES)
    cells = "".join(_record(side, entry, mode, seen[side].get(entry["id"], {}).get(mode),
                            details.get((side, entry["id"], mode))) for side in SIDES)
    return (f'<tr class="mode{" flip-" + flipped if flipped else ""}" data-mode="{_text(mode)}">'
            f'<th class="mode" scope="row">{_text(mode)}<br>{_verdict(before)} &rarr; {_verdict(after)}'
            f'{"<br>" + flipped if flipped else ""}</th>{cells}</tr>')


def _about(entry: dict, modes: list[str], details: dict) -> str:
    """What the fixture is (its description: where it came from) and what it expects, from its first record shown."""
    shown = next((details[key] for key in ((side, entry["id"], m) for m in modes for side in SIDES) if key in details),
                 None)
    if shown is None:
        return ""
    about = f'<p class="description">{_text(shown["description"])}</p>' if shown["description"] else ""
    if "expect" in shown:
        about += f'<details class="expect"><summary>Expected</summary>{_pre(shown["expect"], "expect")}</details>'
    return about


def _fixture(number: int, entry: dict, seen: _Sides, details: dict) -> str:
    modes = _modes(entry["base"]["lines"], entry["change"]["lines"])
    flipped = "; ".join(f"{kind}: {', '.join(entry[kind])}" for kind in (BROKEN, FIXED) if entry[kind])
    head = (f'<span class="outcome {entry["outcome"]}">{entry["outcome"]}</span> <code class="fixture-id">'
            f'{_text(entry["id"])}</code>' + (f' <span class="muted">({_text(flipped)})</span>' if flipped else ""))
    table = ('<table class="modes"><thead><tr><th class="mode">mode: before &rarr; after</th>'
             + "".join(f"<th>{SIDE_NAMES[side]}</th>" for side in SIDES) + "</tr></thead><tbody>"
             + "".join(_mode_row(entry, mode, seen, details) for mode in modes) + "</tbody></table>")
    attributes = (f'id="fixture-{number}" class="fixture {entry["outcome"]}" data-fixture="{_text(entry["id"])}" '
                  f'data-outcome="{entry["outcome"]}"')
    if entry["outcome"] == UNCHANGED:
        return f"<details {attributes}><summary>{head}</summary>{table}</details>"
    return f"<article {attributes}><h3>{head}</h3>{_about(entry, modes, details)}{table}</article>"


def summary(report: dict) -> str:
    """The page's first line: the counts and the exit status they give."""
    counts = report["counts"]
    gate = ("a fixture that passed breaks" if report["exit_status"] else "no fixture that passed breaks")
    return (f"{counts[FIXED]} fixed, {counts[BROKEN]} broken, {counts[UNCHANGED]} unchanged of {counts['fixtures']} "
            f"fixtures; exit status {report['exit_status']}: {gate}")


def _files(label: str, paths: Iterable[str]) -> str:
    paths = list(paths)
    return f"{label}: " + (", ".join(f"<code>{_text(p)}</code>" for p in paths) if paths else "none")


def render_verify_page(directory: Path, report: dict, seen: _Sides) -> str:
    """index.html of the verification ``report`` (verify.json) whose records (``_scan``) are under ``directory``."""
    template = resources.files("toolmatrix.matrix").joinpath("templates/verify.html").read_text(encoding="utf-8")
    title = f"replay-verify: {report['engine']} {report['release'] or ''}".strip()
    template = template.replace("__CSP__", csp_hashes(template)).replace("__TITLE__", _text(title))
    details = _embedded(directory, report, seen)
    links = " and ".join(f'<a href="{_text(quote(report["results"][side]))}">{_text(report["results"][side])}</a> '
                         f"({SIDE_NAMES[side]})" for side in SIDES)
    header = (f"<header><h1>{_text(title)} with a parser change</h1>"
              f'<p id="summary" class="gate-{"fail" if report["exit_status"] else "pass"}">{_text(summary(report))}</p>'
              f'<p class="muted">{_files("Applied", report["change"]["applied"])}; '
              f'{_files("not applied (outside the parser package or source tree)", report["change"]["not_applied"])}.</p>'
              f'<p class="muted">The records: {links}; all of this as data: <a href="verify.json">verify.json</a>. '
              "A fixture is broken where a mode that passed fails, fixed where a mode that failed passes and none "
              "the other way, unchanged otherwise.</p></header>")
    sections = []
    numbered = list(enumerate(report["fixtures"]))
    for kind in ORDER:
        shown = "".join(_fixture(n, entry, seen, details) for n, entry in numbered if entry["outcome"] == kind)
        heading = f'<h2>{kind.capitalize()} ({report["counts"][kind]})</h2>'
        if kind == UNCHANGED:
            sections.append(f'<section id="{kind}"><details><summary>{heading}</summary>{shown}</details></section>')
        else:
            sections.append(f'<section id="{kind}">{heading}{shown or "<p class=muted>none</p>"}</section>')
    head, tail = template.split(PLACEHOLDER)
    return head + header + "".join(sections) + tail


def write_verify_page(directory: Path, engine: str, change: Change,
                      flips: Mapping[str, Mapping[str, list[str]]]) -> tuple[dict, Path]:
    """Write ``directory/verify.json`` and ``directory/index.html`` of ``verify``'s comparison (its records under
    ``directory/base/ENGINE`` and ``directory/change/ENGINE``); verify.json's data and the page's path."""
    seen = {side: _scan(directory / side / engine) for side in SIDES}
    report = verify_report(seen, engine, read_run_info(directory / "base" / engine).run.engine.version, change, flips)
    write_json(directory / "verify.json", report)
    return report, write_text(directory / "index.html", render_verify_page(directory, report, seen))

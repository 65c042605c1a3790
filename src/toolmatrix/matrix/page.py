"""Render the matrix: a self-contained HTML page (data as inert JSON, drawn by the page's own script) and Markdown.

Nothing from a result is ever put into HTML or Markdown markup as is. The page embeds the data in a
``<script type="application/json">`` block with ``<``, ``>`` and ``&`` escaped (so ``</script>`` cannot end it)
and its script writes text with ``textContent`` only; a Content-Security-Policy admits only the page's own
script and style (by hash), so even an injected tag could not run or load anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any

from tabulate import tabulate

from toolmatrix.matrix.figures import LEVELS, UNSUPPORTED, all_unsupported, figure, percent
from toolmatrix.matrix.replay import is_replay, replay_layout, replay_markdown
from toolmatrix.matrix.versions import versions_markdown
from toolmatrix.replay.versions import REGRESSION
from toolmatrix.wire.surfaces import CHAT, SURFACES

PLACEHOLDER = "/*TOOLMATRIX_DATA*/"
MD_LIST_CAP = 10
_BLOCK = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def _surfaces(apis: set[str]) -> list[dict[str, str]]:
    """The surfaces of a column in the order ``--api`` knows them, each with the name a person knows it by."""
    known = list(SURFACES)
    ordered = sorted(apis, key=lambda api: (known.index(api) if api in known else len(known), api))
    return [{"id": api, "name": SURFACES[api].name if api in SURFACES else api} for api in ordered]


def layout(cells: list[dict]) -> dict[str, Any]:
    """Rows, columns (one per engine, with versions, the key flags all of its cells share and the surfaces its
    cells went over: a cell per surface inside it), categories and blames of the live table; the parser-replay
    cells get a table of their own (``replay``)."""
    replay, every = replay_layout(cells), cells
    cells = [c for c in cells if not is_replay(c)]
    engines = []
    for engine in sorted({c["engine"] for c in cells}):
        column = [c for c in cells if c["engine"] == engine]
        shared = set(column[0]["key_flags"]).intersection(*(c["key_flags"] for c in column[1:]))
        engines.append({
            "id": engine,
            "versions": sorted({str(c["engine_version"]) for c in column if c["engine_version"]}),
            "key_flags": [f for f in column[0]["key_flags"] if f in shared],
            "apis": _surfaces({c["api"] for c in column}),
        })
    rows = [r for c in every for r in c["breakdown"]]  # the filters also serve the replay cells' details
    return {
        "models": sorted({c["model"] for c in cells}),
        "engines": engines,
        "categories": sorted({r[0] for r in rows}),
        "blames": sorted({r[3] for r in rows if r[3]}),
        "replay": replay,
    }


def embed_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` survives as itself."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def csp_hashes(template: str) -> str:
    """The Content-Security-Policy of a page from ``template``: only its own inline script and style blocks run."""
    digests: dict[str, list[str]] = {kind: [] for kind in ("script", "style")}
    for kind, body in _BLOCK.findall(template):
        digests[kind].append("'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'")
    return (f"default-src 'none'; script-src {' '.join(digests['script'])}; style-src {' '.join(digests['style'])}; "
            "img-src data:; base-uri 'none'; form-action 'none'")


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def contents(cells: list[dict], versions: list[dict]) -> str:
    """What a page holds, said first (the page's header, matrix.md's first line): its live cells, the engine
    parsers it replayed, the releases of its version axis and how many groups of records flipped between them;
    never a count of what it does not hold (a page of the version axis alone is no "0 cells")."""
    live = [c for c in cells if not is_replay(c)]
    replayed = len(cells) - len(live)
    parts = [_count(len(live), "cell")] if live or not (replayed or versions) else []
    if live:
        apis = len({c["api"] for c in live})
        parts[0] += (f" ({_count(len({c['model'] for c in live}), 'model')}, "
                     f"{_count(len({c['engine'] for c in live}), 'engine')}"
                     f"{', ' + _count(apis, 'API surface') if apis > 1 else ''})")
    if replayed:
        families = _count(len(replay_layout(cells)["families"]), "format family", "format families")
        parts.append(f"{_count(replayed, 'engine parser')} replayed on {families}")
    if versions:
        flips = [flip for entry in versions for flip in entry["flips"]]
        regressions = sum(1 for flip in flips if flip["kind"] == REGRESSION)
        engines = "1 engine's parser" if len(versions) == 1 else f"{len(versions)} engines' parsers"
        parts.append(f"{engines} across {_count(sum(len(e['releases']) for e in versions), 'release')}, "
                     f"{_count(len(flips), 'group')} of flipped records ({_count(regressions, 'regression')}, "
                     f"{_count(len(flips) - regressions, 'fix', 'fixes')})")
    return "; ".join(parts)


def heading(data: dict) -> str:
    """The page's title: ``TITLE compatibility matrix`` where it holds cells (live or replayed), the title alone on a
    page of the version axis alone (releases of engines' parsers, no pair of a matrix)."""
    return data["title"] + (" compatibility matrix" if data["cells"] or not data.get("versions") else "")


def render_html(data: dict) -> str:
    """The page: the template with its CSP filled in and ``data`` (plus the layout, what the page holds and the
    colour thresholds its script and legends use) embedded."""
    template = resources.files("toolmatrix.matrix").joinpath("templates/index.html").read_text(encoding="utf-8")
    template = template.replace("__CSP__", csp_hashes(template))
    head, tail = template.split(PLACEHOLDER)  # split, not replace: the data is never searched for markers
    holds = contents(data["cells"], data.get("versions") or [])
    return head + embed_json({**data, **layout(data["cells"]), "heading": heading(data), "holds": holds,
                              "levels": LEVELS}) + tail


def md_text(value: Any, limit: int = 200) -> str:
    """Untrusted text for a Markdown table cell or list item: one line, no markup, no HTML."""
    text = " ".join(str(value).split())
    text = text[:limit] + "..." if len(text) > limit else text
    text = re.sub(r"([\\`*_\[\]|#~])", r"\\\1", text)
    return html.escape(text, quote=False)


def _interval(stat: dict) -> str:
    """A mean with its 95 % interval: ``62% [48%-74%]``."""
    low, high = stat["interval"] or (None, None)
    return percent(stat["mean"]) + (f" [{percent(low)}-{percent(high)}]" if stat["interval"] else "")


def _samples_md(samples: dict) -> str:
    """Repeated samples of a cell: pass@1 with its interval, pass^k, the disagreeing, conformance with its interval."""
    fewest, most = samples["samples"]
    k = str(most) if fewest == most else f"{fewest}-{most}"
    return (f"k={k}: pass@1 {_interval(samples['pass_at_1'])}, pass^k {percent(samples['pass_hat_k'])} "
            f"({samples['all_passed']}/{samples['pass_at_1']['n']}), {samples['disagreeing']} disagreeing, "
            f"engine {_interval(samples['conformance'])}")


def _cell_md(cell: dict) -> str:
    counts = cell["counts"]
    if cell.get("unsupported_reason") or all_unsupported(counts):  # not a failure at 0 %: nothing was judged
        why = cell.get("unsupported_reason")
        return f"{UNSUPPORTED} ({cell['total']})" + (f": {md_text(why)}" if why else "")
    # Shares of the counts, as the page computes them (pass_rate and conformance are rounded to 4 places)
    text = f"{percent(_share(counts.get('pass', 0), cell['total']))} ({counts.get('pass', 0)}/{cell['total']})"
    if "conformance" in cell:  # cells of older toolmatrix builds have none
        judged = cell["conformance_counts"]
        text += (f", engine {percent(_share(judged['conformant'], judged['judged']))} "
                 f"({judged['conformant']}/{judged['judged']})")
    if cell.get("samples"):
        text += "; " + _samples_md(cell["samples"])
    extra = [f"{counts[v]} {v}" for v in ("fail", "unsupported", "error", "mixed") if counts.get(v)]
    if cell["runs_total"] > 1:
        extra.append(f"{cell['runs_total']} runs")
    changes = cell["history"]
    if changes and (changes["newly_failing_total"] or changes["newly_passing_total"]):
        extra.append(f"{changes['newly_failing_total']} newly failing, {changes['newly_passing_total']} newly passing")
    return text + (", " + ", ".join(extra) if extra else "")


def _column_md(by_key: dict[tuple[str, str, str], dict], model: str, engine: dict) -> str:
    """A model's cell in an engine's column: a line per surface its column went over, each named unless the column
    is Chat Completions alone; ``-`` where the model ran over none of them."""
    shown = [(api, by_key.get((model, engine["id"], api["id"]))) for api in engine["apis"]]
    if not any(cell for _, cell in shown):
        return "-"
    if [api["id"] for api, _ in shown] == [CHAT] and (only := shown[0][1]) is not None:  # any() above: it is
        return _cell_md(only)
    # <br>: a line break inside a GitHub table cell; the only markup here, and it is ours
    return "<br>".join(f"{api['name']}: {_cell_md(cell) if cell else 'not run'}" for api, cell in shown)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _category_rates(cell: dict, categories: list[str]) -> list[str]:
    """A cell's share in each category: ``50% (2/4) / engine 75%``; "unsupported" where nothing of the category
    was judged (every record unsupported: the model does not think, say), as the page's category table reads it."""
    out = []
    for category in categories:
        counts: dict[str, int] = {}
        for row in cell["breakdown"]:
            if row[0] == category:
                counts[row[2]] = counts.get(row[2], 0) + row[4]
        total, passed = sum(counts.values()), counts.get("pass", 0)
        if not total or all_unsupported(counts):
            out.append(figure(None, unsupported=bool(total)).text)
            continue
        text = f"{percent(passed / total)} ({passed}/{total})"
        judged = [r for r in cell.get("conformance_breakdown", ()) if r[0] == category and r[2] is not None]
        if judged:
            text += f" / engine {percent(sum(r[3] for r in judged if r[2]) / sum(r[3] for r in judged))}"
        out.append(text)
    return out


def _changes_md(cells: list[dict]) -> list[str]:
    lines = []
    for cell in cells:
        changes = cell["history"]
        if not changes or not (changes["newly_failing_total"] or changes["newly_passing_total"]):
            continue
        since = f"{md_text(changes['previous_run_id'])} (started {md_text(changes['previous_started'])})"
        lines += ["", f"### {md_text(cell['pair'])}", "", f"Since run {since}:", ""]
        for key, label in (("newly_failing", "newly failing"), ("newly_passing", "newly passing")):
            total = changes[key + "_total"]
            for entry in changes[key][:MD_LIST_CAP]:
                why = f": {md_text(entry['reason'])}" if entry["reason"] else ""
                lines.append(f"- {label}: {md_text(entry['case_id'])} \\[{entry['mode']}\\] "
                             f"({entry['was']} -> {entry['now']}){why}")
            if total > MD_LIST_CAP:
                lines.append(f"- ... and {total - MD_LIST_CAP} more {label} (see matrix.json)")
    return ["", "## Changes since the previous run", *lines] if lines else []


def _mixed_item_md(entry: dict) -> str:
    verdicts = "; ".join(f"{md_text(r['host'] or r['run_id'])}: {r['verdict']}"
                         + (f" ({md_text(r['reason'], 100)})" if r["reason"] else "") for r in entry["runs"])
    sample = f" sample {entry['sample']}" if entry.get("sample") else ""
    return f"- {md_text(entry['case_id'])} \\[{entry['mode']}{sample}\\]: {verdicts}"


def _mixed_md(cells: list[dict]) -> list[str]:
    lines = []
    for cell in cells:
        total = cell["mixed_total"]
        if not total:
            continue
        listed = cell["mixed"][:MD_LIST_CAP]
        lines += ["", f"### {md_text(cell['pair'])}", "", *map(_mixed_item_md, listed)]
        if total > len(listed):
            lines.append(f"- ... and {total - len(listed)} more mixed (see matrix.json)")
    intro = "Runs of one configuration on several machines disagree on these (neither a pass nor a failure):"
    return ["", "## Mixed verdicts", "", intro, *lines] if lines else []


def render_markdown(data: dict) -> str:
    """``matrix.md``: the matrix, the per-category rates, what changed, and what was skipped."""
    shape = layout(data["cells"])
    cells = [c for c in data["cells"] if not is_replay(c)]
    by_key = {(c["model"], c["engine"], c["api"]): c for c in cells}
    headers = ["model \\ engine"] + [
        md_text(" ".join([e["id"], *e["versions"]]) + (f" ({', '.join(e['key_flags'])})" if e["key_flags"] else ""))
        for e in shape["engines"]
    ]
    rows = [[md_text(m)] + [_column_md(by_key, m, e) for e in shape["engines"]] for m in shape["models"]]
    lines = [f"# {md_text(heading(data))}", "",
             f"Generated {data['generated']} by toolmatrix {data['toolmatrix_version']}: "
             f"{contents(data['cells'], data.get('versions') or [])}."]
    if cells:  # the live table and its legend; a page of replay cells or of the version axis alone has neither
        lines[-1] += (
            " Pass rate = passing case x mode / all case x mode of the pair's newest run, with the newest runs of "
            "its configuration on other machines or case shards (the model and the engine together); a case x "
            "mode those runs disagree on is mixed, not a pass. Engine = engine conformance: the share of answered "
            "records where the engine returned what the model said, in a valid wire shape, honouring the request "
            "(the engine alone). With repeated samples (--samples K) every sample counts: the pass rate is pass@1, "
            "the mean over samples; k=K adds its 95% Wilson interval over case x mode, pass^k (the share of case x "
            "mode whose K samples all passed), the case x mode whose samples disagree, and conformance with its "
            "interval. Unsupported: every record of the cell or category unsupported (nothing judged, not a 0%).")
        lines += ["", tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)]
    categories = sorted({r[0] for c in cells for r in c["breakdown"]})
    if cells and categories:
        rows = [[md_text(c["pair"])] + _category_rates(c, categories) for c in cells]
        lines += ["", "## By category", "",
                  tabulate(rows, headers=["pair"] + [md_text(c) for c in categories], tablefmt="github",
                           disable_numparse=True)]
    lines += replay_markdown(shape["replay"], md_text, data.get("triage"))
    lines += versions_markdown(data.get("versions") or [], md_text, MD_LIST_CAP)
    lines += _changes_md(cells)
    lines += _mixed_md(cells)
    if data["skipped"]:
        lines += ["", "## Skipped inputs", ""]
        lines += [f"- {md_text(s['path'])}: {md_text(s['reason'].splitlines()[0], 300)}" for s in data["skipped"]]
    return "\n".join(lines) + "\n"

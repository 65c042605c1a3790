"""Replay triage: every failing replay record in a cluster, every cluster classified.

A failing replay cell is a finding only once it is classified (engine bug, contested format, truncation policy,
fixture doubt, robustness). An engine bug is a maintainer's finding: the engine's file and function, the trigger,
whether a server in its default configuration meets it, and the upstream report where there is one. The
classification is a committed YAML file of clusters (``triage.schema.json``), each a rule over a record's engine,
family, fixture id, mode and failing checks, with a one-line repro. A failing record belongs to the first cluster
whose rule it matches, so a rule may be narrow above and broad below. ``classify`` counts every cluster over a
replay results directory and names what no rule covers, the rules that cover nothing and the clusters their own
records deny: the file stays true to the records, or its test says where it is not. A fixture whose ``source``
starts with ``probe:`` writes a layout no official chat template writes: its failures are ``robustness``, and sit
in another class only where the cluster's ``claimed_by`` names the engine's own test or doc that claims the layout.
An ambiguity (a text with more than one defensible reading: a marker inside a raw argument value, ``\\uXXXX``
escapes) is declared once, with the class it implies: a cluster that names it must have that class, and a record
that meets its rule may sit only in a cluster of that class, so one ambiguity never gets two classes. An engine bug
states the stream unit it needs (``stream_unit``), which its records decide: the command derives it from the modes
they fail in and names a cluster whose stated unit they contradict. Each upstream reference carries what was read
of it (title, state, the day checked). The prose page (``TRIAGE.md``) is written from the same file, its counts
computed, never typed.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

import attrs

from toolmatrix.base.specs import SpecErrors, read_yaml, schema_errors

from .names import mode_of, own_vocabulary

CLASSES = {"engine_bug": "Engine bugs", "contested_format": "Contested format",
           "truncation_policy": "Truncation policy", "fixture_doubt": "Fixture doubts",
           "robustness": "Robustness probes"}
# What a cluster's failing modes say of the stream unit its fault needs: the replay's ``token`` chunking is one token
# a step; ``whole``, ``random`` and ``special`` put several tokens in a step, as speculative or multi-token decoding,
# --stream-interval > 1 or a lagging stream do.
ONE_TOKEN = "stream:token"
UNITS = {("nonstream", True): "any", ("nonstream", False): "non-streamed", ("", True): "one token a step",
         ("", False): "several tokens a step"}
PROBE = "probe:"  # a fixture source that starts so writes a layout no official template writes


@attrs.frozen
class Failing:
    """What a rule can see of one failing replay record."""

    engine: str
    family: str
    fixture: str
    mode: str
    failed_checks: frozenset[str]
    source: str = ""  # the fixture's source (``generated:plain``, ``probe:loose``, a user's file)
    version: str = ""  # the engine's, as replayed
    vocabulary: str = "own"  # foreign: not through its own family's vocabulary (names.own_vocabulary)

    @property
    def probe(self) -> bool:
        return self.source.startswith(PROBE)


def meets(match: dict[str, list[str]], record: Failing) -> bool:
    """Every key of a rule holds: engine and family by name, fixture, mode and source by glob, ``failed`` when any
    of its checks failed, ``vocabulary`` (own or foreign) as the record's tokenizer label says."""
    m = match
    return ((not m.get("engine") or record.engine in m["engine"])
            and (not m.get("family") or record.family in m["family"])
            and (not m.get("fixture") or any(fnmatch.fnmatchcase(record.fixture, p) for p in m["fixture"]))
            and (not m.get("mode") or any(fnmatch.fnmatchcase(record.mode, p) for p in m["mode"]))
            and (not m.get("source") or any(fnmatch.fnmatchcase(record.source, p) for p in m["source"]))
            and (not m.get("failed") or bool(record.failed_checks & set(m["failed"])))
            and (not m.get("vocabulary") or record.vocabulary in m["vocabulary"]))


def stream_unit(records: Iterable[Failing]) -> str:
    """The stream unit a fault needs, from the modes its records fail in: the least a server must do to meet it."""
    modes = {r.mode for r in records}
    return UNITS[("nonstream" if "nonstream" in modes else "", ONE_TOKEN in modes)] if modes else ""


@attrs.frozen
class Ambiguity:
    """A text with more than one defensible reading, and the class every cluster that rests on it takes."""

    id: str
    what: str
    kind: str  # a key of CLASSES
    match: dict[str, list[str]] = attrs.Factory(dict)  # the records that meet it, where they show it ({}: declared)


@attrs.frozen
class Reference:
    """An upstream issue or pull request as read on the day checked (``state`` "not read": no title, no quote)."""

    url: str
    state: str
    checked: str
    title: str = ""
    says: str = ""

    @property
    def label(self) -> str:
        """``owner/repo#N``, and whether it is an issue or a pull request."""
        owner, repo, kind, number = self.url.removeprefix("https://github.com/").split("/")
        return f"{owner}/{repo}#{number} ({'PR' if kind == 'pull' else 'issue'})"

    def cell(self) -> str:
        """The reference as TRIAGE.md shows it: link, state, the day checked, title and what it says."""
        head = f"[{self.label}]({self.url}) {self.state}, checked {self.checked}"
        return f"{head}: \"{self.title}\": {self.says}" if self.title else f"{head}"


@attrs.frozen
class Code:
    """Where an engine bug is: a file in the engine's repository and the function in it."""

    engine: str
    file: str
    function: str


@attrs.frozen
class Cluster:
    id: str
    kind: str  # a key of CLASSES
    what: str
    repro: dict[str, str]  # fixture, engine, chunking
    match: dict[str, list[str]]
    claimed_by: tuple[str, ...] = ()  # the engine's own tests or docs that claim a probe's layout
    code: tuple[Code, ...] = ()  # engine bugs: the finding (the schema requires these three)
    trigger: str = ""
    meets_default: str = ""  # "yes: …", "no: …" or "unknown: …"
    upstream: tuple[Reference, ...] = ()
    first_broken: str = ""  # engine bugs: the first release whose repro fails ("" not measured)
    first_fixed: str = ""  # the first whose repro passes again, or "open at V"
    ambiguity: str = ""  # the id of the ambiguity its class rests on
    stream_unit: str = ""  # engine bugs: the stream unit the fault needs (UNITS), as its records show it

    def covers(self, record: Failing) -> bool:
        return meets(self.match, record)

    def repro_command(self, fixtures: str) -> str:
        """The one line that replays this cluster's example: its fixture alone, through its engine and chunking."""
        r = self.repro
        needle = shlex.quote('"id": ' + json.dumps(r["fixture"]))
        return (f"grep -F {needle} {shlex.quote(fixtures)} > /tmp/one.jsonl && toolmatrix replay --fixtures "
                f"/tmp/one.jsonl --results-dir /tmp/repro --engine {r['engine']} --chunking {r['chunking']}")

    def standalone_command(self, fixtures: str) -> str:
        """The line that prints this cluster's example as a repro that runs with the engine's own package alone
        (replay/repro.py): a few lines of Python calling its parser, or a curl to its server."""
        r = self.repro
        return (f"toolmatrix replay-repro --fixtures {shlex.quote(fixtures)} --fixture {shlex.quote(r['fixture'])} "
                f"--engine {r['engine']} --chunking {r['chunking']}")


@attrs.frozen
class Triage:
    path: Path
    intro: str
    notes: str
    clusters: tuple[Cluster, ...]
    ambiguities: dict[str, Ambiguity] = attrs.Factory(dict)


def load_triage(path: Path) -> Triage:
    """The triage file, validated; errors name the file, the line, the cluster and the field."""
    doc = read_yaml(path)

    def where(p: tuple) -> str:
        if len(p) >= 2 and p[0] == "clusters" and isinstance(p[1], int) and p[1] < len(doc.data["clusters"]):
            item = doc.data["clusters"][p[1]]
            return f"cluster {item.get('id')!r}" if isinstance(item, dict) else ""
        return ""

    errors = schema_errors(doc, "triage.schema.json", where)
    if not errors:
        seen: set[str] = set()
        for index, item in enumerate(doc.data["clusters"]):
            if item["id"] in seen:
                errors.append(doc.error(("clusters", index, "id"), f"cluster id {item['id']!r} is used twice"))
            seen.add(item["id"])
            errors += [doc.error(("clusters", index, key), message)
                       for key, message in _cluster_errors(item, doc.data.get("ambiguities") or {})]
    if errors:
        raise SpecErrors(errors)
    data = doc.data
    ambiguities = {key: Ambiguity(key, a["what"], a["class"], dict(a.get("match") or {}))
                   for key, a in (data.get("ambiguities") or {}).items()}
    clusters = tuple(Cluster(c["id"], c["class"], c["what"], dict(c["repro"]), dict(c.get("match") or {}),
                             tuple(c.get("claimed_by", ())), tuple(Code(**code) for code in c.get("code", ())),
                             c.get("trigger", ""), c.get("meets_default", ""),
                             tuple(Reference(**ref) for ref in c.get("upstream", ())),
                             c.get("first_broken", ""), c.get("first_fixed", ""), c.get("ambiguity", ""),
                             c.get("stream_unit", ""))
                     for c in data["clusters"])
    return Triage(path, data.get("intro", ""), data.get("notes", ""), clusters, ambiguities)


def _cluster_errors(item: dict, ambiguities: dict) -> list[tuple[str, str]]:
    """What the schema cannot say of one valid cluster, as (field, message): releases and a stream unit are an engine
    bug's alone; its ambiguity must be declared and imply its class; a reference not read quotes nothing; a fault
    that needs several tokens a step is not met by a default server."""
    name, kind = item["id"], item["class"]
    errors = [(key, f"cluster {name!r} ({kind}): {key}: only an engine bug says in which release it appears and "
                    "in which it is fixed")
              for key in ("first_broken", "first_fixed") if key in item and kind != "engine_bug"]
    if "stream_unit" in item and kind != "engine_bug":
        errors.append(("stream_unit", f"cluster {name!r} ({kind}): stream_unit: only an engine bug states the stream "
                                      "unit it needs"))
    if (ambiguity := item.get("ambiguity")) is not None:
        implied = ambiguities.get(ambiguity, {}).get("class")
        if implied is None:
            errors.append(("ambiguity", f"cluster {name!r}: ambiguity {ambiguity!r} is not declared under "
                                        f"ambiguities (known: {', '.join(ambiguities) or 'none'})"))
        elif implied != kind:
            errors.append(("class", f"cluster {name!r} is {kind}, but its ambiguity {ambiguity!r} implies {implied}: "
                                    "one ambiguity, one class"))
    errors += [("upstream", f"cluster {name!r}: upstream {ref['url']}: not read, so no title and no quote")
               for ref in item.get("upstream", ()) if ref["state"] == "not read" and ("title" in ref or "says" in ref)]
    if item.get("stream_unit") == "several tokens a step" and item.get("meets_default", "").startswith("yes:"):
        errors.append(("meets_default", f"cluster {name!r}: meets_default says yes, but its fault needs several "
                                        "tokens a step, which a default server does not stream"))
    return errors


# What a rule sees of a failing record (``Failing``): fields of the line, not a typed record.
_FIELDS = ("case_id", "mode", "failed_checks", "replay.engine", "replay.family", "replay.fixture_source",
           "replay.engine_version", "replay.tokenizer")


def failing_records(results_dir: Path) -> Iterator[Failing]:
    """Every failing replay record of every run under ``results_dir`` (``DIR/ENGINE``); ResultsError for a run
    that cannot be read.

    Scanned for a few fields, not read as typed records: a snapshot holds tens of thousands, and a rule needs eight
    fields. A live record (no ``replay``) is passed over; a field a compact record omits is its default, ""."""
    # Here, not at the top: the rules and the page need no reader, and it is most of this module's import time.
    from toolmatrix.records import Verdict, read_run_info, run_dirs, scan_fields

    for directory in run_dirs(results_dir):
        for _, (fixture, mode, failed, engine, family, source, version, tokenizer) in scan_fields(
                read_run_info(directory), *_FIELDS, verdicts=(Verdict.FAIL, Verdict.ERROR)):
            if engine is None:
                continue
            vocabulary = "own" if own_vocabulary(tokenizer or "") else "foreign"
            yield Failing(engine, family or "", fixture, mode, failed, source or "", version or "", vocabulary)


@attrs.frozen
class Classified:
    counts: dict[str, Counter]  # cluster id -> records per engine
    unclassified: list[Failing]
    empty: list[str]  # clusters that cover no record
    wrong: list[str]  # clusters at odds with their own records, each line naming the cluster
    versions: dict[str, str] = attrs.Factory(dict)  # engine -> the version its records were replayed with

    @property
    def complete(self) -> bool:
        return not self.unclassified and not self.empty and not self.wrong


def classify(triage: Triage, records: Iterable[Failing]) -> Classified:
    counts: dict[str, Counter] = {c.id: Counter() for c in triage.clusters}
    held: dict[str, list[Failing]] = {c.id: [] for c in triage.clusters}
    unclassified = []
    versions: dict[str, str] = {}
    for record in records:
        versions[record.engine] = record.version
        cluster = next((c for c in triage.clusters if c.covers(record)), None)
        if cluster is None:
            unclassified.append(record)
        else:
            counts[cluster.id][record.engine] += 1
            held[cluster.id].append(record)
    wrong = [line for c in triage.clusters
             for line in _at_odds(c, held[c.id]) + _foreign_repro(c, held[c.id]) + _unlocated(c, counts[c.id])
             + _unit_at_odds(c, held[c.id]) + _ambiguity_at_odds(c, held[c.id], triage.ambiguities)]
    return Classified(counts, unclassified, [c.id for c in triage.clusters if not counts[c.id]], wrong, versions)


def _unit_at_odds(cluster: Cluster, records: list[Failing]) -> list[str]:
    """An engine bug whose stated stream unit its records contradict: the modes they fail in say another."""
    derived = stream_unit(records)
    if cluster.kind != "engine_bug" or not derived or derived == cluster.stream_unit:
        return []
    modes = ", ".join(sorted({r.mode for r in records}))
    return [f"cluster {cluster.id}: stream_unit says {cluster.stream_unit!r}, but its records fail in {modes}: "
            f"{derived!r}"]


def _ambiguity_at_odds(cluster: Cluster, records: list[Failing], ambiguities: dict[str, Ambiguity]) -> list[str]:
    """Records that meet an ambiguity's rule in an engine-bug cluster: a text with two defensible readings is never
    the engine's fault, whatever else fails on it (a probe, a truncated call may sit in their own classes)."""
    lines = []
    for ambiguity in ambiguities.values():
        met = next((r for r in records if ambiguity.match and meets(ambiguity.match, r)), None)
        if met is not None and cluster.kind == "engine_bug" != ambiguity.kind:
            lines.append(f"cluster {cluster.id} ({cluster.kind}) holds records of ambiguity {ambiguity.id!r}, which "
                         f"implies {ambiguity.kind} (e.g. {met.engine} {met.mode} {met.fixture}): move them to a "
                         f"cluster of that class")
    return lines


def _unlocated(cluster: Cluster, engines: Counter) -> list[str]:
    """An engine bug whose ``code`` misses an engine it holds records of (that engine's fault is not located), or
    names one it holds none of (a finding the records do not show)."""
    if cluster.kind != "engine_bug" or not engines:
        return []
    named = {code.engine for code in cluster.code}
    lines = []
    if missing := sorted(set(engines) - named):
        lines.append(f"cluster {cluster.id}: code names no file and function for {', '.join(missing)}, "
                     "whose records it holds")
    if stray := sorted(named - set(engines)):
        lines.append(f"cluster {cluster.id}: code names {', '.join(stray)}, but the cluster holds no record of it")
    return lines


def _foreign_repro(cluster: Cluster, records: list[Failing]) -> list[str]:
    """A repro that replays none of the cluster's own failing records: it would show a maintainer another
    cluster's failure, or a pass. Its command replays the fixture non-streamed and with its chunking, so either
    record will do; a cluster with no records is named as empty instead."""
    r = cluster.repro
    modes = {"nonstream", mode_of(r["chunking"])}
    if not records or any(f.fixture == r["fixture"] and f.engine == r["engine"] and f.mode in modes for f in records):
        return []
    return [f"cluster {cluster.id}: its repro ({r['fixture']} on {r['engine']}, chunking {r['chunking']}) is none "
            f"of its own failing records: pick one the cluster holds"]


def _at_odds(cluster: Cluster, records: list[Failing]) -> list[str]:
    """What a cluster says that its records deny: a probe's failure blamed on the engine (any class but
    ``robustness``) with no ``claimed_by`` that shows the engine claims the layout, or a ``robustness`` cluster that
    holds a record of a layout an official template writes, which would hide a real finding."""
    probes = [r for r in records if r.probe]
    lines = []
    if probes and cluster.kind != "robustness" and not cluster.claimed_by:
        lines.append(f"cluster {cluster.id} ({cluster.kind}) holds {len(probes)} failing records of robustness "
                     f"probes (e.g. {probes[0].fixture}, source {probes[0].source}): class it robustness, or name "
                     "in claimed_by the engine's own test or doc that claims the layout")
    plain = next((r for r in records if not r.probe), None)
    if cluster.kind == "robustness" and plain is not None:
        lines.append(f"cluster {cluster.id} (robustness) holds a record that is no probe: {plain.engine} "
                     f"{plain.mode} {plain.fixture} (source {plain.source or 'unknown'})")
    return lines


def markdown(triage: Triage, classified: Classified, fixtures: str) -> str:
    """TRIAGE.md: the intro, the ambiguities and the class each implies, a table per class with the computed counts
    and each cluster's repro (an engine bug's also as the command that prints its repro with the engine's own package
    alone), the notes."""
    from tabulate import tabulate

    total = sum(sum(c.values()) for c in classified.counts.values())
    lines = [triage.intro.rstrip(), "",
             f"Failing records classified: {total - len(classified.unclassified)} of {total} "
             f"(`toolmatrix replay-triage` counts them from the records and `{triage.path.name}`).", ""]
    lines += _ambiguity_table(triage)
    for kind, title in CLASSES.items():
        clusters = [c for c in triage.clusters if c.kind == kind]
        if clusters:
            lines += [f"## {title}", "", tabulate(*_class_table(clusters, classified, fixtures), tablefmt="github"), ""]
    return "\n".join(lines + [triage.notes.rstrip(), ""])


def _ambiguity_table(triage: Triage) -> list[str]:
    """The declared ambiguities, the class each implies and the clusters that rest on it."""
    from tabulate import tabulate

    if not triage.ambiguities:
        return []
    rows = [[a.id, _cell(a.what), a.kind, ", ".join(c.id for c in triage.clusters if c.ambiguity == a.id) or "-"]
            for a in triage.ambiguities.values()]
    return ["## Ambiguities: one rule each", "",
            "A text with more than one defensible reading gets one class, wherever it appears: a cluster that rests "
            "on an ambiguity names it and takes its class, and `toolmatrix replay-triage` refuses a cluster of "
            "another class that holds records meeting its rule.", "",
            tabulate(rows, headers=["ambiguity", "what", "class it implies", "clusters"], tablefmt="github"), ""]


def _class_table(clusters: list[Cluster], classified: Classified, fixtures: str) -> tuple[list[list[object]], list[str]]:
    """One class's rows and headers (a cluster's record count a number, for tabulate to align); a column only where a
    cluster of the class has something to put in it."""
    finding = clusters[0].kind == "engine_bug"
    ambiguity = any(c.ambiguity for c in clusters)
    upstream = finding or any(c.upstream for c in clusters)
    releases = any(c.first_broken or c.first_fixed for c in clusters)
    claimed = any(c.claimed_by for c in clusters)
    rows: list[list[object]] = []
    for cluster in clusters:
        engines = classified.counts[cluster.id]
        rows.append([cluster.id, ", ".join(f"{e} {n}" for e, n in sorted(engines.items())),
                     sum(engines.values()), _cell(cluster.what)]
                    + ([cluster.ambiguity or "-"] if ambiguity else [])
                    + (_finding(cluster, classified.versions) if finding else [])
                    + ([_cell(" ".join(r.cell() for r in cluster.upstream) or "-")] if upstream else [])
                    + ([_releases(cluster)] if releases else [])
                    + ([_cell(", ".join(cluster.claimed_by))] if claimed else [])
                    + [_cell(f"`{cluster.repro_command(fixtures)}`")]
                    + ([_cell(f"`{cluster.standalone_command(fixtures)}`")] if finding else []))
    headers = (["#", "records per engine", "records", "what happens"] + (["ambiguity"] if ambiguity else [])
               + (["code", "trigger", "stream unit it needs", "a default server meets it"] if finding else [])
               + (["upstream (as read)"] if upstream else [])
               + (["releases (replay-bisect --cluster)"] if releases else [])
               + (["claimed by"] if claimed else [])
               + ["repro"] + (["with the engine alone (prints the snippet)"] if finding else []))
    return rows, headers


def _finding(cluster: Cluster, versions: dict[str, str]) -> list[str]:
    """An engine bug's cells for a maintainer: each engine's file and function at the replayed version, the
    trigger, the stream unit it needs, whether a server in its default configuration meets it."""
    code = "; ".join(f"{c.engine} {versions.get(c.engine, '?')}: `{c.file}` `{c.function}`" for c in cluster.code)
    return [_cell(code), _cell(cluster.trigger), cluster.stream_unit, _cell(cluster.meets_default)]


def _releases(cluster: Cluster) -> str:
    """When an engine bug appears and when it is fixed, as measured; "-" where not."""
    parts = [f"broken since {cluster.first_broken}"] if cluster.first_broken else []
    fixed = cluster.first_fixed
    parts += [fixed if fixed.startswith("open at ") else f"fixed in {fixed}"] if fixed else []
    return "; ".join(parts) or "-"


def _cell(text: str) -> str:
    """A Markdown table cell: one line, and a ``|`` of the text (``<|python_tag|>``) is not a column break."""
    return " ".join(text.split()).replace("|", "\\|")


def report(classified: Classified, triage: Triage, limit: int = 20) -> list[str]:
    """The command's lines: each cluster's count, then what is wrong with the file, if anything."""
    lines = [f"{c.id:6} {c.kind:18} {sum(classified.counts[c.id].values()):6}  "
             + ", ".join(f"{e} {n}" for e, n in sorted(classified.counts[c.id].items())) for c in triage.clusters]
    if classified.unclassified:
        lines.append(f"{len(classified.unclassified)} failing records in no cluster, e.g.:")
        lines += [f"  {r.engine} {r.mode} {r.fixture} failed: {', '.join(sorted(r.failed_checks)) or '-'}"
                  for r in classified.unclassified[:limit]]
    if classified.empty:
        lines.append(f"clusters that cover no record: {', '.join(classified.empty)}")
    return lines + classified.wrong



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
The prose page (``TRIAGE.md``) is written from the same file, its counts computed, never typed.
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

from .session import mode_of

CLASSES = {"engine_bug": "Engine bugs", "contested_format": "Contested format",
           "truncation_policy": "Truncation policy", "fixture_doubt": "Fixture doubts",
           "robustness": "Robustness probes"}
FAILING = ("fail", "error")
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

    @property
    def probe(self) -> bool:
        return self.source.startswith(PROBE)


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
    upstream: tuple[str, ...] = ()
    first_broken: str = ""  # engine bugs: the first release whose repro fails ("" not measured)
    first_fixed: str = ""  # the first whose repro passes again, or "open at V"

    def covers(self, record: Failing) -> bool:
        """Every key of the rule holds: engine and family by name, fixture, mode and source by glob, ``failed``
        when any of its checks failed."""
        m = self.match
        return ((not m.get("engine") or record.engine in m["engine"])
                and (not m.get("family") or record.family in m["family"])
                and (not m.get("fixture") or any(fnmatch.fnmatchcase(record.fixture, p) for p in m["fixture"]))
                and (not m.get("mode") or any(fnmatch.fnmatchcase(record.mode, p) for p in m["mode"]))
                and (not m.get("source") or any(fnmatch.fnmatchcase(record.source, p) for p in m["source"]))
                and (not m.get("failed") or bool(record.failed_checks & set(m["failed"]))))

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
            errors += [doc.error(("clusters", index, key), f"cluster {item['id']!r} ({item['class']}): {key}: only "
                                 "an engine bug says in which release it appears and in which it is fixed")
                       for key in ("first_broken", "first_fixed") if key in item and item["class"] != "engine_bug"]
    if errors:
        raise SpecErrors(errors)
    data = doc.data
    clusters = tuple(Cluster(c["id"], c["class"], c["what"], dict(c["repro"]), dict(c.get("match") or {}),
                             tuple(c.get("claimed_by", ())), tuple(Code(**code) for code in c.get("code", ())),
                             c.get("trigger", ""), c.get("meets_default", ""), tuple(c.get("upstream", ())),
                             c.get("first_broken", ""), c.get("first_fixed", ""))
                     for c in data["clusters"])
    return Triage(path, data.get("intro", ""), data.get("notes", ""), clusters)


def failing_records(results_dir: Path) -> Iterator[Failing]:
    """Every failing record of every engine's replay run under ``results_dir`` (``DIR/ENGINE/results.jsonl``).

    Read as JSON lines, not typed records: a snapshot holds tens of thousands, and a rule needs five fields."""
    for path in sorted(results_dir.glob("*/results.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                replay = record.get("replay")
                if replay is None or record["verdict"] not in FAILING:
                    continue
                failed = frozenset(c["name"] for c in record["checks"] if c["outcome"] == "fail")
                yield Failing(replay["engine"], replay["family"], record["case_id"], record["mode"], failed,
                              replay.get("fixture_source", ""), replay.get("engine_version", ""))


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
             for line in _at_odds(c, held[c.id]) + _foreign_repro(c, held[c.id]) + _unlocated(c, counts[c.id])]
    return Classified(counts, unclassified, [c.id for c in triage.clusters if not counts[c.id]], wrong, versions)


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
    """TRIAGE.md: the intro, a table per class with the computed counts and each cluster's repro (an engine bug's
    also as the command that prints its repro with the engine's own package alone), the notes."""
    from tabulate import tabulate

    total = sum(sum(c.values()) for c in classified.counts.values())
    lines = [triage.intro.rstrip(), "",
             f"Failing records classified: {total - len(classified.unclassified)} of {total} "
             f"(`toolmatrix replay-triage` counts them from the records and `{triage.path.name}`).", ""]
    for kind, title in CLASSES.items():
        clusters = [c for c in triage.clusters if c.kind == kind]
        claimed = any(c.claimed_by for c in clusters)  # the column only where a cluster of the class has one
        finding = kind == "engine_bug"
        releases = any(c.first_broken or c.first_fixed for c in clusters)
        rows = []
        for cluster in clusters:
            engines = classified.counts[cluster.id]
            rows.append([cluster.id, ", ".join(f"{e} {n}" for e, n in sorted(engines.items())),
                         sum(engines.values()), _cell(cluster.what)]
                        + (_finding(cluster, classified.versions) if finding else [])
                        + ([_releases(cluster)] if releases else [])
                        + ([_cell(", ".join(cluster.claimed_by))] if claimed else [])
                        + [_cell(f"`{cluster.repro_command(fixtures)}`")]
                        + ([_cell(f"`{cluster.standalone_command(fixtures)}`")] if finding else []))
        if rows:
            headers = (["#", "records per engine", "records", "what happens"]
                       + (["code", "trigger", "a default server meets it", "upstream"] if finding else [])
                       + (["releases (replay-bisect --cluster)"] if releases else [])
                       + (["claimed by"] if claimed else []))
            headers += ["repro"] + (["with the engine alone (prints the snippet)"] if finding else [])
            lines += [f"## {title}", "", tabulate(rows, headers=headers, tablefmt="github"), ""]
    return "\n".join(lines + [triage.notes.rstrip(), ""])


def _finding(cluster: Cluster, versions: dict[str, str]) -> list[str]:
    """An engine bug's cells for a maintainer: each engine's file and function at the replayed version, the
    trigger, whether a server in its default configuration meets it, the upstream reports."""
    code = "; ".join(f"{c.engine} {versions.get(c.engine, '?')}: `{c.file}` `{c.function}`" for c in cluster.code)
    return [_cell(code), _cell(cluster.trigger), _cell(cluster.meets_default),
            _cell(" ".join(cluster.upstream) or "-")]


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



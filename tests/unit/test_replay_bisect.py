"""``toolmatrix replay-bisect``'s search (toolmatrix.replay.bisect.bisect): the first release whose verdict differs
from the oldest one's, found in about log2 of the range, around releases that cannot replay."""

from __future__ import annotations

import pytest

from toolmatrix.replay.bisect import BisectError, CannotReplay, Probe, bisect, describe, span

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
    with pytest.raises(CannotReplay, match="only 0.5.3 gives it a verdict here .fail., a search needs two"):
        bisect(VERSIONS[:3], _probe(5, cannot=frozenset({1, 2})))
    with pytest.raises(CannotReplay, match="no two releases give it a verdict here; 2 of the 3 releases replayed"):
        bisect(VERSIONS[:3], _probe(5, cannot=frozenset({1, 3})))
    with pytest.raises(BisectError, match="two releases at least"):
        bisect(VERSIONS[:1], _probe(1))


def test_an_end_that_cannot_install_is_stepped_over() -> None:
    found = bisect(VERSIONS, _probe(5, cannot=frozenset({1, 16})))
    assert (found.before.version, found.after.version) == ("0.5.4", "0.5.5") and found.adjacent
    assert [p.version for p in found.stepped] == ["0.5.1", "0.5.16"]


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
    stream_unit: any
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

    from toolmatrix.cli import replay as cli
    from toolmatrix.replay import bisect as bisect_module

    (tmp_path / "triage.yaml").write_text(TRIAGE)
    (tmp_path / "fx.jsonl").write_text(json.dumps({
        "id": "f.1", "family": "hermes", "model": "qwen2.5", "tools": [{"type": "function", "function": {"name": "f"}}],
        "text": "x", "expected": {"tool_calls": [], "content": "x", "reasoning": None}}) + "\n")
    asked: list[tuple] = []

    def replay_at(engine, pinned, targets):
        targets = list(targets)
        asked.extend((engine, fixture.id, tuple(modes)) for fixture, modes in targets)
        probe = _verdicts({n: "pass" if n < 6 else "fail" for n in range(1, 17)})
        return lambda version: {fixture.id: probe(version) for fixture, _ in targets}

    monkeypatch.setattr(cli, "_pinned_engine", lambda engine: "0.5.16")
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
    (["--cluster", "E9"], "toolmatrix replay-bisect: --cluster E9: not in {root}/triage.yaml (known: E1, D1)"),
    (["--cluster", "D1"], "toolmatrix replay-bisect: --cluster D1: a fixture_doubt cluster; only engine bugs are bisected"),
    (["--cluster", "E1", "--engine", "vllm"], "toolmatrix replay-bisect: --cluster E1: its repro replays sglang, not vllm"),
    (["--fixture", "f.1"], "toolmatrix replay-bisect: --engine E is required with --fixture, -k or --every"),
    (["--cluster", "E1", "-k", "f"], "toolmatrix replay-bisect: --cluster bisects its repro's fixture: not with -k or --every"),
    ([], "toolmatrix replay-bisect: name what to bisect: --fixture ID, -k EXPR, --every N or --cluster ID"),
])
def test_a_cluster_bisect_that_cannot_start_says_why(cluster_files, capsys, args, error):
    from toolmatrix.cli import main

    root, asked = cluster_files
    assert main(["replay-bisect", *args, "--triage", str(root / "triage.yaml"), "--fixtures", str(root / "fx.jsonl"),
                 "--versions", "0.5.1,0.5.2"]) == 2
    assert capsys.readouterr().err.strip() == error.format(root=root) and asked == []


# MLX-LM's version axis (docs/published-results.md): 0.31.3 predates the API the harness drives, 0.32.1 fixed the
# Qwen3-Coder record the sweep flags.
MLX_RELEASES = ["0.31.3", "0.32.0", "0.32.1", "0.32.2"]
TOO_OLD = ("mlxlm {parser}: MLX-LM 0.31.3's server predates the text state machine (GenerationContext.text_sm, "
           "0.32.0) that the replay harness drives: its calls are parsed in another code path, not replayed here")
NO_TOKENIZER = ("mlxlm {parser}: no offline tokenizer for this family: MLX-LM infers its tool-call markers, thinking "
                "markers and detokenizer from the model's own tokenizer")


@pytest.fixture
def releases(tmp_path, monkeypatch):
    """A fixture file of three fixtures, and an engine whose releases need no install and whose worker is a
    stand-in: the per-release replay (``fixture_verdict``) answers from ``verdicts[version][fixture id]``, and
    ``replayed`` gathers (release, fixture id) in the order asked. No tokenizer is fetched (an empty cache)."""
    import contextlib
    import json

    from toolmatrix.cli import replay as cli
    from toolmatrix.replay import bisect as bisect_module
    from toolmatrix.replay.adapters.base import Support

    monkeypatch.setenv("TOOLMATRIX_CACHE", str(tmp_path / "cache"))
    (tmp_path / "fx.jsonl").write_text("".join(json.dumps({
        "id": fixture_id, "family": fixture_id.split(".")[0], "model": "qwen3", "text": "x",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "expected": {"tool_calls": [], "content": "x", "reasoning": None}}) + "\n"
        for fixture_id in ("qwen3_coder.fuzz.1", "hermes.parallel.2", "glm47.null.3")))
    verdicts: dict[str, dict[str, tuple[str, str]]] = {}
    replayed: list[tuple[str, str]] = []

    class Adapter:
        name, python, worker = "mlxlm", "python", "worker.py"

        def __init__(self, version: str) -> None:
            self.version = version

        def supports(self, family, reasoning_style):
            return Support({"qwen3_coder": "qwen3_coder", "hermes": "json_tools", "glm47": "glm47"}[family])

        def env(self):
            return {}

    def fixture_verdict(adapter, client, fixture, modes):
        replayed.append((adapter.version, fixture.id))
        return verdicts[adapter.version][fixture.id]

    monkeypatch.setattr(bisect_module, "adapter_at", lambda engine, version, pinned: Adapter(version))
    monkeypatch.setattr(bisect_module, "install_at", lambda adapter: "")
    monkeypatch.setattr(bisect_module, "WorkerClient", lambda *args: contextlib.nullcontext())
    monkeypatch.setattr(bisect_module, "fixture_verdict", fixture_verdict)
    monkeypatch.setattr(cli, "_pinned_engine", lambda engine: MLX_RELEASES[-1])
    return tmp_path, verdicts, replayed


def _bisect(root, *args: str) -> int:
    from toolmatrix.cli import main

    return main(["replay-bisect", "--engine", "mlxlm", "--fixtures", str(root / "fx.jsonl"), *args])


def test_an_unsupported_end_is_stepped_over_and_the_flip_found_beyond_it(releases, capsys) -> None:
    root, verdicts, replayed = releases
    too_old = ("unsupported", TOO_OLD.format(parser="qwen3_coder"))
    verdicts.update({"0.31.3": {"qwen3_coder.fuzz.1": too_old}, "0.32.0": {"qwen3_coder.fuzz.1": ("fail", "none: x")},
                     "0.32.1": {"qwen3_coder.fuzz.1": ("pass", "")}, "0.32.2": {"qwen3_coder.fuzz.1": ("pass", "")}})
    assert _bisect(root, "--fixture", "qwen3_coder.fuzz.1", "--versions", ",".join(MLX_RELEASES)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "qwen3_coder.fuzz.1: fail at 0.32.0, pass at 0.32.1 (no verdict at 0.31.3: stepped over)"
    assert "  0.31.3: unsupported: mlxlm qwen3_coder: MLX-LM 0.31.3's server predates" in "\n".join(out)
    assert sorted(version for version, _ in replayed) == MLX_RELEASES  # each once, 0.32.1 too


def test_a_range_no_release_of_which_replays_says_why_and_the_command_that_fixes_it(releases, capsys) -> None:
    root, verdicts, replayed = releases
    verdicts["0.31.3"] = {"hermes.parallel.2": ("unsupported", TOO_OLD.format(parser="json_tools"))}
    for version in MLX_RELEASES[1:]:
        verdicts[version] = {"hermes.parallel.2": ("unsupported", NO_TOKENIZER.format(parser="json_tools"))}
    # "cannot run" is the suite's 4 (exitcodes: usage error, or the engine could not start), not 1 (a no)
    assert _bisect(root, "--fixture", "hermes.parallel.2", "--versions", ",".join(MLX_RELEASES)) == 4
    err = capsys.readouterr().err
    assert err.splitlines() == [
        ("replay-bisect hermes.parallel.2 over 0.31.3..0.32.2: no release gives it a verdict here; 4 of the 4 "
         "releases replayed:"),
        f"  0.31.3: unsupported: {TOO_OLD.format(parser='json_tools')}",
        f"  0.32.0, 0.32.1, 0.32.2: unsupported: {NO_TOKENIZER.format(parser='json_tools')}",
        "  to replay it: toolmatrix replay-install tokenizers"]
    # the same refusal at both ends is not the releases': the ones between are not installed to hear it again
    replayed.clear()
    assert _bisect(root, "--fixture", "hermes.parallel.2", "--versions", "0.32.0,0.32.1,0.32.2") == 4
    assert replayed == [("0.32.0", "hermes.parallel.2"), ("0.32.2", "hermes.parallel.2")]
    assert "no two releases give it a verdict here; 2 of the 3 releases replayed" in capsys.readouterr().err


@pytest.mark.parametrize("selection", [["-k", "qwen3_coder or hermes"],
                                       ["--fixture", "qwen3_coder.fuzz.1", "--fixture", "hermes.parallel.2"]])
def test_several_fixtures_are_bisected_in_one_run_each_with_its_own_flip(releases, capsys, selection) -> None:
    root, verdicts, replayed = releases
    fixed_at, broken_at = 2, 3  # Qwen3-Coder fixed at 0.32.1, Hermes broken at 0.32.2
    for n, version in enumerate(MLX_RELEASES):
        verdicts[version] = {"qwen3_coder.fuzz.1": ("pass", "") if n >= fixed_at else ("fail", "none: bad"),
                             "hermes.parallel.2": ("fail", "token: lost") if n >= broken_at else ("pass", "")}
    assert _bisect(root, *selection, "--versions", ",".join(MLX_RELEASES)) == 0
    out, err = capsys.readouterr()
    assert [line for line in out.splitlines() if not line.startswith(" ")] == [
        "qwen3_coder.fuzz.1: fail at 0.32.0, pass at 0.32.1", "hermes.parallel.2: pass at 0.32.1, fail at 0.32.2"]
    assert err.strip() == "2 fixtures over 0.31.3..0.32.2: 2 changed, 0 kept their verdict, 0 cannot be replayed " \
                          "at two releases here; 4 releases replayed"
    # one worker per release for both, and the fixture not selected never replayed
    assert sorted(replayed) == sorted((v, f) for v in MLX_RELEASES for f in ("qwen3_coder.fuzz.1", "hermes.parallel.2"))


@pytest.mark.parametrize("selection, status, error", [
    (["--fixture", "nope.1"], 2, "toolmatrix replay-bisect: --fixture nope.1: not in {root}/fx.jsonl"),
    (["-k", "mistral"], 5, "toolmatrix replay-bisect: no fixture of {root}/fx.jsonl selected"),
    (["-k", "hermes and"], 2, "toolmatrix replay-bisect: -k 'hermes and': "),
])
def test_a_selection_that_picks_nothing_says_so(releases, capsys, selection, status, error) -> None:
    root, _, replayed = releases
    assert _bisect(root, *selection, "--versions", ",".join(MLX_RELEASES)) == status
    assert capsys.readouterr().err.startswith(error.format(root=root)) and replayed == []


def test_every_n_selects_the_fixtures_replay_generate_would_sample(releases, capsys) -> None:
    from toolmatrix.replay.generate import in_sample

    root, verdicts, replayed = releases
    ids = ("qwen3_coder.fuzz.1", "hermes.parallel.2", "glm47.null.3")
    verdicts.update({version: dict.fromkeys(ids, ("pass", "")) for version in MLX_RELEASES})
    assert _bisect(root, "--every", "2", "--versions", ",".join(MLX_RELEASES)) == 1  # each kept its verdict
    assert {fixture_id for _, fixture_id in replayed} == {i for i in ids if in_sample(i, 2)} == {"hermes.parallel.2"}
    assert "the same verdict at both ends: pass at 0.31.3 and at 0.32.2" in capsys.readouterr().err

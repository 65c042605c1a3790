"""``--samples K`` end to end against the fake server: K records per case x mode with their sample index, each
stream compared with its own sample's non-streamed answer, and a cell with the interval."""

from __future__ import annotations

import json

from tests.integration.test_plugin_fake import run_pytest
from toolmatrix.live.sampling import sample_seed
from toolmatrix.records import check_results, read_records
from toolmatrix.testing.fake import FakeServer, Reply

SEED_2 = sample_seed("single.get_weather_paris", 2)


def paris_but_seed_2(body: dict) -> Reply:
    """A 'model' right on get_weather_paris except in sample 2, where it answers in words: samples that disagree."""
    return Reply(content="It is sunny.") if body.get("seed") == SEED_2 else Reply(calls=(("get_weather", {"city": "Paris"}),))


def test_three_samples_make_three_records_per_case_x_mode_and_a_cell_with_the_interval(tmp_path):
    results = tmp_path / "results"
    with FakeServer(paris_but_seed_2) as server:
        proc = run_pytest(tmp_path, "-n", "2", "--base-url", server.base_url, "--model", "fake", "--samples", "3",
                          "-k", "single.get_weather_paris", "--results-dir", str(results))
        requests = list(server.requests)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # sample 2 fails on purpose
    records = list(read_records(results))
    assert sorted((r.mode, r.sample, r.verdict.value) for r in records) == [
        (mode, sample, "fail" if sample == 2 else "pass") for mode in ("nonstream", "stream") for sample in (1, 2, 3)]
    assert check_results(results) == []
    # one non-streamed asking per sample, at the sampled temperature with the sample as seed; every stream agreed
    # with its own sample's answer (sample 2's stream and non-stream both in words, each of the others a call)
    assert sorted((bool(b.get("stream")), b["seed"], b["temperature"]) for b in requests) == sorted(
        (stream, sample_seed("single.get_weather_paris", sample), 1.0) for stream in (False, True)
        for sample in (1, 2, 3))
    assert all(next(c for c in r.checks if c.name == "stream_consistency").outcome.value == "pass"
               for r in records if r.mode == "stream")
    cell = json.loads((results / "matrix" / "matrix.json").read_text())["cells"][0]
    stats = cell["samples"]
    assert stats["samples"] == [3, 3] and stats["pass_hat_k"] == 0 and stats["disagreeing"] == 2
    assert stats["pass_at_1"]["mean"] == round(2 / 3, 4) and len(stats["pass_at_1"]["interval"]) == 2
    assert "k=3: pass@1 67% [" in (results / "matrix" / "matrix.md").read_text()


def test_ids_name_the_sample_only_with_several(tmp_path):
    def ids(*args: str) -> list[str]:
        proc = run_pytest(tmp_path, "--collect-only", "-q", "--base-url", "http://127.0.0.1:9/v1", "--model", "fake",
                          "-k", "single.get_weather_paris", *args)
        return [line.split("::")[-1] for line in proc.stdout.splitlines() if "::test_case[" in line]

    assert ids() == ["test_case[single.get_weather_paris-nonstream]", "test_case[single.get_weather_paris-stream]"]
    assert ids("--samples", "2", "--api", "chat,responses") == [
        f"test_case[single.get_weather_paris-{mode}-s{sample}{api}]"
        for api in ("", "-responses") for sample in (1, 2) for mode in ("nonstream", "stream")]

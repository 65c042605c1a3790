"""The version axis (toolmatrix.replay.releases): an index page read into final releases with their day, filtered
by date and by range."""

from __future__ import annotations

from datetime import date

import pytest

from toolmatrix.replay.releases import ReleaseError, between, ordered, releases_of, since


def _file(name: str, uploaded: str, yanked: bool = False) -> dict:
    return {"filename": name, "upload-time": uploaded, "yanked": yanked}


PAGE = {"files": [
    _file("sglang-0.5.10-py3-none-any.whl", "2026-04-06T01:00:00Z"),
    _file("sglang-0.5.10.tar.gz", "2026-04-05T23:00:00.123Z"),  # the earlier file dates the release
    _file("sglang-0.5.9-py3-none-any.whl", "2026-02-23T10:00:00Z"),
    _file("sglang-0.5.10rc0-py3-none-any.whl", "2026-03-27T10:00:00Z"),  # a pre-release: not a column
    _file("sglang-0.5.8-py3-none-any.whl", "2026-01-23T10:00:00Z", yanked=True),  # pip would not install it
    _file("sglang-0.1.0.win32.exe", "2024-01-01T00:00:00Z"),  # no version pip reads
    _file("sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl", "2026-05-07T10:00:00Z"),
]}


def test_final_releases_oldest_first_dated_by_their_first_file() -> None:
    releases = releases_of(PAGE)
    assert [str(r) for r in releases] == ["0.5.9", "0.5.10", "0.5.11"]
    assert releases[1].published == date(2026, 4, 5)


def test_the_newest_pre_release_is_a_column_only_when_asked_and_newer_than_every_final_one() -> None:
    newer = {"files": [*PAGE["files"], _file("sglang-0.5.12.dev3-py3-none-any.whl", "2026-05-20T10:00:00Z"),
                       _file("sglang-0.5.12rc1-py3-none-any.whl", "2026-05-21T10:00:00Z")]}
    assert [str(r) for r in releases_of(newer)] == ["0.5.9", "0.5.10", "0.5.11"]
    assert [str(r) for r in releases_of(newer, newest_pre=True)] == ["0.5.9", "0.5.10", "0.5.11", "0.5.12rc1"]
    # 0.5.10rc0 is older than the newest final release: nothing of main to show
    assert [str(r) for r in releases_of(PAGE, newest_pre=True)] == ["0.5.9", "0.5.10", "0.5.11"]


def test_since_keeps_the_releases_published_on_or_after_the_day() -> None:
    assert [str(r) for r in since(releases_of(PAGE), date(2026, 4, 5))] == ["0.5.10", "0.5.11"]


def test_between_is_inclusive_and_takes_its_ends_in_either_order() -> None:
    releases = releases_of(PAGE)
    assert between(releases, "0.5.11", "0.5.9") == ["0.5.9", "0.5.10", "0.5.11"]
    assert between(releases, "0.5.10", "0.5.10") == ["0.5.10"]
    with pytest.raises(ReleaseError, match="0.5.8 is not a release on the index"):
        between(releases, "0.5.8", "0.5.11")


def test_ordered_sorts_by_version_not_text_and_names_a_bad_one() -> None:
    assert ordered(["0.5.10", "0.5.9", "0.5.10.post1", "0.5.9"]) == ["0.5.9", "0.5.10", "0.5.10.post1"]
    with pytest.raises(ReleaseError, match="'main' is not a version"):
        ordered(["0.5.9", "main"])

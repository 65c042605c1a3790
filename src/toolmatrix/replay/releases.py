"""An engine package's releases on the package index, oldest first, with the day each was published: the version
axis of ``toolmatrix replay-sweep`` and ``replay-bisect``.

Read from PyPI's JSON simple API (PEP 691): one request gives every file of the project with its upload time and
yank status, which ``pip index versions`` (no dates, experimental) does not."""

from __future__ import annotations

import json
import urllib.request
from datetime import date, datetime
from typing import Iterable

import attrs
from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from toolmatrix.base.errors import ToolmatrixError

INDEX = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json"


class ReleaseError(ToolmatrixError):
    """The index could not be read, or a version asked for is not one of its releases."""


@attrs.frozen(order=True)
class Release:
    version: Version
    published: date  # the day its first file was uploaded

    def __str__(self) -> str:
        return str(self.version)


def _file_version(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None  # an .egg or .exe of a 2010 release: not a version anyone replays


def releases_of(project: dict, newest_pre: bool = False) -> list[Release]:
    """The final releases (no pre-release or dev build) of a PEP 691 project page, oldest first. A release whose
    files are all yanked is left out: pip would not install it. ``newest_pre``: the newest pre-release or dev build
    too, where it is newer than every final release (a fix on the engine's main branch, visible before it ships)."""
    first: dict[Version, date] = {}
    for file in project.get("files", []):
        version = _file_version(file["filename"])
        if version is None or file.get("yanked") or "upload-time" not in file:
            continue
        day = datetime.fromisoformat(file["upload-time"].replace("Z", "+00:00")).date()
        first[version] = min(day, first.get(version, day))
    finals = sorted(Release(v, day) for v, day in first.items() if not v.is_prerelease)
    pres = [Release(v, day) for v, day in first.items() if v.is_prerelease and (not finals or v > finals[-1].version)]
    return finals + [max(pres)] if newest_pre and pres else finals


def fetch_releases(package: str, index: str = INDEX, newest_pre: bool = False) -> list[Release]:
    """``package``'s releases from the index (network); ReleaseError naming the address where it cannot be read."""
    url = f"{index.rstrip('/')}/{package.lower()}/"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": ACCEPT}), timeout=60) as answer:
            return releases_of(json.load(answer), newest_pre)
    except (OSError, ValueError) as exc:
        raise ReleaseError(f"{url}: {exc}") from None


def since(releases: Iterable[Release], day: date) -> list[Release]:
    """The releases published on or after ``day``."""
    return [r for r in releases if r.published >= day]


def ordered(versions: Iterable[str]) -> list[str]:
    """Version strings oldest first; ReleaseError naming one that is not a version."""
    parsed = []
    for text in versions:
        try:
            parsed.append((Version(text), text))
        except InvalidVersion:
            raise ReleaseError(f"{text!r} is not a version") from None
    return [text for _, text in sorted(set(parsed))]


def between(releases: Iterable[Release], low: str, high: str) -> list[str]:
    """The releases from ``low`` to ``high`` inclusive, oldest first; ReleaseError if either end is not one."""
    names = [str(r) for r in releases]
    ends = ordered([low, high])  # one item where both ends are the same release
    low, high = str(Version(ends[0])), str(Version(ends[-1]))
    for end in (low, high):
        if end not in names:
            raise ReleaseError(f"{end} is not a release on the index (the newest: {', '.join(names[-5:])})")
    return names[names.index(low):names.index(high) + 1]

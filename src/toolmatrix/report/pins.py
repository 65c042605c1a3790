"""Every pin of an engine against the newest release on its package index: ``toolmatrix releases``.

An engine is pinned in several places that drift apart silently: its image tag (engines/ENGINE.yaml ``docker``),
the environments its process launcher and its parser replay install (``process.venv`` and ``replay.pip`` steps),
the committed replay snapshot (``results/replay/ENGINE/run.json``) and the version sweep
(``results/versions/versions.json``). Each is read here and held to the newest final release of the engine's own
package (spec ``releases.package``); an image with no version in its tag (``:latest``) is unpinned wherever its
engine publishes. A lag its spec holds (``releases.held``: that release and why) is reported, not failed, while
that release is the newest.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator, Mapping

import attrs
from packaging.version import InvalidVersion, Version

from toolmatrix.replay.releases import INDEX, ReleaseError, fetch_releases
from toolmatrix.serving.launchers.docker import split_image
from toolmatrix.serving.registry import EngineSpec

_VERSION = re.compile(r"\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)?")
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")  # a build recipe that checks out one commit
_REQUIREMENT = re.compile(r"==\s*([0-9][^\s\"'`]*)")  # or installs one release


@attrs.frozen
class Pin:
    """One place that names a release of the engine."""

    where: str  # image, process env, replay env, replay snapshot, version sweep
    what: str  # the pin as written there: an image reference, a requirement, a version
    version: Version | None  # the release it names; None: none (an image by digest or commit, or unpinned)
    pinned: bool = True  # False: it names nothing fixed (a tag such as latest, a nightly build)


@attrs.frozen
class Standing:
    """An engine's pins against the newest release on its index."""

    engine: str
    package: str | None
    newest: Version | None
    pins: tuple[Pin, ...]
    note: str = ""  # why there is no newest: unindexed, or the index could not be read
    held: str | None = None  # why the pins stay behind ``newest`` (the spec's hold for that release)
    unreachable: bool = False

    @property
    def behind(self) -> tuple[Pin, ...]:
        return tuple(p for p in self.pins if self.newest and p.version is not None and p.version < self.newest)

    @property
    def unpinned(self) -> tuple[Pin, ...]:
        return tuple(p for p in self.pins if not p.pinned)

    @property
    def failing(self) -> bool:
        return bool(self.unpinned) or (bool(self.behind) and self.held is None)

    def status(self) -> str:
        """The standing in words, worst first."""
        said = [f"unpinned: {', '.join(p.what for p in self.unpinned)}"] if self.unpinned else []
        if self.behind:
            lag = "; ".join(f"{p.where} {p.version}" for p in self.behind)
            said.append(f"held at {self.newest}: {self.held} ({lag})" if self.held else f"behind {self.newest}: {lag}")
        if self.note:
            said.append(self.note)
        return "; ".join(said) or "current"


def version_in(text: str) -> Version | None:
    """The first release number written in an image tag, a build label or a version (``v0.12.2-cu12.8`` ->
    0.12.2, ``server-cuda-b11434`` -> 11434); None where there is none (``latest``)."""
    found = _VERSION.search(text)
    try:
        return Version(found.group()) if found else None
    except InvalidVersion:
        return None


def _image_pins(spec: EngineSpec) -> Iterator[Pin]:
    """The images the docker launcher runs: a pulled image by its tag (or digest), a local build by what fixes it:
    its tag where that names a release (``toolmatrix/llama-server:b11434``), or its ``build`` recipe (a commit or a
    ``==`` version). A tag such as ``local``, ``latest`` or ``nightly``, or a recipe from a nightly, fixes nothing."""
    if spec.docker is None:
        return
    images = [(spec.docker.image, spec.docker.pull, spec.docker.build),
              *((v["image"], v.get("pull", True), v.get("build")) for v in spec.docker.variants.values()
                if "image" in v)]
    for image, pulled, build in images:
        if not pulled:
            recipe = build or ""
            fixed = _REQUIREMENT.search(recipe)
            version = version_in(fixed.group(1)) if fixed else _tag_release(image)
            yield Pin("image (local build)", image, version,
                      pinned=bool(fixed or _COMMIT.search(recipe) or version is not None))
            continue
        if "@sha256:" in image:
            yield Pin("image", image, None)
        else:
            version = version_in(split_image(image)[1])  # an untagged image is latest: no release
            yield Pin("image", image, version, pinned=version is not None)


_COMMIT_TAG = re.compile(r"[0-9a-f]{7,40}")  # a build of one commit (toolmatrix/tabbyapi:e632af4): fixed, no release
_MOVING = re.compile(r"(?:^|[-_.])(?:local|latest|nightly|dev|main|master|edge)(?:$|[-_.])", re.IGNORECASE)


def _tag_release(image: str) -> Version | None:
    """The release a local build's tag names (``b11434`` -> 11434, ``0.20.dev162``); None for a tag that moves with
    whatever was built last (``local``, ``latest``, ``nightly-…``) or names no release."""
    tag = split_image(image)[1]
    return None if _MOVING.search(tag) or _COMMIT_TAG.fullmatch(tag) else version_in(tag)


def _requirement_pins(where: str, steps: Iterable[Iterable[str]], packages: set[str]) -> Iterator[Pin]:
    """``PACKAGE==VERSION`` arguments of pip steps, for the engine's own packages (extras left aside)."""
    for argument in (a for step in steps for a in step):
        name, sep, version = argument.partition("==")
        if sep and re.sub(r"\[.*\]", "", name).lower() in packages:
            yield Pin(where, argument, version_in(version))


def _build_pins(script: str) -> Iterator[Pin]:
    """The release a build script under toolmatrix/data builds by default (``version="${VAR:-X}"``)."""
    text = resources.files("toolmatrix.data").joinpath(script).read_text()
    for default in re.findall(r'version="\$\{\w+:-([^}"]+)\}"', text):
        yield Pin("process build", f"{script} {default}", version_in(default))


def _run_pin(snapshot: Path | None, engine: str) -> Iterator[Pin]:
    path = snapshot / engine / "run.json" if snapshot else None
    if path is not None and path.is_file():
        version = json.loads(path.read_text()).get("engine", {}).get("version")
        if version:
            yield Pin("replay snapshot", str(version), version_in(str(version)))


def _sweep_pin(sweep: Mapping[str, list[str]], engine: str) -> Iterator[Pin]:
    releases = [(v, text) for text in sweep.get(engine, ()) if (v := version_in(text)) is not None]
    if releases:
        newest, text = max(releases)
        yield Pin("version sweep", text, newest)


def pins(spec: EngineSpec, snapshot: Path | None = None, sweep: Mapping[str, list[str]] | None = None) -> list[Pin]:
    """Every place that pins a release of ``spec``'s engine."""
    packages = {p.lower() for p in (spec.releases.package if spec.releases else None,
                                    spec.process.venv.package if spec.process and spec.process.venv else None,
                                    spec.replay.package if spec.replay else None) if p}
    found = [*_image_pins(spec)]
    if spec.process and spec.process.venv:
        found += _requirement_pins("process env", spec.process.venv.steps, packages)
    elif spec.process and spec.process.install:
        found += _build_pins(spec.process.install)
    if spec.replay:
        found += _requirement_pins("replay env", spec.replay.pip, packages)
        if spec.replay.release:  # a release laid over the env (its own wheel where the env's package lacks it)
            laid = f"{spec.replay.fallback_package or spec.replay.package}=={spec.replay.release}"
            found.append(Pin("replay env", f"{laid} over {spec.replay.package}", version_in(spec.replay.release)))
    return [*found, *_run_pin(snapshot, spec.id), *_sweep_pin(sweep or {}, spec.id)]


def read_sweep(path: Path | None) -> dict[str, list[str]]:
    """Engine -> the releases a version sweep (``replay-versions``' versions.json) replayed; {} without one."""
    if path is None or not path.is_file():
        return {}
    return {entry["engine"]: list(entry["releases"]) for entry in json.loads(path.read_text()).get("engines", [])}


def standing(spec: EngineSpec, snapshot: Path | None = None, sweep: Mapping[str, list[str]] | None = None,
             index: str = INDEX) -> Standing:
    """``spec``'s pins against the newest final release of its package on ``index``."""
    found = tuple(pins(spec, snapshot, sweep))
    releases = spec.releases
    if releases is None or releases.package is None:
        why = releases.unindexed if releases else "its spec names no package index (releases)"
        return Standing(spec.id, None, None, found, note=f"unindexed: {why}")
    try:
        published = fetch_releases(releases.package, index)
    except ReleaseError as exc:
        return Standing(spec.id, releases.package, None, found, note=f"index not read: {exc}", unreachable=True)
    newest = published[-1].version if published else None
    return Standing(spec.id, releases.package, newest, found, held=releases.held.get(str(newest)))

"""Verify a parser change before it ships: the fixture set through an engine's release as published and through the
same release with the change laid over it, fixture by fixture: fixed, broken, unchanged.

The change is a unified diff (a pull request's ``.diff``) or a source folder (a checkout of the engine). Either way
it becomes a copy of the engine's installed package with the change in it (for a diff, links to the installed
files and real copies of the changed ones), first on the worker's ``PYTHONPATH``
(as an ``ENGINE@VERSION`` overlay is): the cached environment is never touched. A diff is applied with ``patch``,
file by file, each file found in the installed package by the longest tail of its path; files outside the package
(tests, docs, build files) are listed as not applied.

llama.cpp's parser is compiled: its replay harness is built again from the source the installed one was built from
with the diff applied (or from a checkout), with the installed build's flags, beside the installed build's tree in
the cache; with ccache there (build-llama-server.sh uses it where installed) only the changed files compile."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

import attrs

from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.records import Verdict, read_run_info, scan_fields

from .adapters import Adapter
from .adapters.llamacpp import LlamaCppAdapter
from .fixtures import Fixture
from .session import replay_engine

FIXED, BROKEN, UNCHANGED = "fixed", "broken", "unchanged"


class ChangeError(ToolmatrixError):
    """A change that cannot be laid over the engine: no Python package to lay it over, nothing of it applies, or
    ``patch`` refuses a hunk (its own words)."""


@attrs.frozen
class Change:
    """A changed copy of the engine's package, and what of the change went into it."""

    folder: Path  # goes first on the worker's PYTHONPATH
    applied: tuple[str, ...]
    not_applied: tuple[str, ...]  # files of the change outside the installed package
    scratch: Path | None = None  # a built change's own tree (llama.cpp), removed once replayed (ccache keeps it)


def site_packages(adapter: Adapter) -> Path:
    """Where the engine's package is installed: an ENGINE@VERSION overlay's folder, else the replay env's
    site-packages (not ours)."""
    if adapter.overlay_dir is not None:
        return adapter.overlay_dir
    found = sorted(adapter.env_dir.glob("lib/python*/site-packages"))
    if not found:
        raise ChangeError(f"{adapter.engine}: no Python environment at {adapter.env_dir} to lay a change over "
                          f"(toolmatrix replay-install {adapter.engine})")
    return found[0]


def package_dirs(adapter: Adapter) -> tuple[Path, list[str]]:
    """site-packages and the top-level import folders of the engine's package (its wheel's RECORD)."""
    site = site_packages(adapter)
    names = {re.sub(r"[-_.]+", "_", p).lower() + "-" for p in adapter.replay.packages}
    records = [p for p in site.glob("*.dist-info/RECORD") if p.parent.name.lower().startswith(tuple(names))]
    if not adapter.replay.package or not records:
        raise ChangeError(f"{adapter.engine}: its parser package ({adapter.replay.package or 'none'}) is not "
                          f"installed in {site}; a change can only be laid over a Python engine's package")
    tops = {line.split("/", 1)[0] for line in records[0].read_text().splitlines() if "/" in line}
    return site, sorted(t for t in tops if t.isidentifier() and (site / t).is_dir())


def file_diffs(diff: str) -> Iterator[tuple[str, str]]:
    """(path, that file's part of a unified diff) for each file it changes, the path as ``+++`` names it."""
    parts = re.split(r"^(?=--- )", diff, flags=re.M)
    for part in parts[1:]:
        target = re.search(r"^\+\+\+ (\S+)", part, re.M)
        if target is not None:
            yield target.group(1), part


def _tail(path: str, found: Callable[[str], bool]) -> int | None:
    """How many leading segments to strip from ``path`` (as a diff names it: ``b/common/chat.cpp``) so that
    ``found`` holds for the rest (a file of the installed tree, or a new file's folder); None where no tail does."""
    parts = path.split("/")
    return next((strip for strip in range(len(parts)) if found("/".join(parts[strip:]))), None)


def _patch(diff: Path, path: str, part: str, strip: int, folder: Path, onto: str) -> None:
    """Apply one file's part of ``diff`` in ``folder``; a refused hunk is a ChangeError with patch's own words."""
    done = subprocess.run(["patch", f"-p{strip}", "--batch", "--forward", "-d", str(folder)], input=part,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ChangeError(f"{diff}: {path} does not apply to {onto}: {(done.stdout + done.stderr).strip()[-500:]}")


def _apply(diff: Path, text: str, folder: Path, onto: str, locate: Callable[[str, str], int | None],
           prepare: Callable[[str], None]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each file of ``text`` that ``locate`` finds (the leading path segments to strip), made ready by ``prepare``
    (given its path inside) and patched in ``folder``: the applied files and the others (not applied); a
    ChangeError where none applies."""
    applied, skipped = [], []
    for path, part in file_diffs(text):
        strip = locate(path, part)
        if strip is None:
            skipped.append(path)
            continue
        prepare("/".join(path.split("/")[strip:]))
        _patch(diff, path, part, strip, folder, onto)
        applied.append(path)
    if not applied:
        raise ChangeError(f"{diff}: none of its files is in {onto}: {', '.join(skipped) or 'no file at all'}")
    return tuple(applied), tuple(skipped)


def _needs_patch() -> None:
    if shutil.which("patch") is None:
        raise ChangeError("--patch needs GNU patch on the PATH (Debian and Ubuntu: apt install patch)")


@contextlib.contextmanager
def _change_tree(adapter: LlamaCppAdapter, key: str) -> Iterator[Path]:
    """A fresh folder beside the installed build's tree, laid out as it is (ccache hashes paths relative to the
    build folder): ``change-KEY/<sdist folder>/llama.cpp`` (yielded) and ``change-KEY/build``; removed whole when
    anything inside fails (a removal once replayed is the Change's ``scratch``)."""
    installed = adapter.source_tree
    root = installed.parents[1].with_name(f"change-{key}")
    shutil.rmtree(root, ignore_errors=True)
    try:
        yield root / installed.parent.name / installed.name
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def built_from_patch(adapter: LlamaCppAdapter, diff: Path) -> Change:
    """The installed harness's llama.cpp tree as links (real copies of the files the diff changes), the diff applied
    file by file, the harness built from it; a file the tree does not hold is not applied."""
    _needs_patch()
    installed = adapter.source_tree.resolve()  # absolute: the links made to it must point there from anywhere
    if not installed.is_dir():
        raise ChangeError(f"{adapter.name}: the llama.cpp tree the installed harness was built from is not in the "
                          f"cache ({installed}): rm {adapter.record} && toolmatrix install llamacpp")
    text = diff.read_text(encoding="utf-8")
    with _change_tree(adapter, hashlib.sha256(text.encode()).hexdigest()[:12]) as source:
        shutil.copytree(installed, source, copy_function=os.symlink, ignore=shutil.ignore_patterns(".git"))

        def locate(path: str, part: str) -> int | None:
            strip = 1 if re.match(r"[ab]/", path) else 0  # a repository's diff: git's a/ and b/ prefixes, or none
            inside = installed / "/".join(path.split("/")[strip:])  # not in the sdist's tree: CI files, left-outs
            created = part.startswith("--- /dev/null")
            return strip if inside.is_file() or (created and inside.parent.is_dir()) else None

        def prepare(inside: str) -> None:
            _own_copy(source / inside, installed / inside)

        applied, skipped = _apply(diff, text, source, f"{adapter.name}'s llama.cpp tree ({installed})", locate,
                                  prepare)
        return _built(adapter, source, f"{diff.name} over {adapter.name}", applied, skipped, same_build=True)


def built_from_source(adapter: LlamaCppAdapter, checkout: Path) -> Change:
    """The harness built from a llama.cpp checkout (linked beside the installed tree, so unchanged files are
    ccache hits where it is the same release)."""
    checkout = checkout.resolve()  # absolute: the links made to it must point there from anywhere
    if not (checkout / "common" / "chat.cpp").is_file():
        raise ChangeError(f"{checkout}: not a llama.cpp checkout (no common/chat.cpp)")

    def left_out(folder: str, names: list[str]) -> list[str]:  # git's data, and the checkout's own build folders
        return [n for n in names if n == ".git" or (Path(folder) == checkout and n.startswith("build"))]

    with _change_tree(adapter, hashlib.sha256(str(checkout).encode()).hexdigest()[:12]) as source:
        shutil.copytree(checkout, source, copy_function=os.symlink, ignore=left_out)
        return _built(adapter, source, f"{checkout} (a llama.cpp checkout)", (str(checkout),), (), same_build=False)


def _built(adapter: LlamaCppAdapter, source: Path, what: str, applied: tuple[str, ...], skipped: tuple[str, ...],
           same_build: bool) -> Change:
    """The harness built from ``source`` beside it, into the change tree's ``build``."""
    folder = adapter.build_change(source, source.parents[1] / "build", what, same_build=same_build)
    return Change(folder, applied, skipped, scratch=source.parents[1])


def from_patch(adapter: Adapter, diff: Path, work: Path) -> Change:
    """The engine's package copied into ``work`` and ``diff`` applied there, file by file."""
    if isinstance(adapter, LlamaCppAdapter):  # a compiled parser: built, not laid over a package
        return built_from_patch(adapter, diff)
    site, tops = package_dirs(adapter)
    _needs_patch()
    folder = work / "change"

    def locate(path: str, part: str) -> int | None:
        return _tail(path, lambda tail: tail.split("/")[0] in tops
                     and ((site / tail).is_file() or (site / tail).parent.is_dir()))

    def prepare(inside: str) -> None:
        top = inside.split("/")[0]
        if not (folder / top).exists():  # a tree of links to the installed files: vLLM's package is 0.5 GB
            shutil.copytree(site / top, folder / top, copy_function=os.symlink,
                            ignore=shutil.ignore_patterns("__pycache__"))
        _own_copy(folder / inside, site / inside)

    applied, skipped = _apply(diff, diff.read_text(encoding="utf-8"), folder,
                              f"{adapter.name}'s installed {adapter.replay.package} ({', '.join(tops)})", locate,
                              prepare)
    return Change(folder, applied, skipped)


def _own_copy(link: Path, installed: Path) -> None:
    """The file a hunk changes made a real copy of the installed one, so that patching it never writes through the
    link into the cached environment (a new file has neither)."""
    if link.is_symlink():
        link.unlink()
    if installed.is_file():
        shutil.copyfile(installed, link)


def from_source(adapter: Adapter, source: Path, work: Path) -> Change:
    """The engine's package as a source checkout has it (its shallowest folder of each top-level import name)."""
    if isinstance(adapter, LlamaCppAdapter):
        return built_from_source(adapter, source)
    _, tops = package_dirs(adapter)
    folder = work / "change"
    applied = []
    for top in tops:
        found = sorted((p.parent for p in source.glob(f"**/{top}/__init__.py")), key=lambda p: len(p.parts))
        if found:
            shutil.copytree(found[0], folder / top, ignore=shutil.ignore_patterns("__pycache__"))
            applied.append(str(found[0].relative_to(source)))
    if not applied:
        raise ChangeError(f"{source}: holds no {' or '.join(tops)} package to lay over {adapter.name}")
    return Change(folder, tuple(applied), ())


def verdicts(directory: Path) -> dict[tuple[str, str], Verdict]:
    """(fixture, mode) -> verdict of one replay run."""
    return {(case, mode): verdict for _, (case, mode, verdict)
            in scan_fields(read_run_info(directory), "case_id", "mode", "verdict")}


def compare(before: Mapping[tuple[str, str], Verdict],
            after: Mapping[tuple[str, str], Verdict]) -> dict[str, dict[str, list[str]]]:
    """Each fixture fixed (a mode failed and passes, none the other way), broken (a mode passed and fails), or
    unchanged, with the modes that flipped."""
    flips: dict[str, dict[str, list[str]]] = {case: {FIXED: [], BROKEN: []} for case, _ in before}
    for (case, mode), was in before.items():
        now = after.get((case, mode))
        if was is Verdict.PASS and now is not Verdict.PASS:
            flips[case][BROKEN].append(mode)
        elif was is not Verdict.PASS and now is Verdict.PASS:
            flips[case][FIXED].append(mode)
    return flips


def outcome(modes: Mapping[str, list[str]]) -> str:
    return BROKEN if modes[BROKEN] else FIXED if modes[FIXED] else UNCHANGED


def verify(adapter: Adapter, change: Change, fixtures: list[Fixture], directory: Path,
           chunkings: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Replay ``fixtures`` through the release (``DIR/base/ENGINE``) and through it with ``change``
    (``DIR/change/ENGINE``); the per-fixture comparison."""
    chunkings = list(chunkings)
    changed = attrs.evolve(adapter, change=change.folder)
    replay_engine(adapter, fixtures, directory / "base" / adapter.engine, chunkings)
    replay_engine(changed, fixtures, directory / "change" / adapter.engine, chunkings)
    return compare(verdicts(directory / "base" / adapter.engine), verdicts(directory / "change" / adapter.engine))

"""Placeholders in engine and model specs (``{port}``, ``{weights}``, ...): the one renderer both launchers use,
and the names each part of a spec may use, checked when the specs load.

Only ``{lower_case_name}`` is a placeholder: other braces (a JSON argument such as ``{"a": 1}``) are text.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Mapping, Sequence

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

# What every launcher fills in: the parts of a spec that any launcher renders (served_model, tool arguments,
# readiness requests) may use these only.
COMMON = frozenset({"host", "port", "served_name", "slots", "ctx_size", "chat_template", "weights"})
PROCESS = COMMON | {"threads", "cpus"}  # a local process: the cores it leases (launchers/cores.py)
# Paths inside the container; and the docker command item that the weights_args of the model's source replace.
DOCKER = COMMON | {"models_dir", "weights_name", "weights_file", "revision", "weights_args"}
WEIGHTS_ARGS = "{weights_args}"
VOLUME = frozenset({"hf_cache", "cache"})  # the host side of a docker volume


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{name}`` placeholders; an unknown name raises KeyError (specs are checked on load, so it is ours)."""

    def fill(match: re.Match) -> str:
        if match.group(1) not in values:
            raise KeyError(f"unknown placeholder {match.group(0)} in {template!r}; known: {', '.join(sorted(values))}")
        return values[match.group(1)]

    return PLACEHOLDER.sub(fill, template)


def names_in(texts: Iterable[str]) -> set[str]:
    """The placeholder names the texts use."""
    return {name for text in texts for name in PLACEHOLDER.findall(text)}


def render_args(template: Iterable[str], values: Mapping[str, str],
                splices: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Render an argument template. An item named in ``splices`` becomes that list; an argument that renders
    empty is dropped with the flag before it (``--revision {revision}`` without a revision disappears)."""
    out: list[str] = []
    for item in template:
        if splices and item in splices:
            out += render_args(splices[item], values)
            continue
        text = render(item, values)
        if text:
            out.append(text)
        elif out and out[-1].startswith("-"):
            out.pop()
    return out


def render_json(value: Any, values: Mapping[str, str]) -> Any:
    """Fill placeholders in every string of a JSON value (readiness request bodies)."""
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, Mapping):
        return {key: render_json(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [render_json(item, values) for item in value]
    return value


def known_at(path: tuple) -> frozenset[str]:
    """The placeholders the part of an engine spec at ``path`` may use, by the launcher that renders it."""
    if path[:1] == ("process",):
        return PROCESS
    if path[:1] == ("docker",):
        return VOLUME if "volumes" in path and path[-1] == "host" else DOCKER
    return COMMON


def unknown_placeholders(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, str, frozenset[str]]]:
    """``(path, name, known)`` for every placeholder in a spec's strings that its part may not use."""
    if isinstance(value, str):
        known = known_at(path)
        for name in PLACEHOLDER.findall(value):
            if name not in known:
                yield path, name, known
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in ("notes", "title", "unsupported", "cannot_serve", "evidence"):  # prose, not rendered
                yield from unknown_placeholders(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unknown_placeholders(item, (*path, index))

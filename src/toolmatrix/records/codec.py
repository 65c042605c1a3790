"""Records and runs as JSON and back: the files' names, the format version, the cattrs converter, and the
migration of older records.

Records of format version 1 (before checks had an ``outcome`` and a ``kind``, and when ``status`` was the HTTP
status) still load: ``migrate`` turns each into version 2 as it is read. So do unsupported records written before
``gaps``: ``migrate`` reads their gaps back out of their reason.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

SCHEMA_VERSION = 2  # of a record and of run.json; version 1 still loads
RECORDS = "results.jsonl"
RUN = "run.json"

T = TypeVar("T", bound=attrs.AttrsInstance)

# The JSON a record holds as it came (a request, an answer's body or chunks, an expectation). At run time the bare
# types: cattrs passes a bare dict through (the hook below) and never coerces its keys, where it would walk a
# dict[str, Any] key by key; the type checker reads the parameters.
if TYPE_CHECKING:
    JSONObject = dict[str, Any]
    JSONArray = list[Any]
else:
    JSONObject, JSONArray = dict, list

converter = cattrs.Converter()
# A request, an answer, an expectation are JSON values already: written as they are, not walked value by value
# (the walk cost a millisecond a record, most of a replay's own time over tens of thousands of records).
converter.register_unstructure_hook(dict, lambda value: value)

_COMPACT: set[type] = set()
_ALWAYS_WRITTEN = ("blame", "latency_s", "finished", "schema_version")


def compact(cls: type[T]) -> type[T]:
    """Class decorator: optional fields of ``cls`` left at their default are not written (a stream record has no
    "response", and so on), but for the few a reader expects on every line."""
    _COMPACT.add(cls)
    return cls


converter.register_unstructure_hook_factory(
    lambda cls: cls in _COMPACT,
    lambda cls: make_dict_unstructure_fn(
        cls, converter, _cattrs_omit_if_default=True,
        # The keywords are field names, never one of cattrs' own (_cattrs_*) that the checker matches them with.
        **{name: override(omit_if_default=False)  # type: ignore[arg-type]
           for name in _ALWAYS_WRITTEN if name in attrs.fields_dict(cls)}))


def keeps_unknown(cls: type[T]) -> type[T]:
    """Class decorator for a JSON object its writers may add to (a launcher describes what it knows): the keys
    ``cls`` has no field for are kept in its ``extra`` mapping and written back beside the fields, so nothing read
    is lost. Optional fields are written as ``compact`` writes them."""
    compact(cls)
    names = {field.name for field in attrs.fields(cls)} - {"extra"}
    structure = make_dict_structure_fn(cls, converter)
    unstructure = converter.get_unstructure_hook(cls)

    def read(data: dict[str, Any], _: type[T]) -> T:
        extra = {key: value for key, value in data.items() if key not in names}
        return structure({**{key: data[key] for key in names if key in data}, "extra": extra}, cls)

    def write(value: T) -> dict[str, Any]:
        out = unstructure(value)
        extra = out.pop("extra", {})
        return {**out, **extra}

    converter.register_structure_hook(cls, read)
    converter.register_unstructure_hook(cls, write)
    return cls


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """An older record as today's: version 1 as version 2, and an unsupported record with its ``gaps``."""
    return _with_gaps(_version_2(data))


def _version_2(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 record as version 2: ``status`` (HTTP) became ``http_status``, a check's ``status`` its
    ``outcome``."""
    if data.get("schema_version") != 1:
        return data
    out = {**data, "schema_version": SCHEMA_VERSION, "checks": [_migrate_check(c) for c in data.get("checks", [])]}
    if "status" in out:
        out["http_status"] = out.pop("status")
    if isinstance(out.get("followup"), dict):
        followup = dict(out["followup"])
        if "status" in followup:
            followup["http_status"] = followup.pop("status")
        followup["checks"] = [_migrate_check(c) for c in followup.get("checks", [])]
        out["followup"] = followup
    return out


def _migrate_check(check: Any) -> Any:
    if not isinstance(check, dict) or "status" not in check:
        return check
    out = {k: v for k, v in check.items() if k != "status"}
    out["outcome"] = check["status"]
    return out


def _with_gaps(data: dict[str, Any]) -> dict[str, Any]:
    """An unsupported record written before ``gaps`` (every unsupported record has one since), with its gaps read
    from its reason as the judge then wrote it: ``FEATURE: WHY; FEATURE: WHY`` and, where a check failed, `` (CHECK:
    DETAIL)``. Runs before a line is validated: anything else is left for the schema to refuse."""
    reason, checks = data.get("reason"), data.get("checks")
    if data.get("verdict") != "unsupported" or "gaps" in data or not isinstance(reason, str):
        return data
    failing = next((c for c in checks if isinstance(c, dict) and c.get("outcome") == "fail"), None) \
        if isinstance(checks, list) else None
    if failing is not None:
        reason = reason.removesuffix(f" ({failing.get('name')}: {failing.get('detail')})")
    gaps: dict[str, str] = {}
    feature = None
    for piece in filter(None, reason.split("; ")):  # "": an unsupported record that declared no gap
        head, colon, why = piece.partition(": ")
        if colon and " " not in head:
            feature, gaps[head] = head, why
        elif feature is not None:  # a why that holds "; " itself
            gaps[feature] += "; " + piece
        else:
            gaps[piece] = ""  # not the judge's wording: kept whole, as the name of a gap
    return {**data, "gaps": gaps} if gaps else data


def encode_json_line(data: Any) -> str:
    """``data`` as one line of JSON, whatever text it holds."""
    try:
        return orjson.dumps(data, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        # An integer beyond 64 bits, or a lone surrogate in text an engine sent: json copes, and ASCII escapes
        # keep the line valid UTF-8 whatever the text holds.
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str)

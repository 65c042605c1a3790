"""The case library: YAML case files -> frozen, validated ``Case`` objects.

A case file holds one category. Tools come from the file's own ``tools:`` map, from a tool-set file
(``FILESTEM.NAME``), or inline. Loading checks the schema and the cross-file rules (unique ids, tools that
exist, expectations that name offered tools) and reports every problem at once, each naming file, line, case
id and field; nothing is sent to an engine until the whole library is clean.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import attrs
import yaml

from toolmatrix.base import features
from toolmatrix.base.specs import SpecError, SpecErrors, YamlDoc, json_schema_problem, read_yaml, schema_errors
from toolmatrix.base.yamldata import JsonPath, load_json_yaml

SCHEMA = "cases.schema.json"
NO_PARAMETERS: dict = {"type": "object"}  # a tool that declares none: one object, read never written


@attrs.frozen
class CaseShard:
    """The I-th of N slices of a case library (``--case-shard I/N``), by a hash of the case id: a case keeps its
    slice as others are added, so a shard's results stay comparable with its earlier runs."""

    index: int  # 1 .. count
    count: int

    def holds(self, case_id: str) -> bool:
        return int(hashlib.sha256(case_id.encode()).hexdigest()[:8], 16) % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def case_shard(text: str) -> CaseShard:
    """``--case-shard I/N``: two whole numbers with 1 <= I <= N (a command-line value type, beside its type)."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected I/N, e.g. 2/4") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be between 1 and N")
    return CaseShard(index, count)


@attrs.frozen
class CallExpectation:
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Expectation:
    """What a correct answer looks like: some calls, no call, any call, any well-formed answer, or a 4xx."""

    calls: tuple[CallExpectation, ...] = ()
    ordered: bool = False
    allow_extra_calls: bool = False
    no_call: bool = False
    any_call: bool = False
    reject: bool = False
    completes: bool = False
    content_contains_any: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Expectation:
        return cls(
            calls=tuple(CallExpectation(c["name"], dict(c.get("arguments", {}))) for c in data.get("calls", ())),
            ordered=data.get("ordered", False),
            allow_extra_calls=data.get("allow_extra_calls", False),
            no_call=data.get("no_call", False),
            any_call=data.get("any_call", False),
            reject=data.get("reject", False),
            completes=data.get("completes", False),
            content_contains_any=tuple(data.get("content", {}).get("contains_any", ())),
        )


@attrs.frozen
class Followup:
    tool_results: Mapping[str, str]
    expect: Expectation


@attrs.frozen(eq=False)
class Case:
    """One scenario. ``tools`` are resolved OpenAI tool objects; ``source`` is ``file:line``."""

    id: str
    category: str
    description: str
    tools: tuple[dict, ...]
    messages: tuple[dict, ...]
    tool_choice: Any
    options: Mapping[str, Any]
    expect: Expectation
    followup: Followup | None
    requires: tuple[str, ...]
    source: str
    fuzz_seed: int | None = None  # the --fuzz-seed a generated case was drawn with (toolmatrix.library.fuzz)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(t["function"]["name"] for t in self.tools)

    def tool_schema(self, name: str) -> dict | None:
        for tool in self.tools:
            if tool["function"]["name"] == name:
                return tool["function"].get("parameters", NO_PARAMETERS)
        return None

    @property
    def tool_choice_kind(self) -> str:
        """auto | none | required | named | invalid — the behaviour class the case asks for."""
        choice = self.tool_choice
        if choice in (None, "auto", "none", "required"):
            return choice or "auto"
        function = choice.get("function") if isinstance(choice, Mapping) else None
        if isinstance(function, Mapping) and choice.get("type") == "function" and function.get("name") in self.tool_names:
            return "named"
        return "invalid"

    @property
    def named_function(self) -> str | None:
        return self.tool_choice["function"]["name"] if self.tool_choice_kind == "named" else None

    @property
    def features(self) -> frozenset[str]:
        """Features the case exercises; engine specs declare which of them they do not support."""
        found = set(self.requires)
        if self.tool_choice_kind != "auto":
            found.add(f"tool_choice.{self.tool_choice_kind}")
        if len(self.expect.calls) > 1:
            found.add(features.PARALLEL_CALLS)
        if self.options.get("parallel_tool_calls") is False:
            found.add(features.PARALLEL_TOOL_CALLS_FALSE)
        if self.followup is not None:
            found.add(features.MULTI_TURN)
        return frozenset(found)


def _normalise_tool_choice(value: Any) -> Any:
    # {function: NAME} is shorthand for the OpenAI object; anything else is sent exactly as written.
    if isinstance(value, Mapping) and set(value) == {"function"} and isinstance(value["function"], str):
        return {"type": "function", "function": {"name": value["function"]}}
    return value


@attrs.define
class _Loader:
    """Accumulates tool sets and cases over all files, collecting every error."""

    validate: bool = True
    errors: list[SpecError] = attrs.field(factory=list)
    tool_sets: dict[str, dict[str, dict]] = attrs.field(factory=dict)
    docs: list[YamlDoc] = attrs.field(factory=list)
    seen_ids: dict[str, tuple[Path, str, dict]] = attrs.field(factory=dict)  # id -> first file, line, scenario
    broken: dict[Path, set[int | None]] = attrs.field(factory=dict)  # per file: its cases that failed a check

    def read(self, path: Path) -> None:
        try:
            doc = read_yaml(path)
        except SpecErrors as exc:
            self.errors.extend(exc.errors)
            return
        self.add(doc)

    def add(self, doc: YamlDoc) -> None:
        """Check ``doc`` and keep what can be built from it: a problem in one case leaves the file's other cases
        to their own checks (every mistake of a file shows in one run); one outside its cases (a field of the file,
        its tools, YAML JSON cannot hold) leaves nothing of the file sound enough to judge further."""
        problems = schema_errors(doc, SCHEMA, where_of=lambda p: _case_id_at(doc, p)) if self.validate else []
        if doc.refusals or any(_case_index(p) is None for p in problems):
            self.errors.extend(problems)
            return
        bad = {_case_index(p) for p in problems}
        problems += _embedded_schema_errors(doc, bad) if self.validate else []
        self.errors.extend(problems)
        self.docs.append(doc)
        self.broken[doc.path] = {_case_index(p) for p in problems}
        self.tool_sets[doc.path.stem] = doc.data.get("tools", {})

    def resolve_tool(self, doc: YamlDoc, ref: Any, at: tuple, case_id: str) -> dict | None:
        if isinstance(ref, dict):
            return ref
        local = doc.data.get("tools", {})
        if ref in local:
            return local[ref]
        stem, _, name = ref.rpartition(".")
        if stem in self.tool_sets and name in self.tool_sets[stem]:
            return self.tool_sets[stem][name]
        self.errors.append(doc.error(at, f"unknown tool {ref!r} (not in this file's tools nor a tool-set file)", case_id))
        return None

    def cases(self, wanted: set[Path]) -> list[Case]:
        """Every case that passes its checks, of the files ``wanted``; checked are the cases of every file."""
        out: dict[str, Case] = {}
        for doc in self.docs:
            for index, raw in enumerate(doc.data["cases"]):
                case = None if index in self.broken[doc.path] else self.build(doc, index, raw)
                if case is not None and doc.path in wanted:
                    out.setdefault(case.id, case)  # the same scenario in two files (see build) runs once
        return list(out.values())

    def checked(self, wanted: set[Path]) -> list[Case]:
        """The cases of the files ``wanted``, once every file read is clean; else ``SpecErrors`` listing all."""
        cases = self.cases(wanted)
        if self.errors:
            files = list(dict.fromkeys(e.file for e in self.errors))  # each file's problems together, by line
            raise SpecErrors(sorted(self.errors, key=lambda e: (files.index(e.file), e.line or 0)))
        return cases

    def build(self, doc: YamlDoc, index: int, raw: dict) -> Case | None:
        at = ("cases", index)
        case_id = raw["id"]
        before = len(self.errors)
        # An id names one scenario: a second file may repeat it only unchanged but for its description (a
        # library file given again, a kept fuzz case written out again by fuzz-keep).
        scenario = {k: v for k, v in raw.items() if k != "description"}
        first_file, first, first_scenario = self.seen_ids.setdefault(
            case_id, (doc.path, f"{doc.path}:{doc.line(at)}", scenario))
        if first_scenario is not scenario and (first_file == doc.path or first_scenario != scenario):  # not itself
            self.errors.append(doc.error(at + ("id",), f"duplicate case id (first defined at {first})", case_id))
        category = doc.data["category"]
        if not case_id.startswith(category + "."):
            self.errors.append(doc.error(at + ("id",), f"id must start with the file's category {category!r}", case_id))
        tools = [self.resolve_tool(doc, ref, at + ("tools", i), case_id) for i, ref in enumerate(raw.get("tools", []))]
        names = [t["function"]["name"] for t in tools if t]
        if len(set(names)) != len(names):
            self.errors.append(doc.error(at + ("tools",), "the same tool name is offered twice", case_id))
        tool_choice = _normalise_tool_choice(raw.get("tool_choice"))
        expect = Expectation.from_dict(raw["expect"])
        followup = None
        if "followup" in raw:
            followup = Followup(dict(raw["followup"]["tool_results"]), Expectation.from_dict(raw["followup"]["expect"]))
        self.check_names(doc, at, case_id, names, expect, followup, tool_choice)
        if len(self.errors) > before:
            return None
        return Case(
            id=case_id,
            category=category,
            description=raw.get("description", ""),
            tools=tuple(t for t in tools if t),
            messages=tuple(raw["messages"]),
            tool_choice=tool_choice,
            options={"temperature": 0, **raw.get("options", {})},
            expect=expect,
            followup=followup,
            requires=tuple(raw.get("requires", ())),
            source=f"{doc.path}:{doc.line(at)}",
        )

    def check_names(self, doc, at, case_id, names, expect, followup, tool_choice) -> None:
        """Expectations may only name offered tools; a typo would otherwise read as a model failure."""
        for i, call in enumerate(expect.calls):
            if call.name not in names:
                self.errors.append(doc.error(at + ("expect", "calls", i, "name"), f"{call.name!r} is not an offered tool", case_id))
        if followup:
            for name in followup.tool_results:
                if name not in names:
                    self.errors.append(doc.error(at + ("followup", "tool_results", name), f"{name!r} is not an offered tool", case_id))
        problem = None if expect.reject else _tool_choice_problem(tool_choice, names)
        if problem:
            self.errors.append(doc.error(at + ("tool_choice",), problem, case_id))


VALID_TOOL_CHOICE = "auto, none, required, {function: NAME} or {type: function, function: {name: NAME}}"


def _tool_choice_problem(choice: Any, names: list[str]) -> str | None:
    """Why a case that expects an answer cannot send this tool_choice: only a reject case sends an invalid one."""
    if choice in (None, "auto", "none", "required"):
        return None
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) and choice.get("type") == "function" else None
    if not isinstance(name, str):
        shown = json.dumps(choice, ensure_ascii=False)
        return f"{shown} is not a valid tool_choice ({VALID_TOOL_CHOICE}); a case that sends one expects reject: true"
    if name not in names:
        return f"named tool {name!r} is not offered"
    return None


def _embedded_schemas(data: Mapping[str, Any], skip: set[int | None]) -> Iterator[tuple[JsonPath, Any]]:
    """Every JSON Schema a case file holds: tool parameters (its own tools, inline tools) and {schema: ...} matchers
    (not those of the cases in ``skip``, which failed the file's schema)."""
    for name, tool in data.get("tools", {}).items():
        if "parameters" in tool["function"]:
            yield ("tools", name, "function", "parameters"), tool["function"]["parameters"]
    for index, case in enumerate(data["cases"]):
        if index in skip:
            continue
        at = ("cases", index)
        for position, tool in enumerate(case.get("tools", [])):
            if isinstance(tool, dict) and "parameters" in tool["function"]:
                yield at + ("tools", position, "function", "parameters"), tool["function"]["parameters"]
        yield from _matcher_schemas(at + ("expect",), case["expect"])
        if "followup" in case:
            yield from _matcher_schemas(at + ("followup", "expect"), case["followup"]["expect"])


def _matcher_schemas(at: JsonPath, expect: Mapping[str, Any]) -> Iterator[tuple[JsonPath, Any]]:
    for position, call in enumerate(expect.get("calls", [])):
        for argument, matcher in call.get("arguments", {}).items():
            inner: JsonPath = ()
            if isinstance(matcher, dict) and "optional" in matcher:  # {optional: {schema: ...}}
                matcher, inner = matcher["optional"], ("optional",)
            if isinstance(matcher, dict) and "schema" in matcher:
                yield at + ("calls", position, "arguments", argument) + inner + ("schema",), matcher["schema"]


def _embedded_schema_errors(doc: YamlDoc, skip: set[int | None]) -> list[SpecError]:
    """A schema the checks cannot use would fail every exchange of its cases: refuse it when the file loads."""
    errors = []
    for at, schema in _embedded_schemas(doc.data, skip):
        problem = json_schema_problem(schema)
        if problem:
            inner, message = problem
            errors.append(doc.error(at + inner, message, _case_id_at(doc, at)))
    return errors


def _case_id_at(doc: YamlDoc, path: tuple) -> str:
    if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
        try:
            return str(doc.data["cases"][path[1]].get("id", f"cases[{path[1]}]"))
        except (AttributeError, IndexError, TypeError):
            pass
    return ""


def _case_index(error: SpecError) -> int | None:
    """The index of the case a problem is in; None for one outside the cases (a field of the file, its tools)."""
    found = re.match(r"\$\.cases\[(\d+)\]", error.json_path)
    return int(found.group(1)) if found else None


def case_files(paths: Iterable[Path]) -> list[Path]:
    """Expand directories to their ``*.yaml``/``*.yml`` files (sorted, so ids keep a stable order)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")))
        else:
            files.append(path)
    return files


def load_case_text(text: str, name: str, validate: bool = True) -> list[Case]:
    """The cases of one case file's YAML ``text`` made in this process (generated cases), loaded and checked as
    the file ``name`` would be by ``load_cases``; raise ``SpecErrors`` listing all problems."""
    try:
        parsed = load_json_yaml(text)
    except yaml.YAMLError as exc:
        raise SpecErrors([SpecError(name, None, "", "$", f"invalid YAML: {exc}")]) from None
    loader = _library_loader(validate, {})
    loader.add(YamlDoc(Path(name), parsed.data, parsed.lines, parsed.refusals))
    return loader.checked({Path(name)})


def library_dir() -> Path:
    """The built-in case library (its tool-set files answer FILESTEM.NAME in every case file)."""
    from toolmatrix.serving.registry import data_root  # registry reads engines and models; cases need only its root

    return data_root() / "cases"


def _library_loader(validate: bool, given: dict[Path, Path]) -> _Loader:
    """A loader that has read the built-in library, each of its files that is also ``given`` (resolved -> as
    spelled) under the given name, which is then taken out of ``given``."""
    loader = _Loader(validate)
    for path in case_files([library_dir()]) if library_dir().is_dir() else []:
        loader.read(given.pop(path.resolve(), path))
    return loader


def load_cases(paths: Iterable[Path], validate: bool = True) -> list[Case]:
    """The cases of the case files under ``paths``, checked together with the built-in library; raise
    ``SpecErrors`` listing all problems of all files.

    The library is read whether or not ``paths`` hold it: its tool-set files answer ``FILESTEM.NAME`` and its ids
    stay taken, so a file is accepted or refused alike by ``toolmatrix validate FILE``, ``pytest --cases FILE``
    (``paths``: the library and FILE) and ``--only-cases`` (FILE alone); only the cases of ``paths`` come back.
    ``validate=False`` skips the JSON Schema checks (the costliest part of loading: about a second for the
    library) where the very same files were validated already: in an xdist worker, after its controller."""
    files = case_files(paths)
    missing = [p for p in files if not p.exists()]
    if missing:
        raise SpecErrors(SpecError(str(p), None, "", "$", "no such file or directory") for p in missing)
    given: dict[Path, Path] = {}
    for path in files:  # a file named twice is read once
        given.setdefault(path.resolve(), path)
    loader = _library_loader(validate, given)  # the library first: a clash shows in the file that repeats an id
    for path in given.values():
        loader.read(path)
    return loader.checked(set(files))

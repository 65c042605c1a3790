"""The registry: the engine specs (``engines/ENGINE.yaml``) and the models (``engines/models.yaml``) read, checked
against their schemas and each other, and held once per data root (``registry()``); the spec classes are in
``serving.specs``."""

from __future__ import annotations

import functools
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import attrs

from toolmatrix.base.settings import cache_dir, data_root, default_family
from toolmatrix.base.specs import SpecError, SpecErrors, YamlDoc, read_yaml, schema_errors
from toolmatrix.serving.placeholders import unknown_placeholders
from toolmatrix.serving.specs import (
    ANY_FAMILY,
    LAUNCHER_KINDS,
    WEIGHTS_KINDS,
    CheckSpec,
    DockerSpec,
    EngineSpec,
    EvidenceSpec,
    ModelSpec,
    ProcessSpec,
    ReadinessStep,
    ReleasesSpec,
    ReplaySpec,
    VenvSpec,
    WeightsSource,
    assembly_of,
    given,
)

__all__ = ["ANY_FAMILY", "LAUNCHER_KINDS", "WEIGHTS_KINDS", "CheckSpec", "DockerSpec", "EngineSpec", "EvidenceSpec",
           "ModelSpec", "ProcessSpec", "ReadinessStep", "ReleasesSpec", "Registry", "ReplaySpec", "VenvSpec",
           "WeightsSource", "assembly_of", "cache_dir", "data_root", "given", "load_engines", "load_models",
           "load_registry", "registry", "resolve_model"]


@attrs.frozen
class Registry:
    """The engine specs and the models of one data root, read and checked once (files and both together)."""

    root: Path
    engines: Mapping[str, EngineSpec]
    models: Mapping[str, ModelSpec]


def registry() -> Registry:
    """The registry of the data root in use (``$TOOLMATRIX_DATA``, the checkout, or the installed share), read on
    first use and then shared: a run read the spec files once per module that needed them, 26 times to collect the
    test suite. ``SpecErrors`` with every problem where the files are invalid (asked again, read again)."""
    return _registry_at(data_root())


@functools.cache
def _registry_at(root: Path) -> Registry:
    engines, models = load_registry(root)
    return Registry(root, MappingProxyType(engines), MappingProxyType(models))


def family_from_env() -> str:
    """The native format of a model outside the registry: $TOOLMATRIX_FAMILY, default hermes (ValueError if unknown)."""
    from toolmatrix.formats import get_family  # late: formats loads its own data file

    family = default_family()
    try:
        get_family(family)
    except KeyError as exc:
        raise ValueError(f"TOOLMATRIX_FAMILY: {exc.args[0]}") from None
    return family


def resolve_model(models: Mapping[str, ModelSpec], text: str) -> ModelSpec:
    """A registry id, or an explicit source ``KIND:REF`` whose format is $TOOLMATRIX_FAMILY (default hermes)."""
    if text in models:
        return models[text]
    return ModelSpec.from_source(text, family_from_env())


def load_engines(root: Path | None = None) -> dict[str, EngineSpec]:
    folder = (root or data_root()) / "engines"
    engines: dict[str, EngineSpec] = {}
    errors: list[SpecError] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "models.yaml":
            continue
        try:
            doc = read_yaml(path)
        except SpecErrors as exc:  # unreadable or binary: the other engine files are still checked
            errors += exc.errors
            continue
        problems = schema_errors(doc, "engine.schema.json", where_of=lambda p, d=doc: str(d.data.get("id", "")))
        errors += problems
        if not problems:
            spec = EngineSpec.from_dict(doc.data, path)
            if spec.id in engines:
                errors.append(doc.error(("id",), f"engine id {spec.id!r} also defined in {engines[spec.id].source}"))
            errors += _unknown_families(doc, spec)
            errors += [doc.error(path, f"unknown placeholder {{{name}}} (known here: {', '.join(sorted(known))})",
                                 spec.id) for path, name, known in unknown_placeholders(doc.data)]
            engines[spec.id] = spec
    if errors:
        raise SpecErrors(errors)
    return engines


def _unknown_families(doc: YamlDoc, spec: EngineSpec) -> list[SpecError]:
    from toolmatrix.formats import all_families  # late: formats loads its own data file

    known = {family.id for family in all_families()} | {ANY_FAMILY}
    fields = {("family_args",): spec.family_args, ("cannot_serve",): spec.cannot_serve,
              ("replay", "tool_parsers"): spec.replay_parsers, ("replay", "skip"): spec.replay_skip}
    return [
        doc.error((*path, family), f"unknown family {family!r}", spec.id)
        for path, mapping in fields.items()
        for family in mapping
        if family not in known
    ]


def load_models(root: Path | None = None) -> dict[str, ModelSpec]:
    folder = (root or data_root()) / "engines"
    doc = read_yaml(folder / "models.yaml")
    errors = schema_errors(doc, "models.schema.json", where_of=lambda p: str(p[1]) if len(p) > 1 else "")
    if errors:
        raise SpecErrors(errors)
    models = {mid: ModelSpec.from_dict(mid, data, folder / "templates") for mid, data in doc.data["models"].items()}
    from toolmatrix.formats import get_family  # late: formats loads its own data file

    for model in models.values():
        try:
            get_family(model.family)
        except KeyError:
            errors.append(doc.error(("models", model.id, "family"), f"unknown family {model.family!r}", model.id))
        for field in ("chat_template", "response_template"):
            path = getattr(model, field)
            if path and not path.is_file():
                errors.append(doc.error(("models", model.id, field), f"no such template {path}", model.id))
        if model.weights.get("hf", {}).get("from_gguf") and "gguf" not in model.weights:
            errors.append(doc.error(("models", model.id, "weights", "hf", "from_gguf"),
                                    "from_gguf needs the model's weights.gguf to convert", model.id))
    if errors:
        raise SpecErrors(errors)
    return models


def load_registry(root: Path | None = None) -> tuple[dict[str, EngineSpec], dict[str, ModelSpec]]:
    """Engine specs and models together, with the rules that span both files (all errors at once)."""
    problems: list[SpecError] = []
    loaded: dict[str, dict] = {}
    for name, load in (("engines", load_engines), ("models", load_models)):
        try:
            loaded[name] = load(root)
        except SpecErrors as exc:
            problems += exc.errors  # report both files' problems, not only the first file's
    if problems:
        raise SpecErrors(problems)
    engines, models = loaded["engines"], loaded["models"]
    problems = _cross_errors(read_yaml((root or data_root()) / "engines" / "models.yaml"), engines, models)
    if problems:
        raise SpecErrors(problems)
    return engines, models


def _cross_errors(doc: YamlDoc, engines: Mapping[str, EngineSpec], models: Mapping[str, ModelSpec]) -> list[SpecError]:
    """Per-engine model fields must name known engines (and bundled templates an engine that has them); a
    reasoning style must be one some engine knows."""
    styles = {style for engine in engines.values() for style in engine.reasoning_args}
    errors = []
    for model in models.values():
        for field in ("engine_templates", "tool_args", "engine_args"):
            errors += [
                doc.error(("models", model.id, field, engine_id), f"unknown engine {engine_id!r}", model.id)
                for engine_id in getattr(model, field)
                if engine_id not in engines
            ]
        errors += [
            doc.error(("models", model.id, "engine_templates", engine_id),
                      f"engine {engine_id!r} declares no bundled_templates folder in its image", model.id)
            for engine_id in model.engine_templates
            if engine_id in engines and not ((docker := engines[engine_id].docker) and docker.bundled_templates)
        ]
        if model.reasoning and model.reasoning not in styles:
            known = ", ".join(sorted(styles))
            message = f"no engine knows reasoning style {model.reasoning!r} (known: {known})"
            errors.append(doc.error(("models", model.id, "reasoning"), message, model.id))
    return errors

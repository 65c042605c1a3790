"""Engine specs (``engines/ENGINE.yaml``) and the model registry (``engines/models.yaml``), as frozen objects.

Everything that differs between engines or models is data here; code reads fields, it never asks which engine
it is talking to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

import attrs

from toolmatrix.specs import SpecError, SpecErrors, read_yaml, schema_errors


def data_root() -> Path:
    """Where cases/ and engines/ live: $TOOLMATRIX_DATA, the source checkout, or the installed share dir."""
    if os.environ.get("TOOLMATRIX_DATA"):
        return Path(os.environ["TOOLMATRIX_DATA"])
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "cases").is_dir() and (checkout / "engines").is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "toolmatrix"


def cache_dir() -> Path:
    return Path(os.environ.get("TOOLMATRIX_CACHE", Path.home() / ".cache" / "toolmatrix"))


@attrs.frozen
class EngineSpec:
    id: str
    title: str
    port: int
    readiness_path: str
    readiness_timeout_s: float
    api_prefix: str
    version_probe: Mapping[str, str] | None
    process: Mapping[str, Any] | None
    family_args: Mapping[str, tuple[str, ...]]
    weights_kind: str
    unsupported: Mapping[str, str]
    source: Path

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: Path) -> EngineSpec:
        return cls(
            id=data["id"],
            title=data["title"],
            port=data["port"],
            readiness_path=data["readiness"]["path"],
            readiness_timeout_s=data["readiness"].get("timeout_s", 300),
            api_prefix=data.get("api_prefix", "/v1"),
            version_probe=data.get("version_probe"),
            process=data.get("process"),
            family_args={k: tuple(v) for k, v in data.get("family_args", {}).items()},
            weights_kind=data.get("weights_kind", "hf"),
            unsupported=dict(data.get("unsupported", {})),
            source=source,
        )


@attrs.frozen
class ModelSpec:
    id: str
    title: str
    family: str
    served_name: str
    weights: Mapping[str, Mapping[str, str]]
    chat_template: Path | None
    prelude: tuple[dict, ...]
    request_defaults: Mapping[str, Any]

    @classmethod
    def from_dict(cls, model_id: str, data: Mapping[str, Any], templates: Path) -> ModelSpec:
        return cls(
            id=model_id,
            title=data["title"],
            family=data["family"],
            served_name=data.get("served_name", model_id),
            weights=data["weights"],
            chat_template=templates / data["chat_template"] if data.get("chat_template") else None,
            prelude=tuple(data.get("prelude", ())),
            request_defaults=dict(data.get("request_defaults", {})),
        )


def load_engines(root: Path | None = None) -> dict[str, EngineSpec]:
    folder = (root or data_root()) / "engines"
    engines: dict[str, EngineSpec] = {}
    errors: list[SpecError] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == "models.yaml":
            continue
        doc = read_yaml(path)
        problems = schema_errors(doc, "engine.schema.json", where_of=lambda p, d=doc: str(d.data.get("id", "")))
        errors += problems
        if not problems:
            spec = EngineSpec.from_dict(doc.data, path)
            if spec.id in engines:
                errors.append(doc.error(("id",), f"engine id {spec.id!r} also defined in {engines[spec.id].source}"))
            engines[spec.id] = spec
    if errors:
        raise SpecErrors(errors)
    return engines


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
        if model.chat_template and not model.chat_template.is_file():
            errors.append(doc.error(("models", model.id, "chat_template"), f"no such template {model.chat_template}", model.id))
    if errors:
        raise SpecErrors(errors)
    return models

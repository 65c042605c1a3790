"""llama.cpp: llama-server's own C++ output parsing, through the toolmatrix-chat-parse harness that
build-llama-server.sh compiles beside llama-server (same sdist, same CMake tree, linked against its server-context
library). The worker is standard library only and runs under the host's python; the "parser" of a family is the
chat template the server derives its parser from (engines/llamacpp.yaml ``replay``)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Mapping

import attrs

from toolmatrix.serving.registry import cache_dir, load_models

from .base import Adapter, Support

HARNESS = "toolmatrix-chat-parse"
TEMPLATES = "llama-templates"  # llama.cpp's models/templates/, copied beside the harness by the build


@functools.cache
def model_templates() -> dict[str, Path]:
    """Family -> the chat_template a registered model of that family names (the live tier passes it to
    llama-server with --chat-template-file); the first such model by id where several do."""
    found: dict[str, Path] = {}
    for model in sorted(load_models().values(), key=lambda m: m.id):
        if model.chat_template is not None and "llamacpp" not in model.engine_templates:
            found.setdefault(model.family, model.chat_template)
    return found


def harness_sha256() -> str:
    """The hash build-llama-server.sh records for the harness sources it builds (and rebuilds on when it differs)."""
    data = resources.files("toolmatrix.data")
    names = [*sorted(p.name for p in data.iterdir() if p.name.startswith("llamacpp-") and p.name.endswith(".cpp")),
             "llamacpp-chat-parse.cmake"]
    return hashlib.sha256(b"".join(data.joinpath(name).read_bytes() for name in names)).hexdigest()


@attrs.define
class LlamaCppAdapter(Adapter):
    """The spec's adapter over the harness the llama.cpp build makes: its own readiness, versions, template choice
    and install."""

    @property
    def bin_dir(self) -> Path:
        return cache_dir() / "bin"

    @property
    def harness(self) -> Path:
        return self.bin_dir / HARNESS

    @property
    def record(self) -> Path:
        return self.bin_dir / "llama-server.build.json"

    @property
    def python(self) -> Path:
        return Path(sys.executable)  # the worker needs only the standard library

    def ready(self) -> str | None:
        if self.at:
            return f"{self.name}: llama.cpp replays only at the version toolmatrix builds (llama-server.build.json)"
        if not (self.harness.is_file() and self.record.is_file() and (self.bin_dir / TEMPLATES).is_dir()):
            return f"llama.cpp's replay harness is not built ({self.harness}): toolmatrix install llamacpp"
        # A harness from other sources speaks another protocol (it ignored the request's chat_template_kwargs
        # before they were sent whole): it would replay without error, and wrong.
        if json.loads(self.record.read_text()).get("harness_sha256") != harness_sha256():
            return (f"llama.cpp's replay harness was built from other sources than these ({self.harness}): "
                    "toolmatrix install llamacpp")
        return None

    def versions(self) -> str:
        """What the harness was built from, one line each (run.json's versions, as pip freeze lines are)."""
        if not self.record.is_file():
            return ""
        record = json.loads(self.record.read_text())
        return "".join(f"{line}\n" for line in (
            f"llama.cpp=={record['version']}-{record['commit']}", record["package"],
            f"package_sha256={record['package_sha256']}", f"harness_sha256={record.get('harness_sha256')}"))

    def supports(self, family: str, reasoning_style: str | None) -> Support:
        template = model_templates().get(family)
        name = template.name if template is not None else self.spec.replay_parsers.get(family)
        if name is None:
            reason = (self.spec.replay_skip.get(family)
                      or f"no chat template for {family} in engines/llamacpp.yaml replay")
            return Support(None, None, f"llamacpp: {reason}")
        # One template parses calls and reasoning alike (as transformers' response templates do).
        return Support(name, name if reasoning_style else None)

    def env(self) -> Mapping[str, str]:
        folders = {path.parent for path in model_templates().values()} | {self.bin_dir / TEMPLATES}
        return {**os.environ, "TOOLMATRIX_LLAMACPP_HARNESS": str(self.harness),
                "TOOLMATRIX_LLAMACPP_TEMPLATES": os.pathsep.join(str(f) for f in sorted(folders))}

    def install(self) -> Path:
        """Build llama-server and the harness (build-llama-server.sh: reused when current, else built)."""
        from toolmatrix.serving.launchers.process import install_binary
        install_binary(self.spec)
        if self.ready() is not None:
            raise RuntimeError(self.ready())
        return self.harness

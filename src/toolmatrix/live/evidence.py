"""Evidence: the model's own words for a request, asked from the same engine, beside what its chat endpoint said.

Blame from the wire alone is a guess: an engine that drops an argument and a model that forgot it send the same
bytes. So, for an exchange whose blame is in question, the engine renders the chat request with its own template
(a *render protocol*), its raw completion endpoint completes that prompt at the request's sampling (a *completion
protocol*), and the family's reference parser reads the text. Which protocols an engine has is data: the
``evidence:`` section of its spec (``EvidenceSpec``); the protocols are small functions here, by name.

The render is also compared with the model's reference chat template, rendered with Hugging Face's own Jinja
function (transformers' ``render_jinja_template``): a difference is a template finding.

Nothing here guesses: an engine without a way to tell gets ``unavailable`` with the reason, and a chat request
the engine constrains (a grammar its completion endpoint is not told) gets ``not_comparable``.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from toolmatrix.base import jsontext
from toolmatrix.base.errors import ToolmatrixError
from toolmatrix.formats import Family
from toolmatrix.judge.blame import ModelWords
from toolmatrix.library.cases import Case
from toolmatrix.live.client import HttpClient, HTTPError
from toolmatrix.records import Evidence, EvidenceStatus, TemplateFinding
from toolmatrix.serving.registry import EvidenceSpec
from toolmatrix.wire.answer import Message

DIFF_CAP = 4_000
# The chat body's sampling fields that the raw completion repeats (max_completion_tokens is read as max_tokens).
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty",
            "repetition_penalty")


@attrs.frozen
class Rendered:
    text: str  # the prompt as text, for hashing and the template comparison
    prompt: str | list[int]  # what the completion protocol is sent (token ids where the engine gives them)


class EvidenceError(ToolmatrixError):
    """The engine did not answer a render or completion request as its protocol says."""


def _post(http: HttpClient, path: str, body: dict) -> Any:
    try:
        response = http.post(path, json=body)
    except HTTPError as exc:
        raise EvidenceError(f"POST {path}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise EvidenceError(f"POST {path}: HTTP {response.status_code}: {response.text[:200]}")
    try:
        return jsontext.loads(response.content)
    except jsontext.NotJSON as exc:
        raise EvidenceError(f"POST {path}: not JSON ({exc}): {response.text[:200]}") from None


def _field(answer: Any, *path: str | int) -> Any:
    value = answer
    for key in path:
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            raise EvidenceError(f"answer has no {'.'.join(map(str, path))}: {json.dumps(answer)[:200]}") from None
    return value


# -- render protocols: the chat body -> the prompt the engine built ----------------------------------------------


def _llamacpp_apply_template(http: HttpClient, body: dict) -> Rendered:
    """llama-server ``POST /apply-template``: the chat body through the same parsing as the chat endpoint."""
    prompt = _field(_post(http, "/apply-template", body), "prompt")
    if not isinstance(prompt, str):
        raise EvidenceError(f"/apply-template: prompt is not text: {prompt!r:.100}")
    return Rendered(prompt, prompt)


def _vllm_tokenize(http: HttpClient, body: dict) -> Rendered:
    """vLLM ``POST /tokenize`` with messages and tools (the chat template applied), then ``/detokenize``."""
    request = {"model": body.get("model"), "messages": body.get("messages"), "add_generation_prompt": True}
    if body.get("tools"):
        request["tools"] = body["tools"]
    tokens = _field(_post(http, "/tokenize", request), "tokens")
    text = _field(_post(http, "/detokenize", {"model": body.get("model"), "tokens": tokens}), "prompt")
    return Rendered(text, tokens)


RENDERERS: dict[str, Callable[[HttpClient, dict], Rendered]] = {
    "llamacpp_apply_template": _llamacpp_apply_template,
    "vllm_tokenize": _vllm_tokenize,
}


# -- completion protocols: a prompt -> the raw text --------------------------------------------------------------


def sampling(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat request's sampling, for the raw completion: the same text must come out at temperature 0."""
    out = {k: body[k] for k in SAMPLING if k in body}
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        out["max_tokens"] = limit
    return out


def _llamacpp_completion(http: HttpClient, model: str, prompt: str | list[int], options: dict) -> str:
    """llama-server ``POST /completion`` (``n_predict`` is its max_tokens)."""
    body = {k: v for k, v in options.items() if k != "max_tokens"}
    if "max_tokens" in options:
        body["n_predict"] = options["max_tokens"]
    return _text(_field(_post(http, "/completion", {"prompt": prompt, **body}), "content"))


def _openai_completions(http: HttpClient, model: str, prompt: str | list[int], options: dict) -> str:
    """``POST /v1/completions`` (vLLM, SGLang, ...): the prompt as text or token ids."""
    return _text(_field(_post(http, "/v1/completions", {"model": model, "prompt": prompt, **options}),
                        "choices", 0, "text"))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise EvidenceError(f"the raw completion is not text: {value!r:.100}")
    return value


COMPLETERS: dict[str, Callable[[HttpClient, str, str | list[int], dict], str]] = {
    "llamacpp_completion": _llamacpp_completion,
    "openai_completions": _openai_completions,
}


# -- same-generation protocols: the non-streamed chat answer itself -> the raw text and the prompt ---------------


def _llamacpp_verbose(http: HttpClient, answer: Any) -> tuple[str, str | None]:
    """llama-server's ``__verbose`` on a non-streamed answer (``"verbose": true`` in the request asks for it, no
    server flag and so no log noise): ``content`` is the text generated before the chat parser read it, under the
    answer's own grammar; ``prompt`` the prompt that was completed, special tokens written out."""
    verbose = _field(answer, "__verbose")
    return _text(_field(verbose, "content")), _text(_field(verbose, "prompt"))


def _vllm_token_ids(http: HttpClient, answer: Any) -> tuple[str, str | None]:
    """vLLM's ``return_token_ids``: this answer's generated and prompt token ids, read back as text by
    ``/detokenize`` (the tokenizer's decode, special tokens kept)."""
    model = answer.get("model") if isinstance(answer, dict) else None
    tokens = _field(answer, "choices", 0, "token_ids")
    raw = _field(_post(http, "/detokenize", {"model": model, "tokens": tokens}), "prompt")
    prompt_ids = answer.get("prompt_token_ids")
    prompt = _field(_post(http, "/detokenize", {"model": model, "tokens": prompt_ids}), "prompt") if prompt_ids else None
    return _text(raw), prompt if prompt is None else _text(prompt)


@attrs.frozen
class SameGeneration:
    fields: Mapping[str, Any]  # added to the non-streamed chat request (streams are sent as a user sends them)
    read: Callable[[HttpClient, Any], tuple[str, str | None]]  # its answer -> (raw text, the prompt or None)


SAME_GENERATION: dict[str, SameGeneration] = {
    "llamacpp_verbose": SameGeneration({"verbose": True}, _llamacpp_verbose),
    "vllm_token_ids": SameGeneration({"return_token_ids": True}, _vllm_token_ids),
}


def client_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as a client would send it: without the fields a same-generation protocol added for evidence."""
    added = {key: value for same in SAME_GENERATION.values() for key, value in same.fields.items()}
    return {key: value for key, value in body.items() if key not in added or added[key] != value}


# -- the reference render ------------------------------------------------------------------------------------------


class MissingDependency(ToolmatrixError):
    """A package that evidence needs is not installed: the run stops before it starts, never a quiet fallback."""


RENDERER_PACKAGES = ("transformers", "jinja2")  # transformers imports jinja2 only once a template is compiled


def require_renderer() -> None:
    """MissingDependency unless the reference render can run (checked without importing: ~1 s saved)."""
    missing = [name for name in RENDERER_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingDependency(f"evidence compares the engine's render with the model's reference chat template, "
                                f"which needs {' and '.join(missing)}: not installed; reinstall toolmatrix "
                                f"(pip install -e .) or run with --evidence off")


def reference_render(template: str, body: Mapping[str, Any], special_tokens: Mapping[str, str] | None = None) -> str:
    """The request rendered with the model's reference template by Hugging Face's own Jinja function, with the
    tokenizer's special tokens in its context as ``apply_chat_template`` puts them there."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner: none is needed
    logging.getLogger("transformers").setLevel(logging.ERROR)
    from transformers.utils.chat_template_utils import render_jinja_template  # ~1 s to import: only when used

    # transformers annotates a str; it returns (rendered, generation indices). The special tokens go to its
    # **kwargs (the template's context), which the checker matches against the named parameters too.
    rendered, _ = render_jinja_template(  # type: ignore[str-unpack]
        conversations=[list(body["messages"])], tools=body.get("tools") or None, chat_template=template,
        add_generation_prompt=True, **dict(special_tokens or {}))  # type: ignore[arg-type]
    return rendered[0]


def normalise_render(text: str, bos: str | None) -> str:
    """The documented normalisations before two renders are compared: a leading BOS token (engines add it when
    tokenizing, templates may write it) and trailing whitespace."""
    if bos and text.startswith(bos):
        text = text[len(bos):]
    return text.rstrip()


def compare_renders(engine_text: str, reference_text: str, reference: str, bos: str | None) -> TemplateFinding:
    ours, theirs = normalise_render(reference_text, bos), normalise_render(engine_text, bos)
    if ours == theirs:
        return TemplateFinding(reference, True)
    diff = "\n".join(difflib.unified_diff(ours.splitlines(), theirs.splitlines(), "reference template",
                                          "engine render", lineterm=""))
    return TemplateFinding(reference, False, diff[:DIFF_CAP])


# -- obtaining it ------------------------------------------------------------------------------------------------


def constraint(spec: EvidenceSpec, case: Case) -> str | None:
    """Why the chat request is constrained in a way the raw completion is not told, before asking; or None."""
    kind = case.tool_choice_kind
    if kind in ("required", "named") and kind in spec.constrained:
        return f"tool_choice {kind} is grammar-constrained by this engine; its completion endpoint is not told"
    if "strict" in spec.constrained and any(t.get("function", {}).get("strict") for t in case.tools):
        return "strict tool schemas are grammar-constrained by this engine; its completion endpoint is not told"
    return None


@attrs.frozen
class Witness:
    """Asks one engine for the model's own words (the engine's render, its raw completion, the parse)."""

    spec: EvidenceSpec
    http: HttpClient  # rooted at the server (no /v1)
    family: Family
    template: tuple[str, str] | None = None  # (where it came from, the reference template's text)
    special_tokens: Mapping[str, str] = attrs.field(factory=dict)  # what the template reads: bos_token, ...

    @property
    def request_fields(self) -> Mapping[str, Any]:
        """What the non-streamed chat request carries so that its answer tells the model's raw text."""
        same = SAME_GENERATION.get(self.spec.same_generation or "")
        return same.fields if same else {}

    def obtain(self, case: Case, body: dict, answer: Message | None, generated: Any = None) -> Evidence:
        """The model's own words for ``body`` (whose chat answer was ``answer``; ``generated``: the non-streamed
        answer's body, which a same-generation protocol reads). Never raises on what the engine says: a failed
        request is ``unavailable`` with the reason. Same generation first; else the render is asked (it is cheap,
        and compared with the reference template) and the raw completion, a whole generation, only where it could
        be compared with the chat answer (else ``not_comparable``)."""
        spec = self.spec
        chat = {k: v for k, v in body.items() if k != "stream" and k not in self.request_fields}
        missed = ""
        if spec.same_generation and generated is not None:
            try:
                return self._same_generation(case, chat, generated)
            except EvidenceError as exc:
                missed = f"the answer did not tell its own raw text ({spec.same_generation}: {exc}); "
        if spec.render is None or spec.complete is None:
            return Evidence(EvidenceStatus.UNAVAILABLE,
                            missed + (spec.unavailable or "no render or completion protocol"))
        found = self._regenerated(case, chat, answer)
        return attrs.evolve(found, reason=missed + found.reason) if missed else found

    def _same_generation(self, case: Case, chat: dict, generated: Any) -> Evidence:
        protocol = self.spec.same_generation
        assert protocol is not None  # obtain() reads the answer only where the spec names how
        raw, prompt = SAME_GENERATION[protocol].read(self.http, generated)
        if prompt is None:
            template, note, digest = None, "template not compared: the answer did not tell its prompt", None
        else:
            template, note = self._template(prompt, chat)
            digest = hashlib.sha256(prompt.encode()).hexdigest()
        return Evidence(EvidenceStatus.OBTAINED, note, self.spec.same_generation, digest,
                        raw, self._calls_in(raw, case), template, source="same_generation")

    def _regenerated(self, case: Case, chat: dict, answer: Message | None) -> Evidence:
        spec = self.spec
        render, complete = spec.render, spec.complete
        assert render is not None and complete is not None  # obtain() regenerates only where the spec has both
        method = f"{render} + {complete}"
        try:
            rendered = RENDERERS[render](self.http, chat)
        except EvidenceError as exc:
            return Evidence(EvidenceStatus.UNAVAILABLE, f"the engine did not tell: {exc}", method)
        template, note = self._template(rendered.text, chat)  # a render is cheap: compared in every case
        found = Evidence(EvidenceStatus.OBTAINED, note, method, hashlib.sha256(rendered.text.encode()).hexdigest(),
                         template=template, source="regenerated")
        why = constraint(spec, case)
        if why is None and "calls" in spec.constrained and answer is not None and (
                answer.tool_calls or any(o in (answer.content or "") for o in self.family.call_openers)):
            why = ("the chat answer holds a call, which this engine constrains with a grammar from its first "
                   "marker on; its completion endpoint is not told that grammar")
        if why:  # no raw completion: it would cost a whole generation and could not be compared
            return attrs.evolve(found, status=EvidenceStatus.NOT_COMPARABLE, reason=why)
        try:
            raw = COMPLETERS[complete](self.http, str(chat.get("model")), rendered.prompt,
                                            {**sampling(chat), **spec.completion_options})
        except EvidenceError as exc:
            return attrs.evolve(found, status=EvidenceStatus.UNAVAILABLE, reason=f"the engine did not tell: {exc}")
        found = attrs.evolve(found, raw_text=raw, calls=self._calls_in(raw, case))
        if "calls" in spec.constrained and any(o in raw for o in self.family.call_openers):
            why = ("this engine constrains a call with a grammar from its first marker on, which its completion "
                   "endpoint is not told; the raw text holds a call")
            return attrs.evolve(found, status=EvidenceStatus.NOT_COMPARABLE, reason=why)
        return found

    def _calls_in(self, raw: str, case: Case) -> list[dict]:
        """What the family's reference parser reads in the model's raw text (its reasoning split off first)."""
        parsed = ModelWords.read(raw, self.family, list(case.tools)).parsed
        return [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]

    def _template(self, engine_text: str, body: dict) -> tuple[TemplateFinding | None, str]:
        """The render beside the reference, or None and why it was not compared."""
        if self.template is None:
            return None, "template not compared: the model spec names no reference chat template"
        where, text = self.template
        try:
            reference = reference_render(text, body, self.special_tokens)
        except Exception as exc:  # noqa: BLE001 - any template error: the comparison is off, the evidence stands
            return None, f"template not compared: {where} did not render this request: {type(exc).__name__}: {exc}"
        return compare_renders(engine_text, reference, where, self.special_tokens.get("bos_token")), ""


def read_template(path: Path) -> tuple[str, str]:
    return path.name, path.read_text(encoding="utf-8")  # named, not located: records are published

"""Dynamo's tool-call and reasoning parsers, run where a Dynamo user meets them: in its own Rust OpenAI frontend.

Runs inside Dynamo's replay environment (``toolmatrix replay-install dynamo``): ai-dynamo-runtime installed without
its dependencies, no GPU, no engine. Dynamo's parsers (the ``dynamo-parsers`` crate inside ``dynamo._core``) have
no Python call that parses a string: they run in the frontend's postprocessor on the token stream of a worker whose
model was registered with ``ModelRuntimeConfig.tool_call_parser`` / ``reasoning_parser`` (what ``dynamo.vllm
--dyn-tool-call-parser/--dyn-reasoning-parser`` set, components/src/dynamo/vllm/main.py). So this process runs,
on one background event loop, what ``python -m dynamo.frontend`` runs (frontend/main.py: ``DistributedRuntime``,
``make_engine(EntrypointArgs(EngineType.Dynamic))``, ``run_input(runtime, "http")``) with the in-memory discovery
backend and the TCP request plane, plus a stand-in worker per (tool parser, reasoning parser, tokenizer):
``register_model(ModelInput.Tokens, ModelType.Chat, ...)`` with those parsers, then ``serve_endpoint`` with a
generator that yields the fixture's token ids, one ``{"token_ids": [...]}`` output per piece of the chunking (the
frontend detokenizes each and streams it as one step), the last with ``finish_reason`` as a real worker's last output
carries it (components/src/dynamo/vllm/handlers.py ``BaseWorkerHandler.generate_tokens``): the host's stop step, the
stop token's id, which the frontend hides (it is the stand-in model's ``eos_token_id``); the frontend's own end of
stream then runs as for a real worker. Each parse is an OpenAI chat completion over loopback HTTP, non-streamed and
streamed, answered by Dynamo's own frontend; the deltas are its SSE deltas as sent.
Differences from a served model, forced by having no model:
- the model folder holds the family's offline tokenizer (``tokenizer.json``, ``tokenizer_config.json``), a small
  ``config.json`` (``CONFIG``; Dynamo reads architectures, context length and end-of-sequence ids from it) and a
  neutral chat template (``TEMPLATE``): the prompt Dynamo renders is thrown away, the stand-in answers the fixture;
- a family with no offline tokenizer is encoded with ``$TOOLMATRIX_DYNAMO_TOKENIZER`` (Qwen3's, the adapter says
  so); pieces cut without token ids are encoded piece by piece, so a piece is always one frontend step;
- Dynamo's Harmony parsers load the o200k vocabulary (openai-harmony downloads it); without it they strip every
  Harmony answer to nothing ("harmony_encoding_unavailable"). It is rebuilt from gpt-oss's tokenizer.json into
  ``$TIKTOKEN_ENCODINGS_BASE`` at start, as LMDeploy's worker does (``_worker.harmony_vocabulary``).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import os
import runpy
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

# By path: this folder is not put on sys.path, where the host-side adapter file (dynamo.py) would shadow the
# engine's own ``dynamo`` package.
WORKER = runpy.run_path(os.path.join(os.path.dirname(__file__), "_worker.py"))
MODEL = "parser-replay"
TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant: "
CONFIG = {"architectures": ["ReplayStandIn"], "model_type": "replay", "max_position_embeddings": 1 << 20}
READY_S = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Frontend:
    """Dynamo's frontend and runtime on a background event loop, with one stand-in worker per parser set."""

    def __init__(self) -> None:
        harmony = os.environ.get("TOOLMATRIX_DYNAMO_HARMONY_TOKENIZER", "")
        if os.path.isfile(harmony):  # before any parser loads it (see the adapter's env)
            WORKER["harmony_vocabulary"](harmony, os.environ["TIKTOKEN_ENCODINGS_BASE"])
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        self.models: dict[tuple, str] = {}
        self.pieces: list[list[int]] = []  # what the stand-in yields next: one request at a time
        self.folder = tempfile.mkdtemp(prefix="dynamo-replay-")
        atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
        # Dynamo copies each registered model's files into $HOME/.cache/dynamo/mdc/by-slug/<name>/<hash>: two
        # replay processes registering the same stand-in name would write the same files at once, and a user's home
        # would keep every copy. Each process gets its own, removed with the folder.
        os.environ["HOME"] = self.folder
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.runtime = self._run(self._start())

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _start(self):
        from dynamo.llm import EngineType, EntrypointArgs, make_engine, run_input
        from dynamo.runtime import DistributedRuntime
        runtime = DistributedRuntime(self.loop, "mem", "tcp")
        engine = await make_engine(runtime, EntrypointArgs(EngineType.Dynamic, http_host="127.0.0.1",
                                                           http_port=self.port))
        asyncio.ensure_future(run_input(runtime, "http", engine))
        return runtime

    async def _generate(self, request, context=None):
        """A worker's responses: the last one holds the last step's ids, the host's stop token among them, and the
        finish_reason (dynamo.vllm's handlers.py ``generate_tokens``: ``finish_reason`` set on the output whose
        ``token_ids`` end the generation), not an empty response after it."""
        *body, last = self.pieces or [[]]  # no pieces: the readiness probe's empty answer
        for ids in body:
            yield {"token_ids": ids}
        yield {"token_ids": last, "finish_reason": "stop"}

    def model(self, tool: str | None, reasoning: str | None, tokenizer: str) -> str:
        """The served name of a stand-in registered with these parsers and this tokenizer (registered once)."""
        key = (tool, reasoning, tokenizer)
        if key not in self.models:
            name = f"{MODEL}-{len(self.models)}"
            self._run(self._register(name, tool, reasoning, self._model_dir(name, tokenizer)))
            self._wait_answering(name)
            self.models[key] = name
        return self.models[key]

    def _model_dir(self, name: str, tokenizer: str) -> str:
        folder = os.path.join(self.folder, name)
        os.makedirs(folder)
        source = os.path.dirname(tokenizer)
        for file in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.isfile(os.path.join(source, file)):
                os.symlink(os.path.join(source, file), os.path.join(folder, file))
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as handle:
            json.dump({**CONFIG, "eos_token_id": _eos_ids(tokenizer)}, handle)
        with open(os.path.join(folder, "template.jinja"), "w", encoding="utf-8") as handle:
            handle.write(TEMPLATE)
        return folder

    async def _register(self, name: str, tool: str | None, reasoning: str | None, folder: str) -> None:
        from dynamo.llm import ModelInput, ModelRuntimeConfig, ModelType, WorkerType, register_model
        config = ModelRuntimeConfig()
        config.tool_call_parser = tool
        config.reasoning_parser = reasoning
        endpoint = self.runtime.endpoint(f"replay.{name}.generate")
        await register_model(ModelInput.Tokens, ModelType.Chat, endpoint, folder, name,
                             worker_type=WorkerType.Aggregated, runtime_config=config,
                             custom_template_path=os.path.join(folder, "template.jinja"))
        asyncio.ensure_future(endpoint.serve_endpoint(self._generate))

    def _wait_answering(self, name: str) -> None:
        """Until the frontend lists the new stand-in, then answers an empty completion for it: being listed is not
        proof of being routed to its endpoint, and a fixture's first request must not be the one that finds out
        (polling the list first keeps the frontend's 404 error logs out of stderr)."""
        deadline = time.monotonic() + READY_S
        answer: object = "not listed"
        while time.monotonic() < deadline and not self._listed(name):
            time.sleep(0.05)
        while time.monotonic() < deadline:
            try:
                status, answer = self.chat(name, [], [], stream=False)
                if status == 200:
                    return
            except OSError as exc:  # the frontend's port not yet open, or the request timed out
                answer = exc
            time.sleep(0.05)
        raise RuntimeError(f"Dynamo's frontend did not answer for the stand-in model {name} within {READY_S:.0f} s: "
                           f"{str(answer)[:300]}")

    def _listed(self, name: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/models", timeout=5) as answer:
                return any(m.get("id") == name for m in json.load(answer).get("data", []))
        except OSError:
            return False

    def chat(self, name: str, pieces: list[list[int]], tools: list, stream: bool,
             template_kwargs: dict | None = None) -> tuple[int, object]:
        """POST one chat completion; (status, JSON answer) or, streamed, (status, the SSE events' JSON)."""
        self.pieces = pieces
        body: dict = {"model": name, "messages": [{"role": "user", "content": "replay"}], "stream": stream}
        if tools:  # the readiness probe has none: Dynamo 1.6 refuses an empty array (400), as OpenAI's API does
            body |= {"tools": tools, "tool_choice": "auto"}
        if template_kwargs:
            # Thinking as the fixture shows, under the family's own key, as a client asks it (the host's
            # chat_template_kwargs). Dynamo 1.3.0 reads the switch for its force-reasoning parsers: deepseek_r1
            # with no switch reads a whole answer without </think> as reasoning, calls and all (measured).
            body["chat_template_args"] = template_kwargs
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                         json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, raw = answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, {"error": exc.read().decode(errors="replace")[:500]}
        if not stream:
            return status, json.loads(raw)
        events = [line[len("data:"):].strip() for line in raw.splitlines() if line.startswith("data:")]
        return status, [json.loads(e) for e in events if e and e != "[DONE]"]


@functools.cache
def _tokenizer(path: str):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(path)


def _eos_ids(path: str) -> list[int]:
    """The end-of-sequence ids Dynamo stops on: the tokenizer config's eos token, where the vocabulary has it."""
    config = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    eos = None
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as handle:
            eos = json.load(handle).get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    token = _tokenizer(path).token_to_id(eos) if eos else None
    return [token] if token is not None else []


def tokenizer_of(req: dict) -> str:
    path = req.get("tokenizer") or os.environ.get("TOOLMATRIX_DYNAMO_TOKENIZER", "")
    if not os.path.isfile(path):
        raise RuntimeError(f"no tokenizer for {req.get('family')}: {path or '(none)'} (toolmatrix replay-install "
                           "tokenizers)")
    return path


def token_pieces(pieces: list, tokenizer: str) -> list[list[int]]:
    """One id list per piece: the feeder's real token ids where it has them, else the piece encoded alone (the
    stop step of a family with no tokenizer here: no ids, the finish alone)."""
    return [ids if ids is not None else _tokenizer(tokenizer).encode(text, add_special_tokens=False).ids
            for text, ids in pieces]


@functools.cache
def frontend() -> Frontend:
    return Frontend()


def _served(req: dict, pieces: list, stream: bool) -> tuple[int, object]:
    tokenizer = tokenizer_of(req)
    name = frontend().model(req.get("tool_parser"), req.get("reasoning_parser"), tokenizer)
    return frontend().chat(name, token_pieces(pieces, tokenizer), req["tools"], stream, req["chat_template_kwargs"])


def parse(req: dict) -> dict:
    status, answer = _served(req, [[req["text"], req.get("token_ids")]], stream=False)
    if status != 200 or "choices" not in answer:
        return {"error": str(answer.get("error", answer))[:500], "status": status}
    message = answer["choices"][0]["message"]
    calls = [{"id": c.get("id"), "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or []]
    return {"content": message.get("content"), "reasoning": message.get("reasoning_content"), "tool_calls": calls}


def stream(req: dict, pieces: list) -> list:
    status, events = _served(req, pieces, stream=True)
    if status != 200 or not isinstance(events, list):  # the frontend's own refusal (a 400 for a dotted tool name)
        raise WORKER["ServerAnswered"](status, f"HTTP {status}: {events}")
    deltas = []
    for event in events:
        if "choices" not in event:  # an error event in the stream ends it, as on the server
            raise RuntimeError(f"stream error event: {json.dumps(event)[:400]}")
        for choice in event["choices"]:
            # the role rides on every delta; the host's stream adds its own first role chunk
            delta = {k: v for k, v in choice.get("delta", {}).items() if k != "role" and v is not None}
            if delta:
                deltas.append(delta)
    return deltas


def hello() -> dict:
    from importlib.metadata import version
    return {"engine": "dynamo", "version": version("ai-dynamo-runtime"), "python": sys.version.split()[0]}


if __name__ == "__main__":
    sys.path.pop(0)  # the script's folder (see WORKER)
    WORKER["serve"](hello(), parse, stream)

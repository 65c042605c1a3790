"""A deterministic fake OpenAI-compatible server that can inject each engine fault of reference/bugs.md.

For testing the checks' edge cases and for measuring the harness itself against an instant server; never as
proof that toolmatrix works with a real engine. A ``Reply`` says what a correct engine would answer; each fault
in ``Reply.faults`` bends that answer the way some real engine was seen to.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import attrs

from toolmatrix.formats import get_family
from toolmatrix.judge.blame import ModelWords, split_reasoning
from toolmatrix.testing import fakesurfaces
from toolmatrix.testing.fakesurfaces import SURFACE_FAULTS

FAULTS = {
    "http_500": "answer HTTP 500 (crash on tools)",
    "http_400": "answer HTTP 400 to a valid request",
    "template_error": "answer HTTP 500 from the chat template (cannot render the conversation)",
    "accept_invalid": "answer 200 to an invalid tool_choice instead of 4xx",
    "hang": "never answer in time (timeout)",
    "args_object": "arguments as a JSON object instead of a string",
    "args_truncated": "arguments lose their closing brace (invalid JSON)",
    "length_cut": "max_tokens cut the last call: truncated arguments, honestly reported as finish_reason 'length'",
    "args_empty": "arguments '' for a parameterless call",
    "ids_missing": "tool calls without id",
    "ids_duplicate": "every tool call gets the same id",
    "finish_stop": "finish_reason 'stop' although calls are returned",
    "finish_tool_calls_no_call": "finish_reason 'tool_calls' with no call",
    "marker_residue": "a closing marker left in content next to the parsed calls",
    "unparsed": "calls left as native text in content, tool_calls empty",
    "call_in_reasoning": "calls left as native text in reasoning_content, tool_calls empty",
    "ascii_escape": "non-ASCII argument text escaped as \\uXXXX",
    "double_encode": "object/array argument values sent as JSON strings",
    "int_as_string": "integer argument values sent as strings",
    "extra_call": "one more call than the model made (parallel_tool_calls=false ignored)",
    "tool_calls_object": "non-stream tool_calls is an object, not a list",
    "stream_no_index": "streamed tool-call deltas without index",
    "stream_index_zero": "every streamed call uses index 0 (calls merged)",
    "stream_no_id": "first delta of a streamed call has no id",
    "stream_args_none": "streamed arguments null (name only)",
    "stream_no_finish": "no finish_reason in any chunk",
    "stream_diverge": "the stream carries other argument values than the non-stream answer",
    "stream_drop_call": "the stream loses every call after the first",
    "stream_name_repeated": "every streamed argument fragment carries the function name again",
    "think_in_content": "the model's reasoning, <think> tags and all, left at the start of content",
    "drop_argument": "every call loses its last argument",
    "drop_call": "every call after the first is lost",
    "rename_call": "call names keep the template's 'functions.' prefix",
    "retype_value": "string argument values come back as one-element arrays",
    "render_differs": "the engine's render of the prompt leaves the tools out (its own template, not the model's)",
    **SURFACE_FAULTS,
}


@attrs.frozen
class Reply:
    """What the fake 'model' answers: calls (name, arguments) and/or text, plus faults to inject."""

    calls: tuple[tuple[str, dict], ...] = ()
    content: str | None = None
    reasoning: str | None = None
    faults: frozenset[str] = frozenset()
    text: str | None = None  # the model's raw text, where it is the point (see ``model_wrote``)

    def __attrs_post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {sorted(FAULTS)}")


Responder = Callable[[dict], Reply]


def model_wrote(text: str) -> Reply:
    """The answer of a correct engine to a model that wrote ``text`` in the Hermes format: the reasoning block split
    off, the calls parsed from the rest; a call it cannot read leaves the text (less the reasoning) as content, as
    vLLM's and llama.cpp's Hermes parsers do. The raw completion gives ``text`` back unchanged."""
    family = get_family("hermes")
    words = ModelWords.read(text, family, [])
    if words.parsed.errors:
        rest = split_reasoning(text, family.reasoning_markers)[1]
        return Reply(content=rest.strip() or None, reasoning=words.reasoning, text=text)
    # No parse error: every call's arguments were read (a parser reports each one it could not read).
    calls = tuple((c.name, c.arguments) for c in words.parsed.calls if c.arguments is not None)
    return Reply(calls=calls, content=words.parsed.content or None, reasoning=words.reasoning, text=text)


THOUGHT = "The user wants an answer."


def hermes_text(calls: tuple[tuple[str, dict], ...]) -> str:
    """The calls as a model writes them: Hermes blocks, non-ASCII text in UTF-8 (a model writes no \\u escapes)."""
    return "\n".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a}, ensure_ascii=False)}\n</tool_call>'
                     for n, a in calls)


def _bend_arguments(args: dict, faults: frozenset[str]) -> dict:
    out = {}
    for key, value in args.items():
        if "double_encode" in faults and isinstance(value, (dict, list)):
            value = json.dumps(value)
        if "int_as_string" in faults and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if "retype_value" in faults and isinstance(value, str):
            value = [value]
        out[key] = value
    return out


def _tool_calls(reply: Reply, stream: bool) -> list[dict]:
    faults = reply.faults
    calls = list(reply.calls)
    if "extra_call" in faults and calls:
        calls.append(calls[-1])
    if "drop_call" in faults:
        calls = calls[:1]
    if "drop_argument" in faults:
        calls = [(name, dict(list(args.items())[:-1])) for name, args in calls]
    if "rename_call" in faults:
        calls = [(f"functions.{name}", args) for name, args in calls]
    if stream and "stream_drop_call" in faults:
        calls = calls[:1]
    out = []
    for number, (name, args) in enumerate(calls):
        args = _bend_arguments(args, faults)
        if stream and "stream_diverge" in faults:
            args = {k: (f"{v}-x" if isinstance(v, str) else v) for k, v in args.items()}
        text = json.dumps(args, ensure_ascii="ascii_escape" in faults)
        if "args_truncated" in faults or ("length_cut" in faults and number == len(calls) - 1):
            text = text[:-1]
        if "args_empty" in faults and not args:
            text = ""
        call: dict[str, Any] = {"id": f"call_{number}", "type": "function",
                                "function": {"name": name, "arguments": args if "args_object" in faults else text}}
        if "ids_duplicate" in faults:
            call["id"] = "call_same"
        if "ids_missing" in faults:
            del call["id"]
        out.append(call)
    return out


def _message_parts(reply: Reply, stream: bool) -> tuple[str | None, str | None, list[dict], str]:
    calls = _tool_calls(reply, stream)
    content, reasoning = reply.content, reply.reasoning
    if "unparsed" in reply.faults:
        content, calls = hermes_text(reply.calls), []
    if "call_in_reasoning" in reply.faults:
        reasoning, calls = hermes_text(reply.calls), []
    if "think_in_content" in reply.faults:
        content = f"<think>{THOUGHT}</think>" + (content or "")
    if "marker_residue" in reply.faults:
        content = (content or "") + "</tool_call>"
    finish = "tool_calls" if calls else "stop"
    if "finish_stop" in reply.faults:
        finish = "stop"
    if "finish_tool_calls_no_call" in reply.faults:
        finish = "tool_calls"
    if "length_cut" in reply.faults:
        finish = "length"
    return content, reasoning, calls, finish


def model_text(reply: Reply) -> str:
    """What the fake 'model' wrote before any engine touched it: its reasoning, its text, its calls in the Hermes
    format; a model cut by max_tokens (length_cut) wrote a truncated last call."""
    if reply.text is not None:
        return reply.text
    text = (f"<think>{THOUGHT}</think>" if "think_in_content" in reply.faults else "") + (reply.content or "")
    calls = hermes_text(reply.calls)
    if "length_cut" in reply.faults and calls:
        calls = calls[: calls.rindex("}")]
    return text + ("\n" if text and calls else "") + calls


def completion_body(reply: Reply) -> dict:
    content, reasoning, calls, finish = _message_parts(reply, stream=False)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls[0] if "tool_calls_object" in reply.faults else calls
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _call_deltas(number: int, call: dict, faults: frozenset[str]) -> list[dict]:
    index = 0 if "stream_index_zero" in faults else number
    first: dict[str, Any] = {"index": index, "id": call.get("id"), "type": "function",
                             "function": {"name": call["function"]["name"], "arguments": ""}}
    if "stream_no_id" in faults or "id" not in call:
        first.pop("id")
    arguments = call["function"]["arguments"]
    if "stream_args_none" in faults:
        pieces: list[Any] = [None]
    elif isinstance(arguments, str):
        pieces = [arguments[i:i + 7] for i in range(0, len(arguments), 7)] or [""]
    else:
        pieces = [arguments]
    again = {"name": call["function"]["name"]} if "stream_name_repeated" in faults else {}
    deltas = [first] + [{"index": index, "function": {**again, "arguments": p}} for p in pieces]
    if "stream_no_index" in faults:
        for delta in deltas:
            delta.pop("index")
    return deltas


def stream_chunks(reply: Reply) -> list[dict]:
    content, reasoning, calls, finish = _message_parts(reply, stream=True)
    chunks = [_chunk({"role": "assistant", "content": ""})]
    if reasoning:
        chunks.append(_chunk({"reasoning_content": reasoning}))
    if content:
        middle = len(content) // 2
        chunks += [_chunk({"content": content[:middle]}), _chunk({"content": content[middle:]})]
    for number, call in enumerate(calls):
        chunks += [_chunk({"tool_calls": [delta]}) for delta in _call_deltas(number, call, reply.faults)]
    chunks.append(_chunk({}, None if "stream_no_finish" in reply.faults else finish))
    return chunks


def _invalid_tool_choice(body: dict) -> bool:
    choice = body.get("tool_choice")
    if choice == "required":
        return not body.get("tools")  # no tool to call: unsatisfiable (OpenAI answers 400)
    if choice is None or choice in ("auto", "none"):
        return False
    if isinstance(choice, dict) and choice.get("type") == "function":
        offered = {t.get("function", {}).get("name") for t in body.get("tools", [])}
        return choice.get("function", {}).get("name") not in offered
    return True


class FakeServer:
    """``with FakeServer(responder) as server:`` then point a client at ``server.base_url``."""

    def __init__(self, responder: Responder, hang_s: float = 30.0, port: int = 0, template: str | None = None,
                 raw_responder: Responder | None = None):
        self.responder = responder
        self.raw_responder = raw_responder or responder  # the 'model' behind /apply-template and /completion
        self.hang_s = hang_s
        self.template = template  # the chat template its render uses (llama-server's /apply-template)
        self.requests: list[dict] = []
        self.raw_requests: list[dict] = []  # to /apply-template and /completion
        self._rendered: dict[str, dict] = {}  # prompt -> the chat body it was rendered from
        self.authorizations: list[str | None] = []
        self.peers: list[int] = []  # the client's port of each POST: how many connections the requests came on
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict, api: str = "chat") -> tuple[int, Any]:
        """(status, body or list of chunks) for one request over ``api``: the Responses and Messages requests are
        answered by the same chat core, their answers written in their own shapes (``fakesurfaces``)."""
        self.requests.append(body)
        chat = body if api == "chat" else fakesurfaces.to_chat(api, body)
        reply = self.responder(chat)
        if "hang" in reply.faults:
            time.sleep(self.hang_s)
        status, problem = self._refusal(chat, reply)
        if problem is not None:
            return status, {"error": {"message": problem, "code": status}} if api == "chat" else \
                fakesurfaces.error(api, status, problem, reply.faults)
        if api != "chat":
            stream = bool(body.get("stream"))
            return 200, fakesurfaces.answer(api, *_message_parts(reply, stream), reply.faults, stream)
        if body.get("stream"):
            return 200, stream_chunks(reply)
        return 200, self._same_generation(body, completion_body(reply))

    @staticmethod
    def _refusal(body: dict, reply: Reply) -> tuple[int, str | None]:
        """The error status and message the engine answers instead, or (200, None)."""
        if "http_500" in reply.faults:
            return 500, "Internal server error: failed to parse tool call"
        if "template_error" in reply.faults:
            return 500, "TemplateError: This model only supports single tool-calls at once!"
        if _invalid_tool_choice(body) and "accept_invalid" not in reply.faults:
            return 400, f"invalid tool_choice {body.get('tool_choice')!r}"
        if "http_400" in reply.faults:
            return 400, "unsupported request"
        return 200, None

    def _same_generation(self, body: dict, answer: dict) -> dict:
        """What the engine's answer tells of its own generation when asked: llama-server's ``__verbose`` (raw
        text and prompt), vLLM's ``return_token_ids`` (token ids; here a character's code point is its id)."""
        if not (body.get("verbose") or body.get("return_token_ids")):
            return answer
        chat = {k: v for k, v in body.items() if k not in ("verbose", "return_token_ids")}
        text, prompt = model_text(self.raw_responder(chat)), self._prompt(chat)
        if body.get("verbose"):
            return {**answer, "__verbose": {"content": text, "prompt": prompt, "stop": True}}
        choice = {**answer["choices"][0], "token_ids": [ord(c) for c in text]}
        return {**answer, "choices": [choice], "prompt_token_ids": [ord(c) for c in prompt]}

    def _prompt(self, body: dict) -> str:
        """The prompt this engine builds: rendered with ``template`` (the tools left out under render_differs)."""
        from toolmatrix.live.evidence import reference_render

        faults = self.raw_responder(body).faults
        shown = {k: v for k, v in body.items() if k != "tools"} if "render_differs" in faults else body
        return reference_render(self.template, shown) if self.template else json.dumps(shown["messages"])

    def render(self, body: dict) -> dict:
        """``/apply-template``: the prompt this engine builds for a chat body."""
        self.raw_requests.append(body)
        prompt = self._prompt(body)
        self._rendered[prompt] = body
        return {"prompt": prompt}

    def complete(self, body: dict) -> tuple[int, dict]:
        """``/completion``: what the 'model' wrote for a prompt this server rendered."""
        self.raw_requests.append(body)
        prompt = body.get("prompt")
        chat = self._rendered.get(prompt) if isinstance(prompt, str) else None  # token ids: not one rendered here
        if chat is None:
            return 400, {"error": {"message": "unknown prompt: render it with /apply-template first"}}
        return 200, {"content": model_text(self.raw_responder(chat)), "stop": True}

    # vLLM's protocols: a prompt's tokens are its characters' code points here (a tokenizer that round-trips).

    def tokenize(self, body: dict) -> dict:
        """``/tokenize`` with messages: the chat template applied, as token ids."""
        return {"tokens": [ord(c) for c in self.render(body)["prompt"]]}

    def detokenize(self, body: dict) -> dict:
        return {"prompt": "".join(map(chr, body.get("tokens") or []))}

    def completions(self, body: dict) -> tuple[int, dict]:
        """``/v1/completions`` with token ids: what the 'model' wrote for a prompt this server rendered."""
        prompt = body.get("prompt")
        status, answer = self.complete({**body, "prompt": "".join(map(chr, prompt)) if isinstance(prompt, list) else prompt})
        if status != 200:
            return status, answer
        return 200, {"object": "text_completion", "choices": [{"index": 0, "text": answer["content"],
                                                               "finish_reason": "stop"}]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode(), "application/json")
                else:
                    self._send(200, b'{"status":"ok"}', "application/json")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                fake.authorizations.append(self.headers.get("Authorization"))
                fake.peers.append(self.client_address[1])
                if self.path == "/apply-template":
                    status, answer = 200, fake.render(body)
                elif self.path == "/completion":
                    status, answer = fake.complete(body)
                elif self.path == "/tokenize":
                    status, answer = 200, fake.tokenize(body)
                elif self.path == "/detokenize":
                    status, answer = 200, fake.detokenize(body)
                elif self.path == "/v1/completions":
                    status, answer = fake.completions(body)
                elif self.path in ("/v1/responses", "/v1/messages"):
                    status, answer = fake.answer(body, self.path.rsplit("/", 1)[1])
                else:
                    status, answer = fake.answer(body)
                if status == 200 and body.get("stream") and self.path.endswith("/chat/completions"):
                    events = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in answer) + "data: [DONE]\n\n"
                    self._send(200, events.encode(), "text/event-stream")
                elif status == 200 and body.get("stream"):  # named events, no [DONE]: as the two APIs write them
                    events = "".join(f"event: {c['type']}\ndata: {json.dumps(c, ensure_ascii=False)}\n\n" for c in answer)
                    self._send(200, events.encode(), "text/event-stream")
                else:
                    self._send(status, json.dumps(answer, ensure_ascii=False).encode(), "application/json")

        return Handler


def first_tool(body: dict) -> Reply:
    """A fixed 'model': it calls the first offered tool with no arguments, or greets when no tool is offered."""
    tools = body.get("tools") or []
    return Reply(calls=((tools[0]["function"]["name"], {}),)) if tools else Reply(content="Hello!")


DIED = 3  # the exit status of --die-after
PROG = "python -m toolmatrix.testing.fake"


def main(argv: list[str] | None = None, prog: str = PROG) -> None:
    """``python -m toolmatrix.testing.fake --port N``: the fake as a process, answering like ``first_tool``.

    It can stand in for an engine binary (``TOOLMATRIX_LLAMACPP_BIN`` pointing at a script that runs it): the
    arguments it does not know, such as llama-server's, are ignored. ``--die-after N`` exits on the chat request
    after the Nth without answering it, as an engine that crashes mid-run; ``--die-by SIGILL`` makes that death
    a signal's, as a crash is. ``prog``: the command as it was started (``python -m toolmatrix.fake`` too), for
    ``--help``.
    """
    parser = argparse.ArgumentParser(
        prog=prog, allow_abbrev=False,
        description="A fake OpenAI-compatible engine for testing toolmatrix itself, never a proof that it works with "
                    "a real engine: it calls the first offered tool with no arguments (or greets where none is "
                    "offered), and ignores the arguments it does not know, such as llama-server's, so that a script "
                    "can stand it in for an engine binary.")
    parser.add_argument("--port", type=int, default=0, metavar="N",
                        help="the port to listen on at 127.0.0.1 (default 0: a free one; the address is printed on "
                             "stderr)")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS",
                        help="seconds to wait before each chat answer (default 0)")
    parser.add_argument("--die-after", type=int, metavar="N", help=f"exit with status {DIED} on chat request N+1")
    parser.add_argument("--die-by", metavar="SIGNAL", help="die on that request killed by this signal instead")
    args, _ = parser.parse_known_args(argv)
    answered = itertools.count(1)

    def responder(body: dict) -> Reply:
        if args.die_after is not None and next(answered) > args.die_after:
            print(f"fake engine: dying after {args.die_after} chat requests", file=sys.stderr, flush=True)
            # An answer given just before, still being written by its own thread, reaches its client first: the
            # run must see exactly N answers. Then at once, from this handler thread, as in a crash.
            time.sleep(0.5)
            if args.die_by:  # the signals a crash sends keep their default action in Python: death
                signal.raise_signal(signal.Signals[args.die_by])  # delivered before it returns
            os._exit(DIED)
        time.sleep(args.delay)
        return first_tool(body)

    # Only chat requests count towards --die-after: evidence requests (render, raw completion) do not.
    with FakeServer(responder, port=args.port, raw_responder=first_tool) as server:
        print(f"fake engine listening at {server.base_url}", file=sys.stderr, flush=True)
        server._thread.join()


if __name__ == "__main__":
    main()

# mlx_lm.server's own request handler, text state machine and tool parser, with the text below standing in for
# the model (mlx-lm has no parser flag: the server infers the tool parser and thinking markers from the model's
# tokenizer; TOOL_PARSER is what it infers for this family, set in the tokenizer config here). A POST of
# /v1/chat/completions goes through APIHandler on an in-memory connection; the stand-in generator yields the
# text's tokens as the server's batch loop does (per token, stop tokens ending it, then an end of turn). Needs
# only the mlx-lm package (and mlx); TOKENIZER is the model's Hugging Face repo, of which only the tokenizer files
# are fetched (offline: that repo's tokenizer.json and tokenizer_config.json in the Hugging Face cache, HF_HUB_OFFLINE=1).
# Run: python THIS_FILE
import io
import json
import sys
from pathlib import Path

from huggingface_hub import snapshot_download
from mlx_lm import server
from mlx_lm.utils import load_tokenizer

folder = snapshot_download(TOKENIZER, allow_patterns=["tokenizer.json", "tokenizer_config.json"])
caught, serve, argv = [], server.run, sys.argv  # the server's own main() builds its ModelProvider; run is caught
server.run, sys.argv = (lambda host, port, provider: caught.append(provider)), ["mlx_lm.server", "--model", folder]
try:
    server.main()
finally:
    server.run, sys.argv = serve, argv
provider = caught[0]
provider.tokenizer = load_tokenizer(Path(folder), {**provider._tokenizer_config, "tool_parser_type": TOOL_PARSER})
provider.model_key = (folder, None, None)


class Generator(server.ResponseGenerator):
    """The model's place: what the server does before its token loop, then the given tokens."""

    def __init__(self, pieces):
        self.model_provider, self._state_machine_cache, self._is_distributed = provider, {}, False
        self.pieces = pieces

    def generate(self, request, generation_args, progress_callback=None):
        tokenizer = self.model_provider.tokenizer
        prompt, _, _, initial_state, _ = self._tokenize(tokenizer, request, generation_args)
        stops, text_sm = self._make_state_machine(self.model_provider.model_key, tokenizer, generation_args.stop_words)
        ctx = server.GenerationContext(has_tool_calling=tokenizer.has_tool_calling, has_thinking=tokenizer.has_thinking,
                                       tool_parser=tokenizer.tool_parser, text_sm=text_sm,
                                       initial_state=initial_state, prompt=prompt)
        return ctx, self.responses(tokenizer, stops.matcher())

    def responses(self, tokenizer, stop):
        detokenizer = tokenizer.detokenizer
        for ids in filter(None, self.pieces):
            for token in ids:
                if stop.advance(token):
                    detokenizer.finalize()
                    yield server.Response(detokenizer.last_segment, token, 0.0, "stop", ())
                    return
                detokenizer.add_token(token)
            yield server.Response(detokenizer.last_segment, ids[-1], 0.0, None, ())
        detokenizer.finalize()
        yield server.Response(detokenizer.last_segment, min(tokenizer.eos_token_ids), 0.0, "stop", ())


class Connection:
    def __init__(self, request):
        self.request, self.sent = request, bytearray()

    def makefile(self, mode, *args, **kwargs):
        return io.BytesIO(self.request)

    def sendall(self, data):
        self.sent += data


def post(pieces, stream):
    body = json.dumps({"model": "default_model", "messages": [{"role": "user", "content": "repro"}],
                       "tools": TOOLS or None, "stream": stream}).encode()
    connection = Connection(b"POST /v1/chat/completions HTTP/1.1\r\nHost: repro\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(body) + body)
    server.APIHandler(Generator(pieces), connection, ("127.0.0.1", 0), None, system_fingerprint="repro")
    head, _, answer = bytes(connection.sent).partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), answer.decode()


def encode(text):
    return list(provider.tokenizer.encode(text, add_special_tokens=False))


# Non-streamed: token by token, as the server generates
status, answer = post([[token] for token in TOKEN_IDS or encode(TEXT)], stream=False)
print("non-streamed message:", json.dumps(json.loads(answer)["choices"][0]["message"], ensure_ascii=False)
      if status.endswith(" 200 OK") else f"{status} {answer}")

# Streamed, one generation step per piece
if PIECES is not None:
    print("streamed deltas:")
    status, answer = post([ids if ids is not None else encode(text) for text, ids in PIECES], stream=True)
    for event in answer.split("\n\n"):
        if event.startswith("data: ") and event != "data: [DONE]":
            print(json.dumps(json.loads(event[len("data: "):])["choices"][0]["delta"], ensure_ascii=False))

"""What vLLM's server sets skip_special_tokens to for a chat request with tools and tool_choice auto: the request
as the replay worker builds it, then the parser's adjust_request (renderers/online_renderer.py:840-875 at 0.33.0
calls it when a reasoning parser is set or tool_choice is not none), then the sampling params the engine gets
(chat_completion/protocol.py:762-765: 0.33.0 leaves the field None unless set, and a None takes the model's
generation_config.json default, True without one, as here), for each (tool parser, reasoning parser, tokenizer)."""
import json
import os
import runpy
import sys

worker = runpy.run_path(os.path.join(os.environ["WORKERS"], "vllm_worker.py"), run_name="worker")
tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
out = []
for tool, reasoning, tokenizer, family in json.loads(sys.stdin.read()):
    req = {"tool_parser": tool, "reasoning_parser": reasoning, "tokenizer": tokenizer, "family": family,
           "tools": tools, "chat_template_kwargs": {}}
    if worker["refuses"](req):
        out.append(None)  # the server would not start with this parser and tokenizer
        continue
    request = worker["_request"](req)
    adjusted = worker["_parser"](req, request).adjust_request(request)
    out.append(adjusted.to_sampling_params(16, {}).skip_special_tokens)  # {}: no generation_config.json defaults
print(json.dumps(out))

"""What vLLM's server sets skip_special_tokens to for a chat request with tools and tool_choice auto: the request
as the replay worker builds it, then the parser's adjust_request (renderers/online_renderer.py:833-854 calls it
when a reasoning parser is set or tool_choice is not none), for each (tool parser, reasoning parser, tokenizer)."""
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
    out.append(worker["_parser"](req, request).adjust_request(request).skip_special_tokens)
print(json.dumps(out))

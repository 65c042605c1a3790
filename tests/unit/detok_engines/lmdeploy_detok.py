"""LMDeploy's own incremental detokenizer, as serve/core/async_engine.py drives it: seeded with the whole prompt
(DetokenizeState(len(input_ids))), each engine output appended to the ids with the stop token cut off
(:444-447), then Tokenizer.detokenize_incrementally over all of them. The worker's shim keeps torch out;
lmdeploy.archs (which imports torch) is replaced by a stand-in that reports no model config: its only use here is
HuggingFaceTokenizer's transformers-version warning."""
import json
import os
import runpy
import sys
import types

runpy.run_path(os.path.join(os.environ["WORKERS"], "lmdeploy_worker.py"), run_name="worker")["install_shim"]()
sys.modules["lmdeploy.archs"] = types.SimpleNamespace(get_model_arch=lambda path: (None, None))
from lmdeploy.tokenizer import DetokenizeState, Tokenizer  # noqa: E402 - after the worker's shim (no torch here)

job = json.loads(sys.stdin.read())
tokenizer = Tokenizer(os.path.dirname(job["tokenizer"]))
out = []
for run in job["runs"]:
    ids, state, texts = list(run["prompt"]), DetokenizeState(len(run["prompt"])), []
    for n, step in enumerate(run["steps"]):
        hit_stop = n == len(run["steps"]) - 1 and run["stop"]
        ids += step[:len(step) - hit_stop]
        response, state = tokenizer.detokenize_incrementally(ids, state, skip_special_tokens=run["skip"])
        texts.append(response)
    out.append(texts)
print(json.dumps(out))

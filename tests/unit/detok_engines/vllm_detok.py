"""vLLM's own incremental detokenizer (v1/engine/detokenizer.py), as its output processor drives it: built from an
EngineCoreRequest with the prompt's ids and the request's skip_special_tokens (FastIncrementalDetokenizer:
DecodeStream primed with the whole prompt), then per engine step update(new ids, stop_terminated) and
get_next_output_text(finished, delta=True). The tokenizer is loaded by vLLM's get_tokenizer, as its server does."""
import json
import os
import sys

from vllm.sampling_params import SamplingParams
from vllm.tokenizers import get_tokenizer
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.engine.detokenizer import IncrementalDetokenizer

job = json.loads(sys.stdin.read())
tokenizer = get_tokenizer(os.path.dirname(job["tokenizer"]))
out = []
for run in job["runs"]:
    request = EngineCoreRequest(request_id="r", prompt_token_ids=run["prompt"], mm_features=None,
                                sampling_params=SamplingParams(skip_special_tokens=run["skip"]), pooling_params=None,
                                arrival_time=0.0, lora_request=None, cache_salt=None, data_parallel_rank=None)
    detokenizer = IncrementalDetokenizer.from_new_request(tokenizer, request)
    texts = []
    for n, step in enumerate(run["steps"]):
        last = n == len(run["steps"]) - 1
        detokenizer.update(list(step), stop_terminated=last and run["stop"])
        texts.append(detokenizer.get_next_output_text(last, delta=True))
    out.append(texts)
print(json.dumps(out))

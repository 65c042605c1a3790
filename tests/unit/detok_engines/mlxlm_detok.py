"""MLX-LM's own streaming detokenizer, as server.py drives it: one add_token per generated token, the stop token
not decoded (finalize instead), the step's text its last_segment."""
import json
import sys
from pathlib import Path

from mlx_lm.utils import load_tokenizer

job = json.loads(sys.stdin.read())
tokenizer = load_tokenizer(Path(job["tokenizer"]).parent)
out = []
for run in job["runs"]:
    detokenizer, texts = tokenizer.detokenizer, []
    detokenizer.reset()
    for n, step in enumerate(run["steps"]):
        for m, token in enumerate(step):
            if run["stop"] and n == len(run["steps"]) - 1 and m == len(step) - 1:
                detokenizer.finalize()
            else:
                detokenizer.add_token(token)
        if n == len(run["steps"]) - 1:
            detokenizer.finalize()
        texts.append(detokenizer.last_segment)
    out.append(texts)
print(json.dumps(out))

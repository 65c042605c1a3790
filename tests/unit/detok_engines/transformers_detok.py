"""transformers serve's own DirectStreamer (cli/serving/utils.py), as model.generate() drives it: the prompt's put
first (passed over), then one put per step with that step's ids; a response parser stand-in records the text the
real parser would be fed (with a parser, specials are kept and the EOS token is decoded like any other)."""
import json
import sys

import torch
from transformers import PreTrainedTokenizerFast
from transformers.cli.serving.utils import DirectStreamer


class Loop:
    def call_soon_threadsafe(self, function, item):
        function(item)


class Recorder:
    initial_events = ()

    def __init__(self):
        self.texts = []

    def feed(self, text):
        self.texts[-1] += text
        return []


job = json.loads(sys.stdin.read())
tokenizer = PreTrainedTokenizerFast(tokenizer_file=job["tokenizer"])._tokenizer
out = []
for run in job["runs"]:
    parser = Recorder()
    streamer = DirectStreamer(tokenizer, Loop(), type("Queue", (), {"put_nowait": lambda self, item: None})(),
                              parser)
    streamer.put(torch.tensor(run["prompt"]))
    for step in run["steps"]:
        parser.texts.append("")
        streamer.put(torch.tensor(step))
    out.append(parser.texts)
print(json.dumps(out))

"""SGLang's own detokenizer steps, as its DetokenizerManager runs them (srt/managers/detokenizer_manager.py):
DecodeStatus and the manager's _decode_batch_token_id_output, trim_matched_stop, _grouped_batch_decode and
_clamp_decode_ids, compiled alone from the installed file (the module imports torch and zmq) onto a stand-in
manager. Each step is one BatchTokenIDOutput: the first carries the prompt's last 5 ids before the output's
(schedule_batch.py: surr_offset = read_offset - 5), the last the finish reason (the stop token matched, or a length
stop). The tokenizer is the tokenizer.json through PreTrainedTokenizerFast: SGLang's own get_tokenizer imports
torch."""
import ast
import collections
import dataclasses
import json
import os
import runpy
import sys
import typing

runpy.run_path(os.path.join(os.environ["WORKERS"], "sglang_worker.py"), run_name="worker")["install_shim"]()
import sglang  # noqa: E402 - after the worker's shim (no torch here)
from sglang.srt.parser.response_template import tool_close_token_ids  # noqa: E402
from sglang.utils import find_printable_text  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

PATH = os.path.join(sglang.__path__[0], "srt/managers/detokenizer_manager.py")
METHODS = {"_decode_batch_token_id_output", "trim_matched_stop", "_grouped_batch_decode", "_clamp_decode_ids"}
tree = ast.parse(open(PATH, encoding="utf-8").read(), PATH)
status = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DecodeStatus")
manager = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DetokenizerManager")
manager.body = [n for n in manager.body if isinstance(n, ast.FunctionDef) and n.name in METHODS]
manager.bases = []
future = ast.parse("from __future__ import annotations").body  # the annotations name the server's types
namespace = {**vars(typing), "dataclasses": dataclasses, "defaultdict": collections.defaultdict,
             "find_printable_text": find_printable_text, "DETOKENIZER_MAX_STATES": 1 << 16}
exec(compile(ast.Module(body=[*future, status, manager], type_ignores=[]), PATH, "exec"), namespace)  # noqa: S102

job = json.loads(sys.stdin.read())
tokenizer = PreTrainedTokenizerFast(tokenizer_file=job["tokenizer"])
out = []
for run in job["runs"]:
    self = namespace["DetokenizerManager"].__new__(namespace["DetokenizerManager"])
    self.tokenizer, self.decode_status, self.vocab_size = tokenizer, {}, len(tokenizer)
    self.disable_tokenizer_batch_decode = False
    self.is_tool_call_parser_gpt_oss = run["tool_parser"] == "gpt-oss"
    self.tool_close_token_ids = tool_close_token_ids(run["tool_parser"], tokenizer)
    prime, texts = run["prompt"][-5:], []
    for n, step in enumerate(run["steps"]):
        finished = None
        if n == len(run["steps"]) - 1:
            finished = {"type": "stop", "matched": step[-1]} if run["stop"] else {"type": "length"}
        recv = type("BatchTokenIDOutput", (), {
            "rids": ["r"], "decoded_texts": [""], "decode_ids": [prime + step if n == 0 else step],
            "read_offsets": [len(prime)], "finished_reasons": [finished], "no_stop_trim": [False],
            "skip_special_tokens": [run["skip"]], "spaces_between_special_tokens": [True]})
        texts.append(self._decode_batch_token_id_output(recv)[0])
    out.append(texts)
print(json.dumps(out))

"""Convert a GGUF into a Hugging Face folder that vLLM and transformers can load (run by the engine's Python).

    usage: gguf-to-hf.py [--tokenizer-only] MODEL.gguf OUT_DIR [CHAT_TEMPLATE_FILE [RESPONSE_TEMPLATE_JSON]]

transformers dequantizes the GGUF to fp32 on load; save_pretrained refuses a model that still looks quantized,
so the quantizer fields are cleared first. The chat template goes into the folder because GGUFs of base models
carry none and transformers serve reads it from there; so does the response template, transformers serve's
declarative parser of the model's output (without one it returns tool calls as plain text).
--tokenizer-only writes the tokenizer alone (parser replay needs no weights: seconds, not a 2 GB fp32 model).
"""

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer_only = sys.argv[1:2] == ["--tokenizer-only"]
argv = sys.argv[2:] if tokenizer_only else sys.argv[1:]
gguf, out = Path(argv[0]), Path(argv[1])
template = Path(argv[2]) if len(argv) > 2 and argv[2] else None
response = Path(argv[3]) if len(argv) > 3 and argv[3] else None
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
if not tokenizer_only:
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
if template is not None:
    tokenizer.chat_template = template.read_text()
if response is not None:
    tokenizer.response_template = json.loads(response.read_text())
tokenizer.save_pretrained(out)
print(f"wrote {out}")

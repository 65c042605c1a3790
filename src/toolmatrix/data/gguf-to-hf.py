"""Convert a GGUF into a Hugging Face folder that vLLM and transformers can load (run by the engine's Python).

    usage: gguf-to-hf.py MODEL.gguf OUT_DIR [CHAT_TEMPLATE_FILE [RESPONSE_TEMPLATE_JSON]]

transformers dequantizes the GGUF to fp32 on load; save_pretrained refuses a model that still looks quantized,
so the quantizer fields are cleared first. The chat template goes into the folder because GGUFs of base models
carry none and transformers serve reads it from there; so does the response template, transformers serve's
declarative parser of the model's output (without one it returns tool calls as plain text).
"""

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out = Path(sys.argv[1]), Path(sys.argv[2])
template = Path(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
response = Path(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
if template is not None:
    tokenizer.chat_template = template.read_text()
if response is not None:
    tokenizer.response_template = json.loads(response.read_text())
model.save_pretrained(out)
tokenizer.save_pretrained(out)
print(f"wrote {out}")

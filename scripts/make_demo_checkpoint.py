"""Build the bundled demo checkpoint: a tiny Qwen3 model (random weights, seed 0) with the real Qwen3 tokenizer.

Deterministic and offline: the same torch/transformers versions give byte-identical files. The weights are random,
so the model talks nonsense; what matters is that every stage runs on a real architecture, a real tokenizer and a
real chat template. Output: examples/demo-qwen3/ (git-ignored; ~40 MB float32).

    .venv/bin/python scripts/make_demo_checkpoint.py [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOKENIZER = REPO / "examples" / "tokenizer-qwen3"
DEFAULT_OUT = REPO / "examples" / "demo-qwen3"

# Shrunk from Qwen/Qwen3-1.7B (real values in comments). head_dim 32 is the smallest vLLM's CPU build serves.
CONFIG = dict(
    hidden_size=64,  # 2048
    num_hidden_layers=2,  # 28
    num_attention_heads=4,  # 16
    num_key_value_heads=2,  # 8
    head_dim=32,  # 128
    intermediate_size=128,  # 6144
    vocab_size=151936,  # 151936: the real vocabulary, so the real tokenizer fits
    max_position_embeddings=4096,  # 40960
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    bos_token_id=151643,
    eos_token_id=151645,
    pad_token_id=151643,
)


def build(out: Path, force: bool = False) -> Path:
    if out.exists() and (out / "model.safetensors").exists() and not force:
        print(f"demo checkpoint already at {out} (use --force to rebuild)", file=sys.stderr)
        return out
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    config = Qwen3Config(**CONFIG)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for f in TOKENIZER.iterdir():
        if f.name != "PROVENANCE.md":
            shutil.copy2(f, tmp / f.name)
    (tmp / "generation_config.json").write_text(
        '{\n  "bos_token_id": 151643,\n  "eos_token_id": [151645, 151643],\n  "pad_token_id": 151643,\n'
        '  "do_sample": false\n}\n'
    )
    shutil.copy2(TOKENIZER / "PROVENANCE.md", tmp / "TOKENIZER_PROVENANCE.md")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)  # the folder appears whole or not at all
    print(f"demo checkpoint written to {out}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    build(args.out, args.force)


if __name__ == "__main__":
    main()

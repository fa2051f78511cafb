"""Legacy repository code: a tiny checkpoint whose modeling code is a real file from a public release.

transformers 4.30.2's Llama files (Apache-2.0, fetched from PyPI by scripts/install_legacy_modeling.sh, the
`legacy-modeling` piece of tests/ci.py; never committed) re-shipped under model_type `legacy_llama` with an auto_map,
the way InternLM's first releases shipped code derived from them. Their rotary embedding stores `inv_freq` in the
checkpoint and computes `cos_cached`/`sin_cached` in `__init__`: under today's transformers, from_pretrained leaves
those buffers uninitialised (meta-device init), so the repository's own code is a broken reference until repaired.

Weights: the native Llama model's tensors at the dayzero fixtures' trained-like magnitudes (wide init, random norm
weights), plus each layer's stored `rotary_emb.inv_freq`. Every built folder gets a PROVENANCE.md.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from tests.ci import legacy_modeling_dir, need
from tests.dayzero.builder import FAMILIES, QWEN3_TOKENIZER, native_config, native_state_dict

MODEL_TYPE = "legacy_llama"
SOURCE = "transformers 4.30.2 (wheel transformers-4.30.2-py3-none-any.whl from PyPI)"
FILES = ("configuration_llama.py", "modeling_llama.py")
# 4.30's Llama has no GQA and head_dim = hidden_size / heads: 2 heads of 32 in the dayzero hidden size of 64.
SHAPE = dict(num_attention_heads=2, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False)
PROVENANCE = """# Provenance

- Source: {source}.
- Files: `transformers/models/llama/configuration_llama.py` -> `configuration_{mt}.py`,
  `transformers/models/llama/modeling_llama.py` -> `modeling_{mt}.py`.
- Licence: Apache-2.0 (the transformers project, Copyright The HuggingFace Inc. team and EleutherAI).
- Changes: the relative imports of transformers' internals made absolute (`from ...x import` ->
  `from transformers.x import`), `.configuration_llama` -> `.configuration_{mt}`, and the config class's
  `model_type = "llama"` -> `model_type = "{mt}"`. Nothing else.
- Weights: random (tests/dayzero/legacy.py), trained-like magnitudes; each layer stores `rotary_emb.inv_freq`.
"""


def rewrite(text: str) -> str:
    """A 4.30.2 Llama file as repository code under MODEL_TYPE (the only edits PROVENANCE lists)."""
    text = re.sub(r"from \.configuration_llama import", f"from .configuration_{MODEL_TYPE} import", text)
    text = re.sub(r"from \.\.\.(\w)", r"from transformers.\1", text)
    text = text.replace('model_type = "llama"', f'model_type = "{MODEL_TYPE}"')
    if re.search(r"^\s*from \.\.", text, re.M):
        raise ValueError("an import from transformers' package is left relative after the rewrite")
    return text


def inv_freq(head_dim: int, base: float = 10000.0) -> Any:
    """The rotary frequencies 4.30.2's LlamaRotaryEmbedding computes and registers (persistent)."""
    import torch

    return 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))


def build_legacy_llama(out: Path, seed: int = 0) -> Path:
    """Write the legacy_llama checkpoint into `out` (needs the legacy-modeling piece); returns `out`."""
    from safetensors.torch import save_file

    need("legacy-modeling")
    src = legacy_modeling_dir() / "transformers" / "models" / "llama"
    config = native_config(FAMILIES["llama"], SHAPE)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in FILES:
        target = tmp / name.replace("llama", MODEL_TYPE)
        target.write_text(rewrite((src / name).read_text(encoding="utf-8")), encoding="utf-8")
    state = native_state_dict(config, seed)
    for layer in range(config.num_hidden_layers):
        state[f"model.layers.{layer}.self_attn.rotary_emb.inv_freq"] = inv_freq(config.head_dim)
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "hidden_act",
            "max_position_embeddings", "initializer_range", "rms_norm_eps", "tie_word_embeddings", "bos_token_id",
            "eos_token_id", "pad_token_id")  # fmt: skip
    doc = {k: getattr(config, k) for k in keys}
    doc.update(
        model_type=MODEL_TYPE,
        architectures=["LlamaForCausalLM"],
        torch_dtype="float32",
        auto_map={
            "AutoConfig": f"configuration_{MODEL_TYPE}.LlamaConfig",
            "AutoModelForCausalLM": f"modeling_{MODEL_TYPE}.LlamaForCausalLM",
        },
    )
    (tmp / "config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    (tmp / "PROVENANCE.md").write_text(PROVENANCE.format(source=SOURCE, mt=MODEL_TYPE))
    for f in QWEN3_TOKENIZER.iterdir():
        if f.name != "PROVENANCE.md":
            shutil.copy2(f, tmp / f.name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out

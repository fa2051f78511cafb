"""Tiny checkpoints for the validate tests, each carrying the feature its seeded defect breaks.

Own configs rather than tests/tiny/factory.py: vLLM's CPU build needs head_dim >= 32 (the shared factory uses 16),
and the weights are initialised wider than transformers' default (initializer_range 0.02 gives near-uniform
next-token distributions: every position a near-tie, nothing to validate). Soft-caps are small so removing them
changes the logits of a tiny model as it would a real one's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
QWEN3_TOKENIZER = REPO / "examples" / "tokenizer-qwen3"
QWEN3_VOCAB = 151936
SMALL_VOCAB = 1024
WINDOW = 16
ORIGINAL_MAX = 64

COMMON: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,  # the smallest head_dim vLLM's CPU attention serves
    max_position_embeddings=512,
    initializer_range=0.25,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)
CONFIGS: dict[str, dict[str, Any]] = {
    "llama": dict(
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": ORIGINAL_MAX,
        },
    ),
    "qwen3": dict(tie_word_embeddings=True),
    "gemma2": dict(
        tie_word_embeddings=True,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        final_logit_softcapping=3.0,
        attn_logit_softcapping=2.0,
        query_pre_attn_scalar=32,
        hidden_activation="gelu_pytorch_tanh",
    ),
    "qwen3_moe": dict(
        tie_word_embeddings=False,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        norm_topk_prob=True,
        decoder_sparse_step=1,
    ),
}


# Multimodal wrappers: kind -> (the wrapper's own keywords, the text config keywords it overrides). The language
# model is built from COMMON like the others; the vision tower is one tiny layer (never run: served text only).
WRAPPED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # Qwen2.5-VL: Qwen2's language model with M-RoPE (sections of head_dim / 2 = 16), stored at the top beside visual.*
    "qwen2_5_vl": (
        dict(vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                                patch_size=14, fullatt_block_indexes=[0], window_size=28)),
        dict(head_dim=None, tie_word_embeddings=False,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]}),
    ),  # fmt: skip
    # Gemma 3: Gemma 3's language model (QK-norm, sandwich norms, a local and a global rotary base) beside a SigLIP
    # tower. Its released 5:1 pattern of sliding and full layers: llama.cpp's gemma3 hard-codes it (the GGUF carries no
    # layer pattern), so another pattern is served as a different model (the 2-layer [sliding, full] one fails
    # validate past the window: tests/engines/test_llamacpp_architectures.py).
    "gemma3": (
        dict(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14), mm_tokens_per_image=4),
        dict(model_type="gemma3_text", tie_word_embeddings=True, sliding_window=WINDOW, query_pre_attn_scalar=32,
             num_hidden_layers=6, layer_types=["sliding_attention"] * 5 + ["full_attention"]),
    ),  # fmt: skip
}


def build(
    kind: str, out: Path, *, seed: int = 0, tokenizer: bool = False, overrides: dict[str, Any] | None = None
) -> Path:
    """Write a tiny random checkpoint of `kind` into `out` (real Qwen3 tokenizer and its vocabulary if asked); a
    WRAPPED kind is the multimodal wrapper around that language model (overrides apply to its text config)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    vocab = QWEN3_VOCAB if tokenizer else SMALL_VOCAB
    wrapper, text = WRAPPED.get(kind, ({}, {}))
    kwargs = {**COMMON, **CONFIGS.get(kind, {}), **text, "vocab_size": vocab, **(overrides or {})}
    if tokenizer:
        kwargs.update(bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    auto = AutoModelForImageTextToText if wrapper else AutoModelForCausalLM
    config = AutoConfig.for_model(kind, text_config=kwargs, **wrapper) if wrapper else AutoConfig.for_model(kind, **kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = auto.from_config(config, dtype=torch.float32)
        if kind == "gemma2":
            # Gemma norms are (1 + w) with w initialised to 0: random w makes "offset lost" visible.
            for name, param in model.named_parameters():
                if "norm" in name:
                    param.data.uniform_(-0.5, 0.5)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer:
        for f in QWEN3_TOKENIZER.iterdir():
            if f.name != "PROVENANCE.md":
                shutil.copy2(f, tmp / f.name)
        gen = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643, "do_sample": False}
        (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def edit_config(src: Path, dst: Path, **changes: Any) -> Path:
    """A copy of checkpoint `src` at `dst` with config.json keys changed (None deletes the key)."""
    if src != dst:
        shutil.copytree(src, dst, dirs_exist_ok=True)
    config = json.loads((dst / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst


def edit_weights(src: Path, dst: Path, edit: Any) -> Path:
    """A copy of checkpoint `src` at `dst` whose tensors pass through `edit(dict[name, tensor]) -> dict`."""
    from safetensors.torch import load_file, save_file

    if src != dst:
        shutil.copytree(src, dst, dirs_exist_ok=True)
    tensors = load_file(dst / "model.safetensors")
    save_file(edit(dict(tensors)), dst / "model.safetensors", metadata={"format": "pt"})
    return dst

"""Features detected on real configs (../shared/data), as exact sets: what a user compares families by.

Config-only (no tensors): features read from tensors (qkv_bias, plain_mlp from stored biases and gate weights) are
checked on the tiny architectures instead (tests/inspect/test_tiny_architectures.py). Each expected set is the
model's published architecture, not inspect's output copied.
"""

from __future__ import annotations

import json

import pytest

from onboard.inspect_checkpoint import profile_from_parts

EXPECTED = {
    # MLA, 256 routed + 1 shared sigmoid-scored experts with noaux_tc bias, 3 dense-first layers, 1 MTP layer, FP8.
    "deepseek/deepseek-r1_hf-mirror": {"mla", "moe", "shared_experts", "dense_first_layers", "router_correction_bias",
                                       "sigmoid_router", "mtp", "rope:yarn", "quantized:fp8"},
    # 1 KV head, embeddings x sqrt(hidden), RMSNorm (1 + w), tied head.
    "gemma/gemma-2b-it_hf-mirror": {"mqa", "embedding_scaling", "norm_offset", "rope:default", "tied_embeddings"},
    # 5 sliding (512) : 1 global, QK-norm, query_pre_attn_scalar, pre+post norms, 1 KV head.
    "gemma/gemma-3-1b-it_user-upload": {"mqa", "sliding_window", "interleaved_attention", "qk_norm",
                                        "query_pre_attn_scalar", "sandwich_norm", "embedding_scaling", "norm_offset",
                                        "rope:default", "tied_embeddings"},
    # Sinks, alternating 128-token sliding / full, 32 experts, biased QKV, MXFP4 experts, YaRN.
    "gpt-oss/gpt-oss-20b_hf-mirror": {"gqa", "sliding_window", "interleaved_attention", "attention_sinks", "moe",
                                      "qkv_bias", "quantized:mxfp4", "rope:yarn"},
    "gpt2/resaved-finetune": {"absolute_positions", "layernorm", "tied_embeddings"},
    "llama2/llama-2-7b-hf_hf-mirror": {"rope:default"},  # plain multi-head attention
    "llama3/llama-3.2-3b-instruct_hf-mirror": {"gqa", "rope:llama3", "tied_embeddings"},
    "mistral/mistral-7b-instruct-v0.2_resaved": {"gqa", "rope:default"},  # v0.2 dropped the sliding window
    "mistral/mixtral-8x7b-v0.1_hf-mirror": {"gqa", "moe", "rope:default"},  # softmax router, no shared experts
    "qwen/qwen3-1.7b_mlx-bf16-copy": {"gqa", "qk_norm", "rope:default", "tied_embeddings"},
    "smollm/smollm3-3b_hf-copy": {"gqa", "nope_layers", "rope:default", "tied_embeddings"},  # every 4th layer NoPE
}  # fmt: skip


def features_of(shared_data, rel: str) -> set[str]:
    folder = shared_data / rel
    config = json.loads((folder / "config.json").read_text())
    index_file = folder / "model.safetensors.index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else None
    return set(profile_from_parts(config, None, index=index).features)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_features_of_real_configs(shared_data, rel: str) -> None:
    assert features_of(shared_data, rel) == EXPECTED[rel]


def test_phi3_window_longer_than_the_context_is_no_sliding_window(shared_data) -> None:
    """sliding_window 262144 over max_position_embeddings 131072 never binds: full attention, a growing cache."""
    for rel in ("phi/phi-3-mini-128k-instruct_user-upload", "phi/phi-3.5-mini-instruct_user-upload"):
        assert features_of(shared_data, rel) == {"rope:longrope"}
    # One token less than the context: every position past the window is cut off, so it binds again.
    assert "sliding_window" in features_of_variant(shared_data, "phi/phi-3.5-mini-instruct_user-upload",
                                                   sliding_window=131071)  # fmt: skip
    assert "sliding_window" not in features_of_variant(shared_data, "phi/phi-3.5-mini-instruct_user-upload",
                                                       sliding_window=131072)  # fmt: skip


def features_of_variant(shared_data, rel: str, **changes) -> set[str]:
    config = json.loads((shared_data / rel / "config.json").read_text()) | changes
    return set(profile_from_parts(config, None).features)


def test_a_model_whose_every_layer_slides_still_reports_its_kv_grouping(shared_data) -> None:
    """Mistral-7B v0.1: the same shapes as v0.2 with a 4096-token window on every layer (no full layer)."""
    mistral = "mistral/mistral-7b-instruct-v0.2_resaved"
    assert features_of_variant(shared_data, mistral, sliding_window=4096) == {"gqa", "sliding_window", "rope:default"}


@pytest.mark.parametrize(
    ("heads", "kv_heads", "expected"),
    [(1, 1, set()), (2, 1, {"mqa"}), (2, 2, set()), (4, 2, {"gqa"}), (32, 1, {"mqa"})],
)
def test_kv_grouping_by_head_counts(shared_data, heads: int, kv_heads: int, expected: set[str]) -> None:
    """One attention head is plain attention, not multi-query; two heads sharing one KV head is."""
    llama2 = "llama2/llama-2-7b-hf_hf-mirror"
    got = features_of_variant(shared_data, llama2, num_attention_heads=heads, num_key_value_heads=kv_heads,
                              head_dim=4096 // heads)  # fmt: skip
    assert got == expected | {"rope:default"}

"""How config.json spells a quantity (`ALIASES`, the one table: inspect reads `cv.get(*spellings(name))`, generate
`ConfigValues.get(name)`), and what some families derive from other keys (both read those rules too).
tests/names/test_config_names.py checks that the two resolve every tiny architecture's config identically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Canonical quantity -> the other spellings families use for it (looked up in this order, after the canonical name).
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "d_model", "dim", "model_dim", "hidden_dim"),
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads", "attention_heads"),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv", "multi_query_group_num", "n_kv_heads", "kv_n_heads"),
    "head_dim": ("attention_head_dim", "kv_channels", "head_size", "d_head"),
    "intermediate_size": ("n_inner", "ffn_hidden_size", "ffn_dim", "inner_hidden_size", "d_ff"),
    "vocab_size": ("padded_vocab_size", "n_vocab"),
    "max_position_embeddings": ("n_positions", "max_sequence_length", "seq_length", "max_seq_len", "n_ctx",
                                "model_max_length"),
    # RMSNorm's spellings first: which one a config uses is how inspect tells RMSNorm from LayerNorm
    "rms_norm_eps": ("rms_norm_epsilon", "layer_norm_epsilon", "layer_norm_eps", "layernorm_epsilon", "norm_epsilon",
                     "norm_eps"),
    "hidden_act": ("hidden_activation", "activation_function", "activation", "act_fn", "mlp_activation",
                   "mlp_hidden_act", "ffn_act_fn", "afn"),
    "tie_word_embeddings": ("tie_embeddings", "share_embeddings"),
    "rope_theta": ("rotary_emb_base", "rope_base", "rotary_base"),
    # GPT-NeoX's rotary_pct, StableLM-alpha's rope_pct: the share of each head the rotary embedding turns
    "partial_rotary_factor": ("rotary_pct", "rope_pct"),
    "rotary_dim": ("rotary_emb_dim",),
    "sliding_window": ("sliding_window_size", "window_size", "attention_window_size", "local_window"),
    "layer_types": ("layers_block_type", "block_types"),
    "num_experts": ("num_local_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts"),
    "num_experts_per_tok": ("moe_k", "experts_per_token", "moe_top_k", "num_selected_experts", "moe_topk",
                            "num_experts_per_token", "top_k_experts"),
    "moe_intermediate_size": ("expert_intermediate_size",),
    # DBRX: 1 (the default) renormalises the top-k weights by their sum, as norm_topk_prob does; another p is
    # refused (compose_knowledge.GUARDS)
    "norm_topk_prob": ("moe_normalize_expert_weights",),
    "num_shared_experts": ("n_shared_experts", "moe_num_shared_experts", "shared_expert_count"),
    "shared_expert_intermediate_size": ("shared_intermediate_size", "moe_shared_expert_intermediate_size",
                                        "shared_experts_intermediate_size"),  # dots.llm3: per shared expert
    "routed_scaling_factor": ("router_scaling_factor", "route_scale", "moe_routed_scaling_factor",
                              "moe_router_scaling_factor"),
    # the dense layers before the first MoE layer (Ergo: num_dense_blocks; Inkling: dense_mlp_idx)
    "first_k_dense_replace": ("moe_layer_start_index", "num_dense_layers", "num_dense_blocks", "dense_mlp_idx"),
    "num_nextn_predict_layers": ("mtp_num_hidden_layers", "num_mtp_modules", "n_mtp_layers", "nextn_predict_layers"),
    "logit_scale": ("lm_head_multiplier", "output_multiplier"),
    "embedding_multiplier": ("emb_scale", "scale_emb", "embeddings_multiplier"),
    "attn_logit_softcapping": ("attn_softcap", "attention_logit_softcapping"),
    "final_logit_softcapping": ("final_softcap", "logit_softcapping"),
}  # fmt: skip
# The Mamba mixer's knobs: pure Mamba models use bare names (`state_size`), the hybrids prefix them (`mamba_d_state`).
# Each is a fallback chain in lookup order, not canonical-first.
SSM_KEYS: dict[str, tuple[str, ...]] = {
    "mamba_d_state": ("mamba_d_state", "ssm_state_size", "state_size", "d_state"),
    "mamba_d_conv": ("mamba_d_conv", "conv_kernel", "d_conv"),
    "mamba_expand": ("mamba_expand", "expand"),
    "mamba_n_heads": ("mamba_n_heads", "n_mamba_heads", "mamba_num_heads"),
    "mamba_d_head": ("mamba_d_head", "mamba_headdim", "mamba_head_dim"),
    "mamba_n_groups": ("mamba_n_groups", "mamba_ngroups", "n_groups"),
    "mamba_d_ssm": ("mamba_d_ssm", "mamba_intermediate_size", "intermediate_size_mamba"),
    "mamba_dt_rank": ("time_step_rank", "mamba_dt_rank"),
    "mamba_conv_bias": ("use_conv_bias", "mamba_conv_bias"),
    # Nemotron-H's mixer reads use_bias (its mamba_proj_bias is unread); Zamba2's add_bias_linear covers both.
    "mamba_proj_bias": ("use_bias", "mamba_proj_bias", "add_bias_linear"),
    # A mixer-specific key, else hidden_act: Mamba, Bamba, Jamba, Granite-4.0 and Falcon-H1 apply it in the mixer too.
    "mamba_hidden_act": ("mamba_hidden_act", "hidden_mamba_act", "hidden_act"),
}  # fmt: skip
BARE_HEAD_KEYS = {"mamba_n_heads": "num_heads", "mamba_d_head": "head_dim"}
"""Mamba-2's own names for its heads; the hybrids' num_heads / head_dim are their attention's."""
RMS_NORM_EPS_KEYS = ("rms_norm_eps", "rms_norm_epsilon")
"""The spellings of rms_norm_eps that name an RMSNorm's eps (the others are LayerNorm's)."""

# Activation names a family's code reads otherwise than transformers' ACT2FN (GPT-1's ACT_FNS).
FAMILY_ACTIVATION_NAMES = {"openai-gpt": {"gelu": "gelu_new", "swish": "silu"}}


def spellings(name: str) -> tuple[str, ...]:
    """`name` and its other spellings (ALIASES)."""
    return (name, *ALIASES.get(name, ()))


Get = Callable[[str], Any]
"""A quantity's value by canonical name, through its spellings (None when config.json sets none); the derived rules
read through one, inspect's (ConfigView) or generate's (ConfigValues)."""


def kv_heads(get: Get) -> int | None:
    """KV heads a family derives: Falcon before new_decoder_architecture has one (multi_query, its config class's
    default) or as many as query heads (its fused projection is then 3 x hidden); multi_query elsewhere (GPT-BigCode)
    means one. None: num_key_value_heads as read."""
    if get("new_decoder_architecture"):
        return None
    multi = get("multi_query")
    if get("model_type") == "falcon":
        return 1 if multi is not False else get("num_attention_heads")
    return 1 if multi else None


def partial_rotary_factor(get: Get) -> float | None:
    """GPT-J / CodeGen rotate the first `rotary_dim` dims of each head: that share of head_dim. None: as read."""
    rotary_dim, head_dim = get("rotary_dim"), get("head_dim")
    heads, hidden = get("num_attention_heads"), get("hidden_size")
    head_dim = head_dim or (hidden // heads if hidden and heads else None)
    return rotary_dim / head_dim if rotary_dim and head_dim else None


def num_layers_from_types(get: Get) -> int | None:
    """Nemotron-H: num_hidden_layers is deprecated and absent; its layers are its layer types (a list, or the
    original hybrid_override_pattern string, a character per layer)."""
    for types in (get("layer_types"), get("hybrid_override_pattern")):
        if isinstance(types, (list, tuple, str)) and types:
            return len(types)
    return None


def activation_name(model_type: str, value: Any) -> str | None:
    """The activation a config's value stands for: DBRX's ffn_act_fn is {"name": "silu", ...}, and a family's code
    may read a name otherwise than ACT2FN (FAMILY_ACTIVATION_NAMES)."""
    name = value.get("name") if isinstance(value, dict) else value
    if not isinstance(name, str):
        return None
    return FAMILY_ACTIVATION_NAMES.get(model_type, {}).get(name, name)

"""The feature vocabulary: short names for what a model does beyond a plain pre-norm decoder, how a checkpoint is
compared with known families ("qwen3 + attention_sinks"). `FEATURES` documents each name; `derive` computes them.
"""

from __future__ import annotations

from onboard.inspect_checkpoint.architecture import ArchFacts
from onboard.profile import quantized_feature, rope_feature

FEATURES: dict[str, str] = {
    "gqa": "grouped-query attention: 1 < kv heads < attention heads",
    "mqa": "multi-query attention: one KV head shared by all attention heads",
    "mla": "multi-head latent attention (DeepSeek): low-rank compressed KV",
    "sliding_window": "some or all attention layers see only the last `window` tokens",
    "interleaved_attention": "layers of different mixer kinds alternate (sliding/full, linear/full, SSM/attention)",
    "chunked_attention": "local attention within fixed chunks (Llama 4)",
    "nope_layers": "some attention layers apply no rotary embedding",
    "no_positions": "no positional encoding at all: position_embedding_type says none (Granite-4.0's hybrids)",
    "moe": "mixture-of-experts MLP in some or all layers",
    "shared_experts": "MoE layers also run always-on shared experts",
    "dense_first_layers": "the first layers keep a dense MLP before MoE layers start",
    "router_correction_bias": "a bias added to router scores for expert selection only (DeepSeek-V3 noaux_tc)",
    "sigmoid_router": "router scores with a sigmoid instead of a softmax",
    "qk_norm": "queries and keys are normalised before attention",
    "attention_sinks": "a learned per-head sink logit joins the attention softmax (gpt-oss)",
    "attn_softcap": "attention logits soft-capped with cap·tanh(x/cap)",
    "final_softcap": "output logits soft-capped",
    "tied_embeddings": "the output layer reuses the input embedding matrix",
    "linear_attention": "linear-attention / delta-rule layers with a fixed state",
    "ssm": "state-space (Mamba) layers with a fixed state",
    "short_conv": "short convolution mixer layers (LFM2)",
    "multimodal": "vision or audio towers present besides the language model",
    "mtp": "multi-token-prediction layers shipped with the checkpoint",
    "logit_scaling": "final logits multiplied by a constant (Cohere logit_scale, Granite logits_scaling)",
    "embedding_scaling": "token embeddings multiplied by a constant (Gemma sqrt(hidden), Granite)",
    "residual_scaling": "residual branches multiplied by a constant (Granite, MiniCPM)",
    "attention_multiplier": "attention scores use a configured scale instead of 1/sqrt(head_dim)",
    "query_pre_attn_scalar": "attention scale from query_pre_attn_scalar (Gemma 2/3)",
    "nope_temperature": "queries of the layers without rotary scaled up with the position (Llama 4's temperature "
    "tuning)",
    "kv_shared_layers": "layers attending over an earlier layer's keys and values, caching none (Gemma 3n / 4)",
    "double_wide_mlp": "the KV-shared layers' MLP twice as wide (Gemma 4's use_double_wide_mlp)",
    "values_from_keys": "no value projection on some layers: the keys are the values (Gemma 4's attention_k_eq_v)",
    "bidirectional_attention": "attention sees later tokens too (use_bidirectional_attention): not a causal LM",
    "per_layer_embeddings": "a second token table with one vector per layer, gated into each layer (Gemma 3n / 4)",
    "moe_beside_mlp": "routed experts beside each layer's dense MLP, summed (Gemma 4's enable_moe_block)",
    "query_heads_per_layer": "layers with different query head counts (Laguna's num_attention_heads_per_layer)",
    "attention_output_gate": "the attention output gated per head or channel before o_proj (Laguna's gating)",
    "router_softcap": "router logits soft-capped by tanh before scoring (Laguna's moe_router_logit_softcapping)",
    "head_transform": "a dense, activation and norm before the LM head's projection (ModernBERT-decoder)",
    "norm_offset": "RMSNorm weight applied as (1 + w) (Gemma, Qwen3-Next)",
    "layernorm": "LayerNorm (mean-centred) instead of RMSNorm",
    "sandwich_norm": "norms both before and after each sub-block (Gemma 2/3)",
    "post_norm": "norms after each sub-block only (OLMo 2)",
    "post_ln_norm": "norms on the residual sums, norm(x + f(x)), and none after the last layer (GPT-1, OPT-350m)",
    "parallel_residual": "attention and MLP computed in parallel from one normed input",
    "partial_rotary": "rotary embedding on part of each head only",
    "qkv_bias": "bias on the query/key/value projections",
    "alibi": "ALiBi attention biases instead of rotary positions",
    "absolute_positions": "learned absolute position embeddings",
    "plain_mlp": "non-gated two-layer MLP",
    "rope:<type>": "rotary embedding of the given type: default, linear, dynamic, yarn, llama3, longrope, …",
    "quantized:<method>": "checkpoint weights quantized with the given method (fp8, mxfp4, gptq, awq, …)",
}


def derive(facts: ArchFacts) -> tuple[str, ...]:
    d = facts.dims
    kinds = [layer.attention for layer in facts.layers]
    attention_layers = [k for k in kinds if k in ("full", "sliding", "chunked", "mla")]
    out: list[str] = []
    if "mla" in kinds:
        out.append("mla")
    elif attention_layers and d.num_attention_heads > 1:
        if d.num_kv_heads == 1:
            out.append("mqa")
        elif 1 < d.num_kv_heads < d.num_attention_heads:
            out.append("gqa")
    if "sliding" in kinds:
        out.append("sliding_window")
    if "chunked" in kinds:
        out.append("chunked_attention")
    if len({k for k in kinds if k != "none"}) > 1:
        out.append("interleaved_attention")
    if any(not layer.rope for layer in facts.layers if layer.attention in ("full", "sliding", "chunked", "mla")):
        if facts.position_encoding == "rope":
            out.append("nope_layers")
    if "linear" in kinds:
        out.append("linear_attention")
    if "ssm" in kinds or any(layer.parallel_ssm for layer in facts.layers):
        out.append("ssm")
    if "conv" in kinds:
        out.append("short_conv")
    if facts.moe:
        out.append("moe")
        if facts.moe.num_shared_experts:
            out.append("shared_experts")
        if facts.moe.dense_first_layers:
            out.append("dense_first_layers")
        if facts.moe.correction_bias:
            out.append("router_correction_bias")
        if facts.moe.scoring == "sigmoid":
            out.append("sigmoid_router")
    if facts.norms.qk_norm:
        out.append("qk_norm")
    if facts.attention_sinks:
        out.append("attention_sinks")
    m = facts.multipliers
    if m.attn_logit_softcapping:
        out.append("attn_softcap")
    if m.final_logit_softcapping:
        out.append("final_softcap")
    if facts.tie_word_embeddings:
        out.append("tied_embeddings")
    if facts.multimodal:
        out.append("multimodal")
    if facts.mtp_layers:
        out.append("mtp")
    if m.logit_scale is not None and m.logit_scale != 1.0:
        out.append("logit_scaling")
    if m.embedding_multiplier is not None and m.embedding_multiplier != 1.0:
        out.append("embedding_scaling")
    if m.residual_multiplier is not None and m.residual_multiplier != 1.0:
        out.append("residual_scaling")
    if m.attention_multiplier is not None:
        out.append("attention_multiplier")
    if m.query_pre_attn_scalar is not None:
        out.append("query_pre_attn_scalar")
    if m.nope_temperature is not None and any(not layer.rope for layer in facts.layers):
        out.append("nope_temperature")
    if facts.norms.offset:
        out.append("norm_offset")
    if facts.norms.kind == "layernorm":
        out.append("layernorm")
    if facts.norms.placement == "sandwich":
        out.append("sandwich_norm")
    elif facts.norms.placement == "post":
        out.append("post_norm")
    elif facts.norms.placement == "post_ln":
        out.append("post_ln_norm")
    if facts.parallel_residual:
        out.append("parallel_residual")
    if facts.rope:
        out.append(rope_feature(facts.rope.type))
        if facts.rope.partial_rotary_factor < 1.0 or (facts.rope.rotary_dim and facts.rope.rotary_dim < d.head_dim):
            out.append("partial_rotary")
    elif facts.position_encoding == "alibi":
        out.append("alibi")
    elif facts.position_encoding == "absolute":
        out.append("absolute_positions")
    elif facts.position_encoding == "nope":
        out.append("no_positions")
    if facts.biases.attention_qkv:
        out.append("qkv_bias")
    if facts.mlp_gated is False:
        out.append("plain_mlp")
    if facts.quantization:
        out.append(quantized_feature(facts.quantization.method))
    out += facts.layer_options
    if facts.head_transform:
        out.append("head_transform")
    return tuple(out)

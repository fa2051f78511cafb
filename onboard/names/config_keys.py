"""What each config.json key means to onboard: no effect on the forward pass (with the reason), shown by the tensors
or layer plan, a known effect on the numbers, and the sections a config nests the language model's keys in. A key
none of them lists is unknown: a finding in inspect, a kernel stub in generate.
"""

from __future__ import annotations

# Nested sections holding the language model's hyperparameters, in lookup order.
TEXT_SECTIONS = ("text_config", "language_config", "llm_config", "text_model")
# Nested sections of one model's own hyperparameters (DBRX, MPT): their keys are the model's keys, as if at the top.
MODEL_SECTIONS = ("attn_config", "ffn_config")
# Sections that mean a tower besides the language model is present.
TOWER_SECTIONS = {
    "vision_config": "vision",
    "vision_tower": "vision",
    "visual": "vision",
    "audio_config": "audio",
    "speech_config": "audio",
    "audio_tower": "audio",
}

# Keys that do not change the language model's forward pass on text, each with the reason.
_TRAINING = "training-only (dropout, init, losses, aux losses): no effect on inference"
_SERIALIZATION = "transformers bookkeeping: no effect on the forward pass"
_TOKENIZER = "special-token ids: checked by verify-tokenizer against the tokenizer files"
_GENERATION = "generation defaults: reported by verify-tokenizer / validate, not the forward pass"
_RUNTIME = "runtime / kernel selection hint: engines choose their own"

IGNORED: dict[str, str] = {
    **dict.fromkeys(
        ["initializer_range", "initializer_factor", "init_std", "attention_dropout", "hidden_dropout", "dropout",
         "embd_pdrop", "resid_pdrop", "attn_pdrop", "summary_first_dropout", "hidden_dropout_prob",
         "attention_probs_dropout_prob", "classifier_dropout", "router_aux_loss_coef", "aux_loss_alpha", "seq_aux",
         "output_router_logits", "router_z_loss_coef", "router_jitter_noise", "z_loss_coefficient", "aux_loss_coef",
         "ffn_dropout", "emb_dropout", "residual_dropout", "embedding_dropout", "mlp_dropout", "attn_dropout",
         "moe_aux_loss_coeff", "router_aux_loss_factor", "moe_loss_weight", "layer_norm_dropout", "gradient_checkpointing",
         "pretraining_tp", "use_mambapy", "rescale_prenorm_residual", "initializer_cutoff_factor",
         "lambda_std_dev",  # DiffLlama: the initial spread of its lambda parameters
         "embedding_init_std", "std_factor", "moe_z_loss_coeff", "summary_activation", "summary_proj_to_labels",
         "summary_type", "summary_use_proj", "layer_drop", "ep_size", "mlp_initializer_range", "tp_size",
         "attention_softmax_in_fp32", "scale_attention_softmax_in_fp32", "reorder_and_upcast_attn", "time_step_min",
         "time_step_max", "time_step_floor", "time_step_init_scheme", "time_step_scale", "use_cache",
         # MPT: gradient scaling of the embeddings (the forward value is unchanged), packed-sequence masking
         "embedding_fraction", "attn_uses_sequence_id",
         # Gated DeltaNet (OLMo-hybrid): the ranges A_log and dt_bias are initialised from
         "linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max", "linear_dt_init_floor"],
        _TRAINING,
    ),
    **dict.fromkeys(
        ["architectures", "model_type", "transformers_version", "_name_or_path", "torch_dtype", "dtype", "auto_map",
         "return_dict", "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss",
         "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "add_cross_attention",
         "cross_attention_hidden_size", "tie_encoder_decoder", "finetuning_task", "id2label", "label2id",
         "problem_type", "tokenizer_class", "prefix", "task_specific_params", "_attn_implementation_autoset",
         "_commit_hash", "_attn_implementation", "keys_to_ignore_at_inference", "cache_implementation",
         "text_model_type", "use_return_dict", "num_labels", "model_name", "name_or_path", "base_model_tp_plan",
         "base_model_pp_plan", "attn_implementation", "_experts_implementation", "layer_types", "mlp_layer_types",
         "initial_context_length", "init_device"],
        _SERIALIZATION,
    ),
    **dict.fromkeys(
        ["bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id", "unk_token_id",
         "image_token_id", "image_token_index", "video_token_id", "audio_token_id", "vision_start_token_id",
         "vision_end_token_id", "boi_token_index", "eoi_token_index", "mask_token_id"],
        _TOKENIZER,
    ),
    **dict.fromkeys(
        ["max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
         "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
         "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
         "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
         "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
         "num_logits_to_keep"],
        _GENERATION,
    ),
    **dict.fromkeys(
        ["use_flash_attn", "use_flash_attention_2", "fused_bias_fc", "fused_dropout_add_ln", "fused_mlp",
         "use_kernels", "use_sliding_window", "max_window_layers", "use_mamba_kernels", "sliding_window_pattern",
         "_sliding_window_pattern", "kv_cache_dtype", "bias_dropout_fusion", "chunk_size", "moe_layer_freq",
         # Mamba: the scan's chunk length and algorithm (the same sums in another order), the dtype a cache keeps
         # its state in, and whether a shared expert overlaps the routed ones (Nemotron-H's scheduling)
         "mamba_chunk_size", "use_associative_scan", "mamba_ssm_cache_dtype", "moe_shared_expert_overlap", "attn_impl"],
        _RUNTIME,
    ),
}  # fmt: skip


TRAINING_WORDS = ("dropout", "_pdrop", "initializer", "init_std", "layerdrop", "jitter")
"""Training-only keys by name: any key containing one (`activation_dropout`, `emb_pdrop`, `input_jitter_noise`). Not
"fp32": Mamba's residual_in_fp32 keeps a float32 residual stream between layers, which changes bfloat16 outputs."""


def training_only(key: str) -> bool:
    return any(word in key for word in TRAINING_WORDS)


# Keys whose meaning is known but which the block library does not model: reported as warnings naming the effect.
KNOWN_UNSUPPORTED: dict[str, str] = {
    "attention_chunk_size": "chunked local attention",
    "num_nextn_predict_layers": "multi-token-prediction layers",
}

# Keys whose effect inspect reads from what they shape, the tensors or the per-layer plan, not from the key; adapters
# act on the same derived facts, so the key itself adds nothing to check.
STRUCTURAL_KEYS = frozenset({
    # per-layer attention plan and NoPE layers
    "layer_types", "sliding_window_pattern", "_sliding_window_pattern", "use_sliding_window", "max_window_layers",
    "attention_types", "no_rope_layers", "no_rope_layer_interval", "global_attn_every_n_layers", "attention_layers",
    # which layers are MoE
    "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers", "mlp_layer_types",
    "moe_layers", "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval", "interleave_moe_layer_step",
    "num_dense_layers",
    # what the tensors show: biases, QK-norm, norm and head layout, KV heads, shared experts, MoE scoring
    "attention_bias", "mlp_bias", "use_bias", "bias", "qkv_bias", "add_bias_linear", "lm_head_bias",
    "use_qk_norm", "qk_layernorm", "qk_norm", "use_qk_layernorm", "new_decoder_architecture",
    "num_ln_in_parallel_attn", "parallel_attn", "use_parallel_residual", "multi_query", "scoring_func",
    "n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "shared_expert_intermediate_size",
    "shared_intermediate_size", "rotary_dim", "rotary_pct", "attention_out_bias", "use_qkv_bias", "use_post_norm",
    "alibi", "qk_head_dim", "enable_bias", "layer_norm_elementwise_affine", "_remove_final_layer_norm",
    "intermediate_multiple_size",
    # MPT: its MLP width, biases and learned positions (transformers' MPT builds none: ALiBi)
    "expansion_ratio", "no_bias", "learned_pos_emb",
    # LFM2: which layers convolve (layer_types carries it too), and the MLP width rule (the tensors show its result)
    "full_attn_idxs", "block_auto_adjust_ff_dim", "block_ffn_dim_multiplier", "block_multiple_of", "use_expert_bias",
    "use_sandwich_norm", "use_attention_gate",
    # ModernBERT-decoder: biases the tensors show; its config class derives sliding_window from local_attention
    "classifier_bias", "decoder_bias", "norm_bias", "local_attention",
})  # fmt: skip

# MiniMax's three residual-scaled sublayers (their alpha / beta factors below).
_MINIMAX_SUBLAYERS = (("full_attn", "full-attention layers'"), ("linear_attn", "linear-attention layers'"),
                      ("mlp", "MLP's"))  # fmt: skip
# Keys with a known effect on the numbers that the profile carries no field for, reported to the kernel author.
# Adapters apply each one or refuse a value their blocks lack (every compose_knowledge.GUARDS key must be here).
KERNEL_FACTS: dict[str, str] = {
    "swiglu_limit": "clamps the SwiGLU gate/up activations (gpt-oss)",
    "swiglu_alpha": "SwiGLU computes x·sigmoid(alpha·x) with this alpha, not plain SiLU (gpt-oss)",
    "clip_qkv": "clamps the q/k/v projections to ±clip_qkv (OLMo, DBRX)",
    "attention_value_scale": "values are multiplied by this after their projection (MiMo-V2-Flash)",
    "moe_norm_min": "the top-k routing weights are renormalised by max(sum, moe_norm_min) (ERNIE 4.5)",
    "index_n_heads": "DeepSeek sparse attention: the indexer's scoring heads",
    "index_head_dim": "DeepSeek sparse attention: the indexer's head width",
    "index_topk": "DeepSeek sparse attention: each query attends only to the indexer's top-k keys",
    "indexer_types": "DeepSeek sparse attention: layers that run their own indexer or reuse a previous layer's top-k",
    "topk_method": "how the router picks experts (noaux_tc: bias-corrected scores, group-limited top-k)",
    "expert_selection_fn": "the router's scoring function",
    "shared_expert_combination_strategy": "how shared and routed experts are combined (average halves their sum)",
    "moe_normalize_expert_weights": "the top-k weights are divided by their p-norm (DBRX; p = 1 renormalises by "
    "the sum)",
    "enable_moe_fp32_combine": "routed and shared experts are summed in float32 (HY-V3; generated adapters sum in "
    "the model dtype, a rounding difference in bfloat16)",
    "layer_rope_theta": "a rotary base per layer",
    "force_rope": "rotary on the full-attention layers too",
    "prefix_dense_sliding_window_pattern": "the dense prefix layers' attention pattern and rotary (Cohere2-MoE)",
    "use_bidirectional_attention": "attention that is not causal, for all tokens or some",
    "moe_apply_router_weight_on_input": "routing weights applied to the experts' input, not their output",
    "scale_attn_weights": "whether attention scores are scaled by 1/sqrt(head_dim)",
    "scale_attn_by_inverse_layer_idx": "attention scores divided by the layer index + 1",
    "apply_residual_connection_post_layernorm": "the residual is taken after the input norm, not before it",
    "do_layer_norm_before": "pre-norm (true) or post-norm layers with the same tensor names (OPT-350m: false)",
    "word_embed_proj_dim": "token embeddings of another width, projected in and out (OPT-350m)",
    "slow_but_exact": "output projections summed in pretraining_tp slices (BLOOM)",
    "alibi_bias_max": "the largest ALiBi slope exponent (MPT; 8 gives BLOOM's slopes)",
    "attn_type": "MPT's attention kind (multi-head, multi-query or grouped-query in one fused Wqkv)",
    "norm_type": "the layers' norm (MPT: LayerNorm, or llm-foundry's RMSNorm variants)",
    "prefix_lm": "bidirectional attention over a prefix, causal after it",
    "qk_ln": "LayerNorm on queries and keys (MPT)",
    "softmax_scale": "attention scores scaled by this, not 1/sqrt(head_dim)",
    "linear_allow_neg_eigval": "Gated DeltaNet's beta doubled (2 sigmoid(b)): the state transition's eigenvalues "
    "reach -1 (FLA, OLMo-hybrid)",
    # MiniMax (DeepNet-style): each sublayer's output is residual * alpha + branch * beta
    **{
        f"{kind}_alpha_factor": f"the {what} residual is scaled by this: residual × alpha + output × beta (MiniMax)"
        for kind, what in _MINIMAX_SUBLAYERS
    },
    **{
        f"{kind}_beta_factor": f"the {what} output is scaled by this: residual × alpha + output × beta (MiniMax)"
        for kind, what in _MINIMAX_SUBLAYERS
    },
    "block_size": "MiniMax: the lightning (linear) attention's chunk length, a tiling that changes the output only "
    "by rounding; BigBird: the block of its block-sparse attention, which decides the keys each query sees",
}
# The values that change nothing beside the plain computation (no finding for them).
PLAIN_VALUES: dict[str, tuple[object, ...]] = {
    "scale_attn_weights": (True,),
    "do_layer_norm_before": (True,),
    "expert_selection_fn": ("softmax",),
    "shared_expert_combination_strategy": ("sum",),
    "moe_normalize_expert_weights": (1, 1.0),
    # a guarded key's plain values are the adapter's default and pass its guard (compose_knowledge.GUARDS)
    "topk_method": (None,),
    "alibi_bias_max": (8,),
    "attn_type": ("multihead_attention",),
    "norm_type": ("layernorm", "low_precision_layernorm", "layer_norm"),
    **{f"{kind}_{ab}_factor": (1, 1.0) for kind, _ in _MINIMAX_SUBLAYERS for ab in ("alpha", "beta")},
}

# Keys with an effect elsewhere that a generated adapter may leave unread, each with the reason.
ADAPTER_UNREAD: dict[str, str] = {
    "quantization_config": "the quantized format becomes a dequant_<method> kernel stub: adapters load dense weights",
    "generation_config": "generation defaults: not the forward pass",
    "original_max_position_embeddings": "read with rope_parameters / rope_scaling, where the rotary scaling uses it",
    "num_nextn_predict_layers": "multi-token-prediction layers: inference never runs them (an adapter reads the count "
    "where the checkpoint stores them, to drop them)",
    "time_step_rank": "Mamba-2 keeps Mamba-1's dt projection rank in its config and never reads it (dt comes from "
    "in_proj per head)",
    "mtp_layers_block_type": "Nemotron-H's multi-token-prediction layers' block types (inference never runs them)",
    "enable_moe_fp32_combine": "HY-V3 sums routed and shared experts in float32: generated adapters sum in the model "
    "dtype, a rounding difference only in bfloat16",
}
ROPE_KEYS = frozenset({"rope_scaling", "rope_theta", "rope_parameters"})
"""Rotary keys: an adapter reads them (never neutral, whatever a table above says)."""


def neutral_for_adapters(key: str) -> bool:
    """A key a generated adapter may leave unread: no effect on the forward pass, or one the adapter need not act on
    (ADAPTER_UNREAD). Keys a composition guards (compose_knowledge.GUARDS) are never in these tables."""
    return key not in ROPE_KEYS and (key in IGNORED or key in ADAPTER_UNREAD or training_only(key))

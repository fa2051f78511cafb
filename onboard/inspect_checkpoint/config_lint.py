"""Config lint: every config.json key is used, deliberately ignored (with a reason), or reported.

An unknown key is how a new rope variant, scaling constant or mixer option shows up on day zero; silently
dropping it is how it ships broken (BUGZOO B34, B40). Keys read by the analysis count as used (ConfigView records
them); the tables below list keys that do not change the forward pass, or that another stage owns.
"""

from __future__ import annotations

from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint.config_view import ConfigView

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
         "time_step_max", "time_step_floor", "time_step_init_scheme", "time_step_scale", "use_cache", "topk_method"],
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
         "initial_context_length"],
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
         "_sliding_window_pattern", "kv_cache_dtype", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
         "bias_dropout_fusion", "apply_residual_connection_post_layernorm", "chunk_size", "moe_layer_freq",
         # Mamba: the scan's chunk length and algorithm (the same sums in another order), the dtype a cache keeps
         # its state in, and whether a shared expert overlaps the routed ones (Nemotron-H's scheduling)
         "mamba_chunk_size", "use_associative_scan", "mamba_ssm_cache_dtype", "moe_shared_expert_overlap"],
        _RUNTIME,
    ),
}  # fmt: skip


def wrapper_side(cv: ConfigView, section: str) -> bool:
    """A key at a multimodal wrapper's top level, beside its text config: the wrapper's own (how images or audio
    become tokens, the projector, feature layers). The language model's forward on text reads its text config only
    (transformers' wrappers and vLLM's alike; the head's tie flag, which it does read, is handled where it is read:
    config_view.tie_word_embeddings)."""
    return section == "" and cv.text_section is not None


TRAINING_WORDS = ("dropout", "_pdrop", "initializer", "init_std", "layerdrop", "jitter")
"""Training-only keys by name: any key containing one (`activation_dropout`, `emb_pdrop`, `input_jitter_noise`). Not
"fp32": Mamba's residual_in_fp32 keeps a float32 residual stream between layers, which changes bfloat16 outputs."""


def training_only(key: str) -> bool:
    return any(word in key for word in TRAINING_WORDS)


def ignored(cv: ConfigView, section: str, key: str) -> bool:
    """A key that does not change the language model's forward pass on text."""
    return key in IGNORED or training_only(key) or wrapper_side(cv, section)


# Keys whose meaning is known but which the block library does not model: reported as warnings naming the effect.
KNOWN_UNSUPPORTED: dict[str, str] = {
    "attention_chunk_size": "chunked local attention",
    "num_nextn_predict_layers": "multi-token-prediction layers",
}

# Keys the adapters apply (read by generate from config.json; a composition whose blocks cannot apply one stubs it)
# that a serving engine's kernels must apply as well: reported as info naming the effect, for the kernel author.
KERNEL_FACTS: dict[str, str] = {
    "swiglu_limit": "clamps the SwiGLU gate/up activations (gpt-oss)",
    "swiglu_alpha": "SwiGLU computes x·sigmoid(alpha·x) with this alpha, not plain SiLU (gpt-oss)",
    "clip_qkv": "clamps the q/k/v projections to ±clip_qkv (OLMo, DBRX)",
}


def comparable_keys(cv: ConfigView) -> set[str]:
    """Config keys that describe the model (not bookkeeping) and hold a value: what the novelty report compares.
    A null value (`"rope_scaling": null`) sets nothing, so it is nothing new."""
    out = set()
    for section, key in cv.all_keys():
        value = (cv.text if section else cv.raw).get(key)
        if not ignored(cv, section, key) and value is not None and not isinstance(value, dict):
            out.add(key)
    return out


def lint_config(cv: ConfigView) -> list[Finding]:
    findings: list[Finding] = []
    wrapper_keys: list[str] = []
    for section, key in cv.all_keys():
        where = f"{section}.{key}" if section else key
        if key in cv.used or key in IGNORED or training_only(key):
            continue
        value = (cv.text if section else cv.raw).get(key)
        if value is None or value is False or value == [] or value == {}:
            continue  # an absent-valued option changes nothing
        if wrapper_side(cv, section):
            if not key.endswith(("_config", "_token", "_token_id", "_token_index")):
                wrapper_keys.append(key)
            continue
        if key in KERNEL_FACTS:
            findings.append(
                info(
                    "config-kernel-fact",
                    f"{where} = {value!r}: {KERNEL_FACTS[key]}; generated adapters apply it (generate names it "
                    "as a kernel stub where no block does)",
                    "a serving engine's kernels must apply it too: validate compares their outputs",
                    file="config.json",
                )
            )
            continue
        if key in KNOWN_UNSUPPORTED:
            findings.append(
                warning(
                    "config-unmodelled-field",
                    f"{where} is set: {KNOWN_UNSUPPORTED[key]}; onboard's block library does not model it yet",
                    "make sure the serving kernels implement it; the adapter will need a kernel stub",
                    file="config.json",
                )
            )
            continue
        if section == "" and key in ("quantization_config", "text_config", "vision_config", "audio_config"):
            continue
        if key.endswith(("_config", "_token", "_token_id", "_token_index")) and section == "":
            continue  # nested tower configs and special tokens belong to other checks
        findings.append(
            warning(
                "config-unknown-field",
                f"unknown field {where}: check whether it changes the forward pass",
                "model it in onboard/inspect_checkpoint (architecture.py) or list it in config_lint.IGNORED with "
                "a reason",
                file="config.json",
            )
        )
    if wrapper_keys:
        findings.append(
            info(
                "wrapper-config-fields",
                f"the multimodal wrapper's own keys (outside {cv.text_section}): {', '.join(wrapper_keys)}; the "
                "language model's forward on text does not read them, and adapters serve the language model",
                "they shape image / audio inputs: check them when validating those inputs on the serving engine",
                file="config.json",
            )
        )
    return findings

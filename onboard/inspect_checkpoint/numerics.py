"""The numerics a config declares (or a family implies): rotary embedding, norms, activation, multipliers.

The family tables record what the modelling code does regardless of the config (Gemma's (1 + w) norm, tanh GELU).
"""

from __future__ import annotations

import math

from onboard.findings import Finding, warning
from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.inspect_checkpoint.tensor_index import shape_of
from onboard.names.config import RMS_NORM_EPS_KEYS, activation_name, spellings
from onboard.profile import Dims, Multipliers, Norms, Rope

# Families that apply the RMSNorm weight as (1 + w) (not Gemma 4).
NORM_OFFSET_TYPES = {"gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n_text", "recurrent_gemma", "vaultgemma",
                     "qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text", "t5gemma",
                     "nemotron"}  # fmt: skip
# Llama 4: use_qk_norm (default true) normalises q and k without a weight, on the rotary layers only.
WEIGHTLESS_QK_NORM_TYPES = {"llama4_text", "llama4"}
# Families whose norm is RMSNorm although the config key says layer_norm_epsilon (LFM2's `norm_eps`).
RMS_NORM_TYPES = {"mamba", "mamba2", "falcon_mamba", "nemotron_h", "bamba", "zamba", "zamba2", "jamba",
                  "lfm2", "lfm2_moe", "lfm3"}  # fmt: skip
# Families whose LayerNorms neither a bias tensor nor an eps key show (OLMo, DBRX).
LAYER_NORM_TYPES = {"olmo", "dbrx"}
# Families whose attention layers take no positional encoding, whatever config.json says (the Mamba layers carry
# the order).
NOPE_TYPES = {"nemotron_h", "jamba"}
# Families scaling the token embedding by sqrt(hidden_size) in the forward pass.
SQRT_EMBED_SCALE_TYPES = {"gemma", "gemma2", "gemma3", "gemma3_text", "recurrent_gemma", "vaultgemma", "gemma4_text",
                          "gemma4_unified_text"}  # fmt: skip

# Per-family activation forced by the modelling code regardless of the config value.
FORCED_ACTIVATION = {"gemma": "gelu_pytorch_tanh"}
# Layers normalising the residual sum, norm(x + f(x)), with no final norm (GPT-1; OPT with do_layer_norm_before off).
POST_LN_TYPES = {"openai-gpt"}


def rope_from_config(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> tuple[Rope | None, str]:
    mt = cv.model_type
    # (MPT's and DBRX's alibi / rope / rope_theta sit in attn_config: ConfigView reads it as the model's own keys)
    if cv.bool("alibi") or mt in ("bloom", "mpt") and not cv.get("rope"):
        return None, "alibi"
    if mt in ("mamba", "mamba2", "falcon_mamba", "rwkv"):
        return None, "none"
    # Granite-4.0's hybrids: "nope", or null as written, means no positional encoding at all.
    if cv.has("position_embedding_type") and cv.get("position_embedding_type") in (None, "nope", "none"):
        return None, "nope"
    if mt in NOPE_TYPES:
        return None, "nope"
    if cv.get("position_embedding_type") in ("absolute", "learned") or mt in (
        "gpt2",
        "gpt_bigcode",
        "opt",
        "gpt_neo",
        "biogpt",
        "xglm",
        "openai-gpt",
    ):
        return None, "absolute"
    if lm is not None and any(n.endswith(tn.LEARNED_POSITIONS) for n in lm):
        return None, "absolute"
    params = cv.get("rope_parameters")
    scaling = cv.get("rope_scaling")
    local_theta = cv.float("rope_local_base_freq")
    main: dict = {}
    if isinstance(params, dict) and params:
        typed = [v for v in params.values() if isinstance(v, dict)]
        # Per layer type (Gemma 3 in transformers 5); None for a type without RoPE (Ergo's global layers).
        if typed and all(v is None or isinstance(v, dict) for v in params.values()):
            main = dict(params.get("full_attention") or typed[0])
            local = params.get("sliding_attention")
            if isinstance(local, dict) and local.get("rope_theta") is not None:
                local_theta = float(local["rope_theta"])
        else:
            main = dict(params)
    if isinstance(scaling, dict) and scaling:
        main = {**scaling, **main}
    theta = main.pop("rope_theta", None)
    if not isinstance(theta, (int, float)) or isinstance(theta, bool):
        theta = None
    # Read beside rope_parameters too: transformers 5 configs keep a legacy top-level copy (Cohere2-MoE).
    top_theta = cv.float(*spellings("rope_theta"), default=None)
    if theta is None:
        theta = top_theta
    elif top_theta is not None and top_theta != theta:
        cv.conflict("rope_theta", "rope_parameters.rope_theta")
    rope_type = str(main.pop("rope_type", None) or main.pop("type", None) or "default")
    main.pop("type", None)
    rope_type = {"su": "longrope", "mrope": "default"}.get(rope_type, rope_type)
    partial = main.pop("partial_rotary_factor", None)
    if partial is None:
        partial = cv.float(*spellings("partial_rotary_factor"), default=1.0)
    rotary_dim = cv.int(*spellings("rotary_dim"))
    # A stored rotary `inv_freq` (Llama-derived code of transformers 4.3x persisted it: InternLM's first releases)
    # says rotary positions even when config.json names no rope key; its values (theta, the rotated share) are the
    # search's to try (generate_adapter/search_alternatives.rotary_alternatives).
    stored_inv_freq = lm is not None and any(n.endswith("rotary_emb.inv_freq") for n in lm)
    if theta is None and rope_type == "default" and rotary_dim is None and mt not in _ROPE_BY_DEFAULT:
        if not stored_inv_freq:
            return None, "none" if lm is None else "unknown"
    original = main.get("original_max_position_embeddings") or cv.int("original_max_position_embeddings")
    return (
        Rope(
            type=rope_type,
            theta=float(theta) if theta is not None else 10000.0,
            scaling={k: v for k, v in main.items() if k != "original_max_position_embeddings"},
            partial_rotary_factor=float(partial),
            rotary_dim=rotary_dim,
            original_max_position_embeddings=int(original) if original else None,
            local_theta=local_theta,
            interleaved=cv.bool("rope_interleave"),
        ),
        "rope",
    )


# Families that use RoPE even when their config carries no rope key (defaults live in the modelling code).
_ROPE_BY_DEFAULT = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "phi3", "falcon", "gpt_neox", "gptj",
                    "codegen", "persimmon", "stablelm", "phi", "deepseek_v2", "deepseek_v3", "cohere", "olmo"}  # fmt: skip


def norms_from_config(cv: ConfigView, lm: dict[str, TensorInfo] | None, dims: Dims) -> Norms:
    mt = cv.model_type
    rms_eps = cv.float(*RMS_NORM_EPS_KEYS)
    ln_eps = cv.float(*(key for key in spellings("rms_norm_eps") if key not in RMS_NORM_EPS_KEYS))
    kind = "rms" if rms_eps is not None or mt in RMS_NORM_TYPES else ("layernorm" if ln_eps is not None else "rms")
    kind = "layernorm" if mt in LAYER_NORM_TYPES else kind
    if lm is not None:
        norm_biases = [n for n in lm if tn.component(n) == "norms" and n.endswith(".bias")]
        if norm_biases and mt not in RMS_NORM_TYPES:
            kind = "layernorm"
    eps = rms_eps if rms_eps is not None else ln_eps
    qk = None
    shape = shape_of(lm, "q_norm.weight") or shape_of(lm, "q_layernorm.weight") or shape_of(lm, "query_layernorm")
    if shape:
        qk = "per_head" if shape[-1] == dims.head_dim and dims.head_dim != dims.hidden_size else "full"
        if len(shape) == 2:  # cohere: (heads, head_dim)
            qk = "per_head"
    elif mt in WEIGHTLESS_QK_NORM_TYPES:  # nothing stored shows it: an L2 (weightless RMS) norm, rotary layers only
        qk = "weightless" if cv.bool("use_qk_norm", default=True) else None
    elif lm is None and cv.bool(*QK_NORM_FLAGS):
        qk = "per_head"
    elif lm is None and mt in (
        "qwen3",
        "qwen3_moe",
        "qwen3_next",
        "gemma3",
        "gemma3_text",
        "olmo2",
        "olmoe",
        "glm4_moe",
        "exaone4",
        "smollm3_qk",
        "hunyuan_v1_moe",
        "hunyuan_v1_dense",
        "seed_oss_qk",
    ):
        qk = "full" if mt in ("olmo2", "olmoe") else "per_head"
    placement = "pre"
    if lm is not None:
        names = " ".join(n for n in lm if tn.in_layer(n))
        if "pre_feedforward_layernorm" in names and "post_feedforward_layernorm" in names:
            placement = "sandwich"
        elif "post_feedforward_layernorm" in names and "input_layernorm" not in names:
            placement = "post"
    elif mt in ("gemma2", "gemma3", "gemma3_text"):
        placement = "sandwich"
    elif mt in ("olmo2", "olmo3"):
        placement = "post"
    if mt in POST_LN_TYPES or cv.peek("do_layer_norm_before") is False:
        placement = "post_ln"
    offset = 1.0 if mt in NORM_OFFSET_TYPES else 0.0
    return Norms(kind=kind, eps=eps, offset=offset, qk_norm=qk, placement=placement)


QK_NORM_FLAGS = ("use_qk_norm", "qk_layernorm", "qk_norm", "use_qk_layernorm")
# Leaf names of stored q/k norms, per head or full width (StableLM's per-head `q_layernorm.norms.0`, Cohere's
# (heads, head_dim) `q_norm`, BailingMoE's `query_layernorm`).
QK_NORM_LEAVES = ("q_norm", "k_norm", "q_layernorm", "k_layernorm", "query_layernorm", "key_layernorm")


def qk_norm_flag_mismatch(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> list[Finding]:
    """config.json turns a QK-norm on, yet no layer stores its weights: transformers would run the norm with initial
    weights, while an adapter built from the tensors leaves it out."""
    flag = next((k for k in QK_NORM_FLAGS if cv.get(k) is True), None)
    if lm is None or flag is None or cv.model_type in WEIGHTLESS_QK_NORM_TYPES:
        return []
    if any(f".{leaf}." in name for name in lm for leaf in QK_NORM_LEAVES):
        return []
    return [
        warning(
            "config-tensor-mismatch",
            f"config.json sets {flag}: true but no layer stores a q/k norm ({', '.join(QK_NORM_LEAVES[:2])}, ...)",
            "the export dropped the QK-norm weights (re-export them) or the flag is stale (set it false): "
            "transformers would run the norm with initial weights",
            file="config.json",
        )
    ]


def activation_from_config(cv: ConfigView) -> str | None:
    return activation_name(cv.model_type, cv.get(*spellings("hidden_act")))


def _residual_multiplier(cv: ConfigView, dims: Dims) -> float | None:
    """Granite's residual_multiplier, or MiniCPM's scale_depth / sqrt(num_hidden_layers) (its branches' factor)."""
    explicit = cv.float("residual_multiplier")
    depth = cv.float("scale_depth")
    if explicit is not None or depth is None or not dims.num_layers:
        return explicit
    return depth / math.sqrt(dims.num_layers)


def multipliers_from_config(cv: ConfigView, dims: Dims) -> Multipliers:
    logit_scale = cv.float(*spellings("logit_scale"))
    scaling = cv.float("logits_scaling")
    if scaling and scaling != 1.0:
        logit_scale = 1.0 / scaling
    base = cv.float("dim_model_base")  # MiniCPM: logits of hidden / (hidden_size / dim_model_base)
    if logit_scale is None and base and dims.hidden_size:
        logit_scale = base / dims.hidden_size
    embed = cv.float(*spellings("embedding_multiplier"))
    if embed is None and cv.bool("mup_enabled", "scale_embedding") and dims.hidden_size:  # AFMoE's muP; BioGPT, XGLM
        embed = math.sqrt(dims.hidden_size)
    if embed is None and cv.model_type in SQRT_EMBED_SCALE_TYPES and dims.hidden_size:
        embed = math.sqrt(dims.hidden_size)
    return Multipliers(
        logit_scale=logit_scale,
        embedding_multiplier=embed,
        residual_multiplier=_residual_multiplier(cv, dims),
        attention_multiplier=cv.float("attention_multiplier"),  # not Llama 4's attn_scale: a NoPE temperature
        query_pre_attn_scalar=cv.float("query_pre_attn_scalar"),
        attn_logit_softcapping=cv.float(*spellings("attn_logit_softcapping")),
        final_logit_softcapping=cv.float(*spellings("final_logit_softcapping")),
        attention_in_multiplier=cv.float("attention_in_multiplier"),
        attention_out_multiplier=cv.float("attention_out_multiplier"),
        key_multiplier=cv.float("key_multiplier"),
        mlp_multipliers=cv.numbers("mlp_multipliers", 2),  # type: ignore[arg-type]
        nope_temperature=_nope_temperature(cv),
    )


def _nope_temperature(cv: ConfigView) -> tuple[float, float] | None:
    """Llama 4's temperature tuning (attn_temperature_tuning, with the config class's defaults); None when off."""
    if not cv.bool("attn_temperature_tuning"):
        return None
    return cv.float("floor_scale", default=8192.0) or 8192.0, cv.float("attn_scale", default=0.1) or 0.1

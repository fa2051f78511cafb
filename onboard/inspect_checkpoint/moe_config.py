"""Mixture-of-experts facts: expert counts, routing, shared experts, and which layers are MoE (from config)."""

from __future__ import annotations

from typing import Any

from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.names.config import spellings
from onboard.profile import Moe

# Routers that score with a sigmoid (DeepSeek-V3 style) rather than a softmax.
SIGMOID_ROUTER_TYPES = {"deepseek_v3", "glm4_moe", "dots1", "llama4_text", "llama4", "kimi_k2", "deepseek_v32",
                        "glm_moe_dsa", "minimax_m2", "bailing_moe", "afmoe", "glm4_moe_lite", "exaone_moe", "hy_v3",
                        "kolibri1", "solar_open", "mimo_v2_flash", "beam", "flint", "sarvam_moe",
                        "sarvam_mla",
                        # transformers 5.25's families whose config.json names no scoring rule (their routers call
                        # sigmoid; checked by running each tiny router in tests/inspect/test_moe_placement.py):
                        "axk1", "axk2", "bailing_hybrid", "dots3_note", "dots3_note_text", "ergo", "hy_v4",
                        "inkling", "inkling_text", "kimi_linear", "kolibri1_1", "laguna", "lfm2_moe", "minicpm5_moe",
                        "minimax_m3_vl", "minimax_m3_vl_text", "nemotron_h", "param2moe", "step3p5", "step3p7"}  # fmt: skip
# Softmax routers that still add a selection-only correction bias; any other router with one scores with a sigmoid.
SOFTMAX_BIAS_ROUTER_TYPES = {"ernie4_5_moe", "ernie4_5_vl_moe", "longcat_flash"}
_CORRECTION_BIAS_LEAVES = ("expert_bias", "router_bias")  # e_score_correction_bias's names in original checkpoints


def _int_or_text_entry(cv: ConfigView, *names: str) -> int | None:
    """cv.int, except that a per-modality list (ERNIE-4.5-VL: `moe_num_experts: [64, 64]`) gives its text entry."""
    value = cv.get(*names)
    if isinstance(value, list) and value and all(type(v) is int for v in value):
        return value[0]
    return cv.int(*names)


def moe_from_config(cv: ConfigView, lm: dict[str, TensorInfo] | None) -> Moe | None:
    experts = _int_or_text_entry(cv, *spellings("num_experts"))
    top_k = cv.int(*spellings("num_experts_per_tok"))
    if not isinstance(experts, int) or experts <= 1:
        return None
    top_k = max(top_k, 1) if isinstance(top_k, int) else 1
    shared = cv.int(*spellings("num_shared_experts"), default=0)
    # Granite's shared_mlp is sized by shared_intermediate_size (0: none)
    shared_size = cv.int(*spellings("shared_expert_intermediate_size"))
    if not shared and shared_size:
        shared = 1
    if not shared and lm and any("shared_expert" in n or "shared_mlp" in n for n in lm):
        shared = 1
    correction = bool(cv.get("topk_method") == "noaux_tc") or (
        lm is not None
        and any("e_score_correction_bias" in n or n.endswith(_CORRECTION_BIAS_LEAVES) or "moe_statics" in n for n in lm)
    )
    scoring = str(cv.get("scoring_func", "router_scoring_func", "expert_selection_fn") or "")  # the last: Cohere2-MoE
    if not scoring:
        sigmoid = cv.model_type in SIGMOID_ROUTER_TYPES or (
            correction and cv.model_type not in SOFTMAX_BIAS_ROUTER_TYPES
        )
        scoring = "sigmoid" if sigmoid else "softmax"
    norm_topk = cv.get(*spellings("norm_topk_prob"))
    return Moe(
        num_experts=experts,
        top_k=top_k,
        expert_intermediate_size=_int_or_text_entry(cv, *spellings("moe_intermediate_size"), "intermediate_size"),
        num_shared_experts=shared,
        shared_expert_intermediate_size=shared_size,
        scoring=scoring,
        correction_bias=correction,
        norm_topk_prob=bool(norm_topk) if norm_topk is not None else None,
        routed_scaling_factor=cv.float(*spellings("routed_scaling_factor")),
        n_group=cv.int("n_group"),
        topk_group=cv.int("topk_group"),
    )


# What transformers assumes when config.json leaves a placement key out (the config class's default, or the layout its
# __post_init__ derives); "first_k_dense_replace" stands for its aliases. tests/inspect/test_moe_placement.py checks
# each entry, and every family without one, against transformers' models.
PLACEMENT_DEFAULTS: dict[str, dict[str, Any]] = {
    **dict.fromkeys(("axk1", "axk2", "dots3_note_text", "ergo", "ernie4_5_moe", "exaone_moe", "glm4_moe",
                     "glm4_moe_lite", "hy_v3", "hy_v4", "kimi_linear", "laguna", "mimo_v2_flash", "minicpm5_moe",
                     "param2moe", "sarvam_mla", "sarvam_moe", "afmoe"), {"first_k_dense_replace": 1}),
    **dict.fromkeys(("bailing_hybrid", "lfm2_moe"), {"first_k_dense_replace": 2}),
    **dict.fromkeys(("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "beam", "step3p5"), {"first_k_dense_replace": 3}),
    **dict.fromkeys(("flint", "kolibri1_1"), {"mlp_only_layers": [0, 1]}),
    "jamba": {"expert_layer_period": 2, "expert_layer_offset": 1},
}  # fmt: skip


def _in_moe_period(i: int, freq: int | list | None, step: int | None) -> bool:
    """DeepSeek's `moe_layer_freq` counts from layer 0 (`i % freq == 0`; a list flags each layer); Qwen's, Llama 4's
    and ERNIE's step ends each period (`(i + 1) % step == 0`). 0 means no layer is MoE."""
    if isinstance(freq, list):
        if not (i < len(freq) and freq[i]):
            return False
    elif freq is not None and (freq <= 0 or i % freq != 0):
        return False
    return step is None or (step > 0 and (i + 1) % step == 0)


def _layer_list(value: Any) -> list[int] | None:
    """Explicit MoE layer indices: Llama 4's `moe_layers` list, Step-3.5's `moe_layers_enum` ("3,4,5" or a list)."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(str(v).strip().isdigit() for v in value):
        return [int(v) for v in value]
    return None


def moe_layers_from_config(cv: ConfigView, n: int) -> dict[int, bool]:
    defaults = PLACEMENT_DEFAULTS.get(cv.model_type, {})
    first_dense = cv.int(*spellings("first_k_dense_replace"), default=defaults.get("first_k_dense_replace", 0))
    last = cv.int("moe_layer_end_index")  # ERNIE: the last MoE layer, inclusive; -1 = the last layer
    freq = cv.get("moe_layer_freq")
    freq = freq if isinstance(freq, list) else cv.int("moe_layer_freq")
    step = cv.int("decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_interval")
    only_dense = cv.get("mlp_only_layers", default=defaults.get("mlp_only_layers", []))
    # Llama 4: explicit MoE layer indices, which override the interleave step; Step-3.5's legacy spelling of them
    listed = _layer_list(cv.get("moe_layers", "moe_layers_enum"))
    period = cv.int("expert_layer_period", default=defaults.get("expert_layer_period"))
    offset = cv.int("expert_layer_offset", default=defaults.get("expert_layer_offset", 0))
    out = {}
    for i in range(n):
        if period:
            out[i] = i % period == offset
        elif listed is not None:
            out[i] = i in listed
        else:
            in_range = i >= first_dense and (last is None or last == -1 or i <= last)
            out[i] = in_range and _in_moe_period(i, freq, step) and i not in only_dense
    mlp_types = cv.get("mlp_layer_types")
    if isinstance(mlp_types, list) and len(mlp_types) >= n:
        out = {i: str(mlp_types[i]).lower() in ("sparse", "moe", "hash_moe") for i in range(n)}
    blocks = cv.get("layers_block_type", "hybrid_override_pattern")
    if isinstance(blocks, str):  # Nemotron-H's original spelling: M Mamba, * attention, - MLP, E MoE
        blocks = [{"E": "moe", "-": "mlp"}.get(ch) for ch in blocks]  # M and * (no MLP) need no name
    if isinstance(blocks, list) and "moe" in blocks:
        # Nemotron-H: MoE and MLP are blocks of their own; a Mamba or attention block has no MLP (left out: "none")
        out = {i: blocks[i] == "moe" for i in range(min(n, len(blocks))) if blocks[i] in ("moe", "mlp")}
    return out

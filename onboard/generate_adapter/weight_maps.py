"""Checkpoint tensor names -> adapter parameters, per family, as data.

`WEIGHT_MAPS[model_type]`: the rules the adapter's loader applies (`WeightRule`, see loader.py); runtime names no
rule mentions load from the checkpoint tensor of the same name. `CHECKPOINT_TENSORS[model_type]`: regexes of every
checkpoint tensor the adapter knows how to use; a profile tensor matching none of them is a feature the block
library lacks (the generator scaffolds a kernel stub for it). `DROPPED`: tensors deliberately left unused.
"""

from __future__ import annotations

from onboard.generate_adapter.weight_rule import WeightRule

L = "model.layers.{i}."
ATTN = L + "self_attn."


def _fuse(target: str, parts: tuple[str, ...], prefix: str, suffixes: tuple[str, ...] = ("weight", "bias")):
    """Row-wise fusion rules (one per suffix): prefix+target.<s> <- cat(prefix+part.<s> for part in parts)."""
    return tuple(WeightRule(f"{prefix}{target}.{s}", tuple(f"{prefix}{p}.{s}" for p in parts), "cat") for s in suffixes)


QKV = _fuse("qkv_proj", ("q_proj", "k_proj", "v_proj"), ATTN)
GATE_UP = _fuse("gate_up_proj", ("gate_proj", "up_proj"), L + "mlp.")


def _experts(moe: str, gate: str, up: str, down: str, router: str) -> tuple[WeightRule, ...]:
    """Per-expert 2-D checkpoint tensors -> the MoE block's stacked experts_gate_up / experts_down and router."""
    p = f"{L}{moe}."
    return (
        WeightRule(
            p + "experts_gate_up", (f"{p}experts.{{e}}.{gate}.weight", f"{p}experts.{{e}}.{up}.weight"), "stack"
        ),
        WeightRule(p + "experts_down", (f"{p}experts.{{e}}.{down}.weight",), "stack"),
        WeightRule(p + "router.weight", (f"{p}{router}.weight",)),
    )


QWEN_EXPERTS = _experts("mlp", "gate_proj", "up_proj", "down_proj", "gate")
MIXTRAL_EXPERTS = _experts("block_sparse_moe", "w1", "w3", "w2", "gate")
SHARED_EXPERT = _fuse("gate_up_proj", ("gate_proj", "up_proj"), L + "mlp.shared_expert.", ("weight",))

DENSE = QKV + GATE_UP
WEIGHT_MAPS: dict[str, tuple[WeightRule, ...]] = {
    "llama": DENSE,
    "mistral": DENSE,
    "mixtral": QKV + MIXTRAL_EXPERTS,
    "qwen2": DENSE,
    "qwen2_moe": DENSE
    + QWEN_EXPERTS
    + (
        WeightRule(L + "mlp.shared.gate_up_proj.weight", SHARED_EXPERT[0].sources, "cat"),
        WeightRule(L + "mlp.shared.down_proj.weight", (L + "mlp.shared_expert.down_proj.weight",)),
        WeightRule(L + "mlp.shared_gate.weight", (L + "mlp.shared_expert_gate.weight",)),
    ),
    "qwen3": DENSE,
    "qwen3_moe": DENSE + QWEN_EXPERTS,
    "gemma": DENSE,
    "gemma2": DENSE,
    "gemma3_text": DENSE,
    "phi3": (),  # qkv_proj and gate_up_proj are fused in phi3 checkpoints already
    "phimoe": QKV + MIXTRAL_EXPERTS,
    "deepseek_v3": GATE_UP
    + QWEN_EXPERTS
    + (
        WeightRule(L + "mlp.e_score_correction_bias", (L + "mlp.gate.e_score_correction_bias",)),
        WeightRule(
            L + "mlp.shared.gate_up_proj.weight",
            (L + "mlp.shared_experts.gate_proj.weight", L + "mlp.shared_experts.up_proj.weight"),
            "cat",
        ),
        WeightRule(L + "mlp.shared.down_proj.weight", (L + "mlp.shared_experts.down_proj.weight",)),
    ),
    "gpt_oss": QKV,  # experts keep the checkpoint's stacked, interleaved layout (GptOssMoE)
    "olmo2": DENSE,
    "olmoe": QKV + QWEN_EXPERTS,
    "granite": DENSE,
    "granitemoe": QKV
    + (
        WeightRule(L + "block_sparse_moe.experts_gate_up", (L + "block_sparse_moe.input_linear.weight",)),
        WeightRule(L + "block_sparse_moe.experts_down", (L + "block_sparse_moe.output_linear.weight",)),
        WeightRule(L + "block_sparse_moe.router.weight", (L + "block_sparse_moe.router.layer.weight",)),
    ),
    "cohere": DENSE,
    "starcoder2": QKV
    + tuple(
        WeightRule(f"{L}mlp.{ours}.{s}", (f"{L}mlp.{theirs}.{s}",))
        for ours, theirs in (("up_proj", "c_fc"), ("down_proj", "c_proj"))
        for s in ("weight", "bias")
    ),
    "glm4": QKV,  # gate_up_proj is fused in glm4 checkpoints already
    "smollm3": DENSE,
    "ernie4_5": DENSE,
    "exaone4": DENSE,
    "apertus": QKV,
}

# Checkpoint tensors every adapter may drop: rotary caches some exporters save.
DROPPED: tuple[str, ...] = (r".*rotary_emb\.inv_freq", r".*\.attn\.masked_bias", r".*\.attn\.bias")

# Known checkpoint tensor names (regexes over names with layer/expert numbers; `{}` in profile templates is
# matched as a number).
_LAYER = r"model\.layers\.\d+\."
_TOP = (r"model\.embed_tokens\.weight", r"model\.norm\.(weight|bias)", r"lm_head\.(weight|bias)")
_QKVO = _LAYER + r"self_attn\.(q_proj|k_proj|v_proj|o_proj|qkv_proj)\.(weight|bias)"
_QK_NORM = _LAYER + r"self_attn\.[qk]_norm\.weight"
_MLP = _LAYER + r"mlp\.(gate_proj|up_proj|down_proj|gate_up_proj)\.(weight|bias)"
_NORMS = _LAYER + r"(input_layernorm|post_attention_layernorm|pre_feedforward_layernorm|post_feedforward_layernorm|" \
    r"post_self_attn_layernorm|post_mlp_layernorm|attention_layernorm|feedforward_layernorm)\.(weight|bias)"  # fmt: skip
_QWEN_MOE = _LAYER + r"mlp\.(gate\.weight|experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight)"
_MIXTRAL_MOE = _LAYER + r"block_sparse_moe\.(gate\.weight|experts\.\d+\.w\d\.weight)"
_COMMON = (*_TOP, _QKVO, _QK_NORM, _MLP, _NORMS)

CHECKPOINT_TENSORS: dict[str, tuple[str, ...]] = {mt: _COMMON for mt in WEIGHT_MAPS}
CHECKPOINT_TENSORS.update(
    {
        "mixtral": (*_COMMON, _MIXTRAL_MOE),
        "phimoe": (*_COMMON, _MIXTRAL_MOE),
        "qwen2_moe": (
            *_COMMON,
            _QWEN_MOE,
            _LAYER + r"mlp\.(shared_expert\.(gate|up|down)_proj|shared_expert_gate)\.weight",
        ),
        "qwen3_moe": (*_COMMON, _QWEN_MOE),
        "olmoe": (*_COMMON, _QWEN_MOE),
        "deepseek_v3": (
            *_COMMON,
            _QWEN_MOE,
            _LAYER + r"mlp\.(gate\.e_score_correction_bias|shared_experts\.(gate|up|down)_proj\.weight)",
            _LAYER
            + r"self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|q_a_layernorm|kv_a_layernorm)\.weight",
            # multi-token-prediction layers past num_hidden_layers: dropped by the adapter (inference needs none)
            _LAYER + r"(enorm|hnorm|eh_proj|embed_tokens|shared_head\.(norm|head))\.weight",
        ),
        "gpt_oss": (
            *_COMMON,
            _LAYER + r"self_attn\.sinks",
            _LAYER + r"mlp\.(router\.(weight|bias)|experts\.(gate_up_proj|down_proj)(_bias)?)",
        ),
        "granitemoe": (
            *_COMMON,
            _LAYER + r"block_sparse_moe\.(input_linear|output_linear|router\.layer)\.weight",
        ),
        "starcoder2": (*_COMMON, _LAYER + r"mlp\.(c_fc|c_proj)\.(weight|bias)"),
        "apertus": (*_COMMON, _LAYER + r"mlp\.act_fn\.(alpha_p|alpha_n|beta|eps)"),
    }
)

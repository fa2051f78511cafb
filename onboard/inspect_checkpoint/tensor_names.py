"""What a tensor name says: which layer it belongs to, which component, which tower.

Names are reduced to templates (`model.layers.{}.mlp.experts.{}.w1.weight`) and classified once per template, so a
checkpoint with 50k tensors costs a few hundred regex matches, not 50k.
"""

from __future__ import annotations

import re
from functools import lru_cache

_DIGITS = re.compile(r"(?<=\.)\d+(?=\.|$)")
# The decoder-layer index: the first number after a layer container name.
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer|block)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")

TOWER_PREFIXES = {
    "vision": ("vision_tower", "vision_model", "visual", "vision_encoder", "vision", "image_encoder", "vit",
               "multi_modal_projector", "mm_projector", "vision_projection", "image_newline", "patch_embed",
               "embed_vision",  # Gemma 3n / 4: the projection of vision soft tokens into the text embedding space
               "connector",  # Idefics3 / SmolVLM: the pixel-shuffle projector of image features
               "image_tower", "video_tower", "aligner",  # Video-LLaVA's two towers; DeepSeek-VL's projector
               # projectors by other names: MiniCPM-V's merger, InternVL-style mlp1, VideoLLaMA3's projector, BLIP-2's
               # Q-Former (its query tokens and language projection), Ovis' visual tokenizer and its embedding table
               "merger", "mlp1", "projector", "qformer", "query_tokens", "language_projection", "visual_tokenizer",
               "vte"),
    "audio": ("audio_tower", "audio_model", "audio_encoder", "audio", "speech_encoder", "audio_projection",
              "embed_audio"),
}  # fmt: skip
# A learned per-head logit that joins the attention softmax (gpt-oss's `sinks`), by the names checkpoints store it
# under: transformers' conversion_mapping loads flint's `softmax_offset` and mimo_v2_flash's `attention_sink_bias`
# as `sinks`, the same parameter.
# Learned absolute position tables (GPT-2's wpe, OPT's embed_positions, GPT-1's positions_embed).
LEARNED_POSITIONS = ("wpe.weight", "embed_positions.weight", "positions_embed.weight")
SINK_NAMES = ("sinks", "softmax_offset", "attention_sink_bias")
_LM_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.text_model.", "text_model.",
                "llm.")  # fmt: skip  # Ovis: llm.model.layers…, llm.lm_head

# Ordered: the first rule whose regex matches the template decides the component.
_COMPONENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (component, re.compile(pattern))
    for component, pattern in (
        ("quant_scales", r"(weight_scale_inv|weight_scale|input_scale|_scales|\.scales|qzeros|g_idx|weight_zero_point|activation_scale)$"),
        ("mtp", r"(^|\.)(mtp|nextn|mtp_layers|eh_proj|enorm|hnorm)(\.|$)"),
        # Ergo's original names: `feed_forward.gate_kernel` ([hidden, experts]) and `router_bias` (a buffer).
        ("router", r"(\.router\.|\.gate\.(weight|bias|e_score_correction_bias)$|e_score_correction_bias|\.router$|expert_bias$|router_bias$|\.gate_kernel$|moe_statics|\.gate\.wg\.|\.block_sparse_moe\.gate\.)"),
        ("shared_experts", r"(shared_expert|shared_experts|shared_mlp|\.shared\.|\.shared_(gate_up|gate|up|down)_proj$)"),
        # JetMoE's attention experts (MoA) add one bias after mixing them: it runs for every token, like o_proj's.
        ("attention", r"\.self_attention\.experts\.bias$"),
        # Stacked experts ([experts, out, in]) of JetMoE and Granite-MoE checkpoints: `mlp.input_linear` /
        # `block_sparse_moe.output_linear` (Granite's shared MLP uses the same names, matched by the rule above).
        # A bare (no `.weight`) projection of the MLP is a raw parameter, which only stacked experts are: Ergo's
        # original `feed_forward.up_proj` ([experts, hidden, inter]); a dense MLP's projections are nn.Linear.
        ("experts", r"(\.experts\.|\.experts$|\.expert_|\.(input_linear|output_linear)\.weight$|\.(feed_forward|mlp|ffn)\.(gate_up|gate|up|down)_proj$)"),
        ("embedding", r"(^|\.)(embed_tokens|tokens_embed|wte|wpe|positions_embed|word_embeddings|embed_in|tok_embeddings|embed_positions|position_embeddings|embeddings|embedding|emb|embed|input_embedding|token_embedding|embed_tokens_per_layer)(\.|$)"),
        ("head", r"(^|\.)(lm_head|embed_out|output|score|lm_heads|unembed)\.(weight|bias)$"),
        # DeepSeek Sparse Attention's indexer, its LayerNorm'd key included: part of attention, not a layer norm
        # (its k_norm's bias would otherwise make an RMSNorm model's norms look like LayerNorms).
        ("attention", r"\.indexer\."),
        ("norms", r"(norm|ln_\w*|ln\d*|layernorm|layer_norm|rms)[\w]*\.(weight|bias)$"),
        ("ssm", r"(\.mixer\.(A_log|D|dt_bias|conv1d|in_proj|out_proj|x_proj|dt_proj|norm)|\.mamba\.|\.ssm\.|\.linear_attn\.|A_log$|dt_bias$|\.conv\.|conv1d|\.short_conv\.|recurrent|\.rg_lru\.|\.temporal_)"),
        ("attention", r"(self_attn|self_attention|\.attention\.|\.attn\.|\.attn_|multi_head_attention|q_proj|k_proj|v_proj|o_proj|qkv|query_key_value|c_attn|Wqkv|\.sinks$|kv_a_proj|kv_b_proj|q_a_proj|q_b_proj|\.mixer\.(q|k|v|o)_proj)"),
        ("mlp", r"(\.mlp\.|feed_forward|\.ffn\.|\.ffn_|c_fc|\.fc1\.|\.fc2\.|\.fc_in\.|\.fc_out\.|gate_proj|up_proj|down_proj|dense_h_to_4h|dense_4h_to_h|\.w1\.|\.w2\.|\.w3\.|\.mixer\.(up|down|gate)_proj)"),
    )
)  # fmt: skip


def template(name: str) -> str:
    """Replace every dotted integer (layer, expert index) by `{}`."""
    return _DIGITS.sub("{}", name)


def layer_index(name: str) -> int | None:
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def tower_of(name: str) -> str | None:
    """`vision` / `audio` for tensors of a non-language tower, else None."""
    return _tower_of_template(template(name))


@lru_cache(maxsize=8192)
def _tower_of_template(tmpl: str) -> str | None:
    stripped = tmpl[6:] if tmpl.startswith("model.") else tmpl
    head = stripped.split(".", 1)[0]
    for tower, prefixes in TOWER_PREFIXES.items():
        if head in prefixes or any(head.startswith(p + "_") for p in prefixes):
            return tower
    return None


def lm_prefix(name: str) -> str | None:
    """The multimodal wrapper prefix `name` is stored under (`language_model.model.`, `llm.`, …), or None."""
    return next((prefix for prefix in _LM_PREFIXES if name.startswith(prefix)), None)


def strip_lm_prefix(name: str) -> str:
    """`model.language_model.layers.0…` → `model.layers.0…` so multimodal wrappers read like text models."""
    for prefix in _LM_PREFIXES:
        if name.startswith(prefix):
            rest = name[len(prefix) :]
            return rest if rest.startswith(("lm_head", "model.")) else "model." + rest
    return name


def language_model_name(name: str) -> str | None:
    """The name a text model's adapter reads for checkpoint tensor `name`: a multimodal wrapper's prefix removed
    (`language_model.model.layers.0…` → `model.layers.0…`), None for a vision / audio tower's tensor."""
    return None if tower_of(name) is not None else strip_lm_prefix(name)


@lru_cache(maxsize=8192)
def component_of_template(tmpl: str) -> str:
    tower = _tower_of_template(tmpl)
    if tower:
        return tower
    for component, pattern in _COMPONENT_RULES:
        if pattern.search(tmpl):
            return component
    return "other"


def component(name: str) -> str:
    return component_of_template(template(name))


@lru_cache(maxsize=8192)
def layer_role(tmpl: str) -> str | None:
    """Coarse mixer kind a tensor template reveals: mla | attention | ssm | linear | conv, or None."""
    if re.search(r"kv_a_proj|kv_b_proj|kv_a_layernorm", tmpl):
        return "mla"
    if re.search(r"(\.linear_attn\.|\.rg_lru\.)", tmpl):
        return "linear"
    if re.search(r"(\.conv\.(in_proj|out_proj|conv)|\.short_conv\.)", tmpl):
        return "conv"
    if re.search(r"(\.mixer\.(A_log|D|dt_bias|conv1d|in_proj|x_proj|dt_proj)|\.mamba\.|\.ssm\.)", tmpl):
        return "ssm"
    if re.search(
        r"(self_attn|self_attention|\.attention\.|\.attn\.|multi_head_attention|\.mixer\.(q|k|v|o)_proj|\.mixer\.qkv|\.temporal_block\.(q|k|v|o)_proj)",
        tmpl,
    ):
        return "attention"
    return None

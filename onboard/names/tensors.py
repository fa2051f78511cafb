"""How checkpoints name their tensors: where the decoder layers are, which tower or wrapper prefix a name is under,
and the role each tensor plays. Inspect (tensor_names.py: components, mixer kinds) and generate (weight_inference.py:
the weight map) both classify names through these tables.

**Adding a naming variant is one data entry**: a row in `LAYER_PATTERNS` (inside a decoder layer) or `TOP_PATTERNS`
(outside the layers) naming the new spelling and its role. Generate then maps the tensor to its block, and inspect
counts it under the role's component (`ROLE_COMPONENTS`); tests/names/test_new_pattern.py is a worked example.
A role's `.weight` and `.bias` are kept apart by the `param` group, so its bias is found next to its weight.
"""

from __future__ import annotations

import re

# Where the decoder layers live: `<prefix><container>.<index>.<rest>` (`model.layers.3.`, GPT-2's `transformer.h.3.`).
LAYER_CONTAINERS = ("layers", "h", "blocks", "layer", "block")
_CONTAINER = "|".join(LAYER_CONTAINERS)
LAYER_INDEX = re.compile(rf"(?:^|\.)(?:{_CONTAINER})\.(\d+)\.")
"""A tensor name's decoder-layer index: the first number after a layer container."""
LAYER_TEMPLATE = re.compile(rf"(?:^|\.)(?:{_CONTAINER})\.\{{\}}\.")
"""A template inside a decoder layer (`{}` for every number)."""
LAYER_NAME = re.compile(rf"(?P<prefix>(?:\w+\.)*?)(?P<container>{_CONTAINER})\.\{{\}}\.(?P<rest>.+)")
"""A per-layer template split into its prefix, container and the in-layer name the role patterns match."""

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
# Learned absolute position tables (GPT-2's wpe, OPT's embed_positions, GPT-1's positions_embed).
LEARNED_POSITIONS = ("wpe.weight", "embed_positions.weight", "positions_embed.weight")
# gpt-oss's attention sinks (a learned per-head logit in the softmax) under flint's and mimo_v2_flash's names too
SINK_NAMES = ("sinks", "softmax_offset", "attention_sink_bias")
LM_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.text_model.", "text_model.",
                "llm.")  # fmt: skip  # Ovis: llm.model.layers…, llm.lm_head

# Inspect's coarse components (parameter counts): COMPONENT_FIRST whatever the role, then the role's
# (ROLE_COMPONENTS), then the first of COMPONENT_RULES whose regex matches.
COMPONENT_FIRST: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (component, re.compile(pattern))
    for component, pattern in (
        (
            "quant_scales",
            r"(weight_scale_inv|weight_scale|input_scale|_scales|\.scales|qzeros|g_idx|weight_zero_point|activation_scale)$",
        ),
        ("mtp", r"(^|\.)(mtp|nextn|mtp_layers|eh_proj|enorm|hnorm)(\.|$)"),
    )
)
COMPONENT_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (component, re.compile(pattern))
    for component, pattern in (
        # Ergo's original names: `feed_forward.gate_kernel` ([hidden, experts]) and `router_bias` (a buffer).
        (
            "router",
            r"(\.router\.|\.gate\.(weight|bias|e_score_correction_bias)$|e_score_correction_bias|\.router$|expert_bias$|router_bias$|\.gate_kernel$|moe_statics|\.gate\.wg\.|\.block_sparse_moe\.gate\.)",
        ),
        (
            "shared_experts",
            r"(shared_expert|shared_experts|shared_mlp|\.shared\.|\.shared_(gate_up|gate|up|down)_proj$)",
        ),
        # JetMoE's attention experts (MoA) add one bias after mixing them: it runs for every token, like o_proj's.
        ("attention", r"\.self_attention\.experts\.bias$"),
        # Stacked experts ([experts, out, in]) of JetMoE and Granite-MoE checkpoints: `mlp.input_linear` /
        # `block_sparse_moe.output_linear` (Granite's shared MLP uses the same names, matched by the rule above).
        # A bare (no `.weight`) projection of the MLP is a raw parameter, which only stacked experts are: Ergo's
        # original `feed_forward.up_proj` ([experts, hidden, inter]); a dense MLP's projections are nn.Linear.
        (
            "experts",
            r"(\.experts\.|\.experts$|\.expert_|\.(input_linear|output_linear)\.weight$|\.(feed_forward|mlp|ffn)\.(gate_up|gate|up|down)_proj$)",
        ),
        (
            "embedding",
            r"(^|\.)(embed_tokens|tokens_embed|wte|wpe|positions_embed|word_embeddings|embed_in|tok_embeddings|embed_positions|position_embeddings|embeddings|embedding|emb|embed|input_embedding|token_embedding|embed_tokens_per_layer)(\.|$)",
        ),
        ("head", r"(^|\.)(lm_head|embed_out|output|score|lm_heads|unembed)\.(weight|bias)$"),
        # DeepSeek Sparse Attention's indexer, its LayerNorm'd key included: part of attention, not a layer norm
        # (its k_norm's bias would otherwise make an RMSNorm model's norms look like LayerNorms).
        ("attention", r"\.indexer\."),
        ("norms", r"(norm|ln_\w*|ln\d*|layernorm|layer_norm|rms)[\w]*\.(weight|bias)$"),
        (
            "ssm",
            r"(\.mixer\.(A_log|D|dt_bias|conv1d|in_proj|out_proj|x_proj|dt_proj|norm)|\.mamba\.|\.ssm\.|\.linear_attn\.|A_log$|dt_bias$|\.conv\.|conv1d|\.short_conv\.|recurrent|\.rg_lru\.|\.temporal_)",
        ),
        (
            "attention",
            r"(self_attn|self_attention|\.attention\.|\.attn\.|\.attn_|multi_head_attention|q_proj|k_proj|v_proj|o_proj|qkv|query_key_value|c_attn|Wqkv|\.sinks$|kv_a_proj|kv_b_proj|q_a_proj|q_b_proj|\.mixer\.(q|k|v|o)_proj)",
        ),
        (
            "mlp",
            r"(\.mlp\.|feed_forward|\.ffn\.|\.ffn_|c_fc|\.fc1\.|\.fc2\.|\.fc_in\.|\.fc_out\.|gate_proj|up_proj|down_proj|dense_h_to_4h|dense_4h_to_h|\.w1\.|\.w2\.|\.w3\.|\.mixer\.(up|down|gate)_proj)",
        ),
    )
)


# `mixer`: Nemotron-H's one block per layer, whichever it is (attention, MLP or MoE; Mamba's parts are matched first)
_ATTN = r"(?:self_attn|attn|attention|self_attention|attn\.attention|multi_head_attention|norm_attn_norm\.attn|mixer)"
_MLP = r"(?:mlp|feed_forward|ffn|mlp_block|mixer)"
_MOE = r"(?:mlp|feed_forward|block_sparse_moe|moe|ffn|mixer)"
_P = r"\.(?P<param>weight|bias)"

# (regex over the in-layer name, role). Order matters: the first match wins.
LAYER_PATTERNS: tuple[tuple[str, str], ...] = (
    # --- Mamba-1 / -2 (`mamba`, Nemotron-H's `mixer`): first, as a `mixer.out_proj` is Mamba's, not attention's ---
    (rf"(?:mamba|mixer)\.(?P<part>in_proj|conv1d|out_proj|norm|x_proj|dt_proj|dt_layernorm|b_layernorm|c_layernorm)"
     rf"{_P}", "mamba"),
    (r"(?:mamba|mixer)\.(?P<part>dt_bias|A_log|D)", "mamba"),
    # --- attention -------------------------------------------------------------------------------------------
    (rf"{_ATTN}\.(?:q_proj|wq|query|Wq){_P}", "attn.q"),
    (rf"{_ATTN}\.(?:k_proj|wk|key|Wk){_P}", "attn.k"),
    (rf"{_ATTN}\.(?:v_proj|wv|value|Wv){_P}", "attn.v"),
    (rf"{_ATTN}\.(?:qkv_proj|Wqkv|wqkv|qkv|c_attn){_P}", "attn.qkv"),
    (rf"{_ATTN}\.query_key_value{_P}", "attn.qkv_grouped"),
    (rf"{_ATTN}\.(?:o_proj|wo|Wo|out_proj|dense|c_proj){_P}", "attn.o"),
    (rf"{_ATTN}\.dense_(?P<param>bias)", "attn.o"),  # GPT-NeoX-Japanese: the output bias, last layer only
    (rf"{_ATTN}\.(?:q_norm|q_layernorm|query_layernorm)\.norms\.\{{\}}{_P}", "attn.q_norm_heads"),
    (rf"{_ATTN}\.(?:k_norm|k_layernorm|key_layernorm)\.norms\.\{{\}}{_P}", "attn.k_norm_heads"),
    (rf"{_ATTN}\.(?:q_norm|q_layernorm|query_layernorm){_P}", "attn.q_norm"),
    (rf"{_ATTN}\.(?:k_norm|k_layernorm|key_layernorm){_P}", "attn.k_norm"),
    (rf"{_ATTN}\.(?:{'|'.join(SINK_NAMES)})", "attn.sinks"),
    (rf"{_ATTN}\.attn_sub_norm{_P}", "attn.sub_norm"),  # BitNet: RMSNorm on the attention output before o_proj
    (rf"{_ATTN}\.(?P<part>lambda_q1|lambda_k1|lambda_q2|lambda_k2)", "attn.lambda"),  # DiffLlama: differential
    (rf"{_ATTN}\.gate_proj\.weight", "attn.gate"),  # AFMoE: sigmoid(gate_proj(x)) gates the attention output
    (rf"{_ATTN}\.g_proj\.weight", "attn.g_gate"),  # Laguna's output gate: its function only the code says
    (rf"{_ATTN}\.gate_bias", "attn.gate_bias"),  # Beam: a bias per head on gate_proj's gate
    (rf"{_ATTN}\.(?P<part>q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|q_a_layernorm|kv_a_layernorm|"
     rf"k_rope_only_layernorm){_P}", "mla"),  # dots.llm3: an RMSNorm on the shared rotary key head
    (rf"{_ATTN}\.indexer\.(?P<part>wq_b|wk|k_norm|weights_proj){_P}", "mla.indexer"),  # DeepSeek sparse attention
    # --- Gated DeltaNet, the linear-attention mixer (Qwen3-Next's grouped projections, Qwen3.5's separate ones) -
    (rf"linear_attn\.(?P<part>in_proj_qkvz|in_proj_ba|in_proj_qkv|in_proj_z|in_proj_b|in_proj_a|in_proj|conv1d|"
     rf"out_proj|norm|out_norm){_P}", "deltanet"),  # Lara-mini: one in_proj [q|k|v|z|b|a], the gated norm out_norm
    # FLA's layout (OLMo-hybrid): q / k / v / a / b / g projections, a convolution per q / k / v, o_norm, o_proj
    (rf"linear_attn\.(?P<part>q_proj|k_proj|v_proj|a_proj|b_proj|g_proj|o_proj|q_conv1d|k_conv1d|v_conv1d|o_norm)"
     rf"{_P}", "deltanet"),
    (r"linear_attn\.(?P<part>dt_bias|A_log)", "deltanet"),
    # --- gated short convolution, the token mixer of some layers (LFM2's `conv` layers) -------------------------
    (rf"(?:conv|short_conv)\.(?P<part>in_proj|conv|out_proj){_P}", "conv"),
    # --- Gemma 4's routed experts beside the dense MLP: at the layer's own level, with their own norms ------------
    (r"(?P<part>experts\.gate_up_proj|experts\.down_proj|router\.proj\.weight|router\.scale|router\.per_expert_scale|"
     r"post_feedforward_layernorm_1\.weight|post_feedforward_layernorm_2\.weight|pre_feedforward_layernorm_2\.weight)",
     "moe_beside"),
    # --- mixture of experts (before the dense MLP: expert and router names reuse gate/up/down) -----------------
    # DBRX: every expert's gate (w1), up (v1) and down (w2) stacked by rows, [experts x intermediate, hidden] each
    (r"ffn\.experts\.mlp\.(?P<part>w1|v1|w2)", "moe.experts_rows"),
    (rf"{_MOE}\.(?:gate|router|router\.layer|gate\.wg|router\.gate)\.weight", "moe.router"),
    (rf"{_MOE}\.router\.bias", "moe.router_linear_bias"),  # gpt-oss: a bias on the router's logits
    (rf"{_MOE}\.experts\.(?P<part>gate_up_proj|down_proj)_bias", "moe.experts.bias"),  # gpt-oss: per-expert biases
    (rf"{_MOE}\.(?:gate\.|experts\.)?(?:moe_statics\.)?(?:e_score_correction_bias|expert_bias|router\.expert_bias|router_bias)", "moe.router_bias"),
    (rf"{_MOE}\.experts\.\{{\}}\.(?:gate_proj|w1|wi_0)\.weight", "moe.expert.gate"),
    (rf"{_MOE}\.experts\.\{{\}}\.(?:up_proj|w3|wi_1)\.weight", "moe.expert.up"),
    (rf"{_MOE}\.experts\.\{{\}}\.(?:down_proj|w2|wo)\.weight", "moe.expert.down"),
    (rf"{_MOE}\.(?:experts\.gate_up_proj|experts\.fc1|input_linear)(?:\.weight)?", "moe.experts.gate_up"),
    (rf"{_MOE}\.(?:experts\.down_proj|experts\.fc2|output_linear)(?:\.weight)?", "moe.experts.down"),
    (rf"{_MOE}\.(?:shared_experts?|shared_mlp)\.(?:gate_proj|w1)\.weight", "moe.shared.gate"),
    (rf"{_MOE}\.(?:shared_experts?|shared_mlp)\.(?:up_proj|w3)\.weight", "moe.shared.up"),
    (rf"{_MOE}\.(?:shared_experts?|shared_mlp)\.(?:down_proj|w2|output_linear)\.weight", "moe.shared.down"),
    (rf"{_MOE}\.(?:shared_experts?|shared_mlp)\.(?:gate_up_proj|input_linear)\.weight", "moe.shared.gate_up"),
    (r"shared_mlp\.input_linear\.weight", "moe.shared.gate_up"),
    (r"shared_mlp\.output_linear\.weight", "moe.shared.down"),
    (rf"{_MOE}\.shared_expert_gate\.weight", "moe.shared_gate"),
    # --- dense MLP ---------------------------------------------------------------------------------------------
    (rf"{_MLP}\.(?:gate_proj|w1|c_fc_0|wi_0){_P}", "mlp.gate"),
    (rf"{_MLP}\.(?:up_proj|w3|c_fc_1|wi_1|fc1|fc_in|c_fc|dense_h_to_4h|up){_P}", "mlp.up"),
    (rf"(?:fc1){_P}", "mlp.up"),
    (rf"{_MLP}\.(?:down_proj|w2|c_proj|fc2|fc_out|dense_4h_to_h|wo|Wo|down){_P}", "mlp.down"),
    (rf"(?:fc2){_P}", "mlp.down"),
    (rf"{_MLP}\.(?:gate_up_proj|Wi){_P}", "mlp.gate_up"),  # ModernBERT's Wi: [activated; gate] rows
    (rf"{_MLP}\.act_fn\.(?P<part>alpha_p|alpha_n|beta|eps)", "mlp.act"),
    (rf"{_MLP}\.ffn_sub_norm{_P}", "mlp.sub_norm"),  # BitNet: RMSNorm on act(gate) * up before down_proj
    # --- norms, by position --------------------------------------------------------------------------------------
    (rf"(?:input_layernorm|ln_1|ln_attn|attention_norm|self_attn_layer_norm|attention_layernorm|operator_norm|"
     rf"norm_attn_norm\.norm_1|norm_1|attn_norm|attention_layer_norm|norm){_P}", "norm.input"),  # norm_1: MPT
    # OLMo-core's feedforward_layer_norm is transformers' post_attention_layernorm: placed by context (compose_norms)
    (rf"(?:post_attention_layernorm|feedforward_layer_norm){_P}", "norm.post_attention"),
    (rf"(?:pre_feedforward_layernorm|pre_ff_layernorm|pre_mlp_layernorm|feedforward_layernorm|ln_2|ln_mlp|ffn_norm|final_layer_norm|"
     rf"norm_attn_norm\.norm_2|norm_2|mlp_norm){_P}", "norm.pre_mlp"),
    (rf"(?:post_self_attn_layernorm|post_attn_norm|post_attention_norm|post_norm1|post_operator_norm){_P}",
     "norm.post_attn_out"),
    (rf"(?:post_feedforward_layernorm|post_mlp_layernorm|post_ffn_norm|post_norm2){_P}", "norm.post_mlp"),
    # --- the layer's output times a stored scalar (Gemma 4) ------------------------------------------------------
    (r"layer_scalar", "layer_scalar"),
    # --- the layer's gate of its per-layer input (Gemma 4's per-layer embeddings) ----------------------------------
    (rf"(?P<part>per_layer_input_gate|per_layer_projection|post_per_layer_input_norm){_P}", "ple.layer"),
    # --- multi-token-prediction layers past the last decoder layer: inference never runs them ------------------
    (r"(?:enorm|hnorm|eh_proj|embed_tokens|shared_head\.(?:norm|head))\.weight", "drop"),
    # causal masks saved as persistent buffers: GPT-2's attn.bias, GPT-NeoX's attention.bias (Pythia, StableLM-alpha)
    (r".*rotary_emb\.inv_freq|(?:attn|attention)\.(?:masked_bias|bias)", "drop"),
)  # fmt: skip

# (regex over a whole name outside the decoder layers, role).
TOP_PATTERNS: tuple[tuple[str, str], ...] = (
    # ModernBERT-decoder: a LayerNorm on the embeddings, a head transform (dense, act, norm) before `decoder`
    (rf"(?:.*\.)?embeddings\.norm{_P}", "embed_norm"),
    (rf"lm_head\.(?P<part>dense|norm){_P}", "head_transform"),
    (rf"decoder{_P}", "head"),
    # Gemma 4's per-layer embeddings: a [vocab, layers x dim] table, a projection of the embeddings, and its norm
    (rf"(?:.*\.)?(?P<part>embed_tokens_per_layer|per_layer_model_projection|per_layer_projection_norm){_P}", "ple"),
    (r"(?:.*\.)?(?:embed_tokens|wte|word_embeddings|embed_in|tok_embeddings|tokens_embed|embeddings)\.weight", "embed"),
    (r"(?:.*\.)?(?:wpe|positions_embed|embed_positions)\.weight", "positions"),
    # OPT-350m: embeddings narrower than the layers, projected to their width and back before the (tied) head
    (r"(?:.*\.)?project_in\.weight", "embed_project_in"),
    (r"(?:.*\.)?project_out\.weight", "embed_project_out"),
    (rf"(?:.*\.)?(?:norm|ln_f|final_layer_norm|final_layernorm|norm_f|final_norm|layer_norm){_P}", "final_norm"),
    # BLOOM's LayerNorm on the token embeddings, before the first layer
    (rf"(?:.*\.)?word_embeddings_layernorm{_P}", "embed_norm"),
    # A norm named for the embeddings: before the first layer, or (LFM2) after the last: only the code says which.
    (rf"(?:.*\.)?embedding_norm{_P}", "embedding_norm"),
    (rf"(?:lm_head|embed_out|output_projection|output){_P}", "head"),
    (r".*rotary_emb\.inv_freq", "drop"),
)

# Checkpoint tensors every adapter may drop: rotary caches and attention masks some exporters save.
DROPPED: tuple[str, ...] = (r".*rotary_emb\.inv_freq", r".*\.attn\.masked_bias", r".*\.attn\.bias")

_LAYER_ROLES = tuple((re.compile(p), role) for p, role in LAYER_PATTERNS)
_TOP_ROLES = tuple((re.compile(p), role) for p, role in TOP_PATTERNS)


def classify(template: str) -> tuple[str | None, re.Match[str] | None, re.Match[str] | None]:
    """(role, match of the role pattern, match of LAYER_NAME or None) for a template (`{}` for every number) of the
    language model's names. Role None: no pattern knows the tensor."""
    layer = LAYER_NAME.fullmatch(template)
    table, name = (_LAYER_ROLES, layer.group("rest")) if layer else (_TOP_ROLES, template)
    for pattern, role in table:
        m = pattern.fullmatch(name)
        if m is not None:
            return role, m, layer
    return None, None, layer


# The component each role counts under in inspect's parameter breakdown (roles not listed: COMPONENT_RULES decide).
ROLE_COMPONENTS: dict[str, str] = {
    **dict.fromkeys(("attn.q", "attn.k", "attn.v", "attn.qkv", "attn.qkv_grouped", "attn.o", "attn.sinks",
                     "attn.lambda", "attn.gate", "attn.g_gate", "attn.gate_bias", "mla", "mla.indexer"), "attention"),
    **dict.fromkeys(("attn.q_norm", "attn.k_norm", "attn.q_norm_heads", "attn.k_norm_heads", "attn.sub_norm",
                     "mlp.sub_norm", "norm.input", "norm.post_attention", "norm.pre_mlp", "norm.post_attn_out",
                     "norm.post_mlp", "final_norm", "embedding_norm"), "norms"),
    **dict.fromkeys(("moe.router", "moe.router_bias", "moe.router_linear_bias"), "router"),
    **dict.fromkeys(("moe.expert.gate", "moe.expert.up", "moe.expert.down", "moe.experts.gate_up",
                     "moe.experts.down", "moe.experts.bias", "moe.experts_rows"), "experts"),
    **dict.fromkeys(("moe.shared.gate", "moe.shared.up", "moe.shared.down", "moe.shared.gate_up", "moe.shared_gate"),
                    "shared_experts"),
    **dict.fromkeys(("mlp.gate", "mlp.up", "mlp.down", "mlp.gate_up", "mlp.act"), "mlp"),
    **dict.fromkeys(("mamba", "deltanet", "conv"), "ssm"),
    **dict.fromkeys(("embed", "positions"), "embedding"),
    "head": "head",
}  # fmt: skip
NORM_PART_ROLES = frozenset({"mla", "mamba", "deltanet"})
"""Mixers whose parts include norms (`q_a_layernorm`, `norm`, `out_norm`): a part named *norm* counts as norms."""

# The token mixer a role reveals in a layer (inspect's per-layer plan).
ROLE_MIXERS: dict[str, str] = {
    **{role: "attention" for role in ROLE_COMPONENTS if role.startswith("attn.")},
    "mla": "mla",
    "mla.indexer": "attention",
    "deltanet": "linear",
    "conv": "conv",
    "mamba": "ssm",
}
MLA_MIXER_PARTS = frozenset({"kv_a_proj_with_mqa", "kv_b_proj", "kv_a_layernorm"})
"""MLA's parts that mark a latent-attention layer (its query projections are attention's as well)."""


def role_component(template: str) -> str | None:
    """The component of a language-model template by its role (None: no role, or one ROLE_COMPONENTS leaves to
    COMPONENT_RULES)."""
    role, part = _role_part(template)
    if role in NORM_PART_ROLES and "norm" in part:
        return "norms"
    return ROLE_COMPONENTS.get(role) if role is not None else None


def role_mixer(template: str) -> str | None:
    """The mixer kind a language-model template's role reveals (None: no role, or not a mixer's)."""
    role, part = _role_part(template)
    if role == "mla":
        return "mla" if part in MLA_MIXER_PARTS else "attention"
    return ROLE_MIXERS.get(role) if role is not None else None


def _role_part(template: str) -> tuple[str | None, str]:
    role, m, _ = classify(template)
    return role, (m.groupdict().get("part") if m is not None else None) or ""

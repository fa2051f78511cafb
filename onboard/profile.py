"""ModelProfile: the typed, frozen, JSON hand-off from `inspect` to every later stage.

Generated code and reports read only this, never the checkpoint. `ModelProfile.from_json(p.to_json()) == p`.
msgspec Structs, not dataclasses: the same typed, frozen fields, defined about ten times faster (building these 15
dataclasses was 8 ms of the 0.2 s an `onboard inspect` process takes); change one with `msgspec.structs.replace`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from onboard import serde
from onboard.findings import Finding

# Per-layer attention kinds: the vocabulary of `LayerInfo.attention`.
ATTENTION_KINDS = ("full", "sliding", "chunked", "mla", "linear", "ssm", "conv", "none")


class Dims(msgspec.Struct, frozen=True):
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int | None
    vocab_size: int
    max_position_embeddings: int | None = None
    v_head_dim: int | None = None
    """Differs from head_dim for MLA (DeepSeek) and some hybrids."""


class LayerInfo(msgspec.Struct, frozen=True):
    index: int
    attention: str
    """One of ATTENTION_KINDS."""
    window: int | None = None
    """Sliding / chunked window in tokens."""
    mlp: str = "dense"
    """dense | moe | none"""
    rope: bool = True
    """False for NoPE layers (Llama 4, SmolLM3)."""
    parallel_ssm: bool = False
    """An SSM mixer runs beside attention in this layer (Falcon-H1): it adds a fixed state."""
    kv_width: int | None = None
    """K plus V elements this layer caches per token, read from its k/v projection shapes when known (layers of
    one model may differ: Gemma 4's global layers use wider heads)."""
    kv_source: int | None = None
    """The earlier layer whose keys and values this layer attends over, caching none of its own (Gemma 3n / 4's last
    num_kv_shared_layers layers, Kolibri 1.1's kv_source_layers); None: its own."""
    norms: tuple[str, ...] = ()
    """The layer norms this layer stores (their module names, e.g. `input_layernorm`), only where layers differ in
    them (OLMo-hybrid: pre-norm linear-attention layers, post-norm attention layers); empty when all store the same."""


class Rope(msgspec.Struct, frozen=True):
    type: str
    theta: float | None
    scaling: dict[str, Any] = msgspec.field(default_factory=dict)
    partial_rotary_factor: float = 1.0
    rotary_dim: int | None = None
    original_max_position_embeddings: int | None = None
    local_theta: float | None = None
    """A second base for sliding layers (Gemma 3, ModernBERT-style)."""
    interleaved: bool = False
    """config.json's `rope_interleave` (DeepSeek-V3, Kimi K2): rotary on (even, odd) pairs, not the two halves."""


class Norms(msgspec.Struct, frozen=True):
    kind: str
    """rms | layernorm"""
    eps: float | None
    offset: float = 0.0
    """1.0 when the weight is applied as (1 + w) (Gemma)."""
    qk_norm: str | None = None
    """per_head | full | weightless (an L2 norm per head, no weight: Llama 4's, on its rotary layers) | None"""
    placement: str = "pre"
    """pre | post (on each sub-block's output) | sandwich (pre and post around each sub-block) | post_ln (on the
    residual sum, norm(x + f(x)): GPT-1, OPT with do_layer_norm_before off)"""


class Biases(msgspec.Struct, frozen=True):
    attention_qkv: bool = False
    attention_out: bool = False
    mlp: bool = False
    lm_head: bool = False


class Multipliers(msgspec.Struct, frozen=True):
    logit_scale: float | None = None
    """Multiply final logits (Cohere logit_scale, or 1/logits_scaling for Granite)."""
    embedding_multiplier: float | None = None
    residual_multiplier: float | None = None
    attention_multiplier: float | None = None
    """Replaces 1/sqrt(head_dim) as the attention score scale."""
    query_pre_attn_scalar: float | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    attention_in_multiplier: float | None = None
    """The attention block's input scaled by this (Falcon-H1)."""
    attention_out_multiplier: float | None = None
    """The attention block's output scaled by this before the residual (Falcon-H1)."""
    key_multiplier: float | None = None
    """Keys scaled by this after their projection (Falcon-H1)."""
    mlp_multipliers: tuple[float, float] | None = None
    """(gate, down): the MLP's gate projection scaled before the activation, its output after down_proj (Falcon-H1)."""
    nope_temperature: tuple[float, float] | None = None
    """(floor_scale, attn_scale): on layers without rotary, queries × log1p(floor((pos + 1) / floor_scale)) ×
    attn_scale + 1 (Llama 4's attn_temperature_tuning)."""


class Moe(msgspec.Struct, frozen=True):
    num_experts: int
    top_k: int
    expert_intermediate_size: int | None = None
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    scoring: str = "softmax"
    """softmax | sigmoid"""
    correction_bias: bool = False
    """DeepSeek-V3 e_score_correction_bias: used for selection only."""
    norm_topk_prob: bool | None = None
    routed_scaling_factor: float | None = None
    dense_first_layers: int = 0
    n_group: int | None = None
    topk_group: int | None = None


class Ssm(msgspec.Struct, frozen=True):
    """The selective state-space (Mamba) mixer of the model's SSM layers, from config.json (under the names each
    family gives these keys, the config classes' defaults where it leaves one out)."""

    version: int
    """1: Mamba (x_proj gives dt, B and C; dt through a rank-`dt_rank` projection); 2: Mamba-2 (one in_proj, a dt
    per head, B and C shared by `n_groups` groups of heads)."""
    state_size: int
    conv_kernel: int
    inner_size: int
    """Channels the mixer convolves and scans (Mamba-2: heads × head_dim)."""
    num_heads: int | None = None
    head_dim: int | None = None
    n_groups: int = 1
    dt_rank: int | None = None
    conv_bias: bool = True
    proj_bias: bool = False
    activation: str = "silu"
    dt_limit: tuple[float, float | None] | None = None
    """dt clamped to [low, high] after its softplus (high None: no upper bound); None when not clamped."""
    bc_norm_eps: float | None = None
    """Falcon-Mamba: weightless RMS norms on B, C and dt before the scan, with this epsilon."""
    residual_in_fp32: bool = False
    """The residual stream is kept (and added) in float32 around each block."""
    gated_norm: bool = True
    """Mamba-2's RMS norm with the z gate before out_proj; False: the scan's output times silu(z), no norm (Falcon-H1
    without mamba_rms_norm)."""
    norm_before_gate: bool = False
    """With the gated norm: normalise, then gate (Falcon-H1's mamba_norm_before_gate); False: gate, then normalise."""
    in_multiplier: float = 1.0
    """The mixer's input scaled by this (Falcon-H1's ssm_in_multiplier)."""
    out_multiplier: float = 1.0
    """The mixer's output scaled by this before the residual (Falcon-H1's ssm_out_multiplier)."""
    zxbcdt_multipliers: tuple[float, ...] | None = None
    """in_proj's output scaled per part: z, x, B, C, dt (Falcon-H1's ssm_multipliers, its muP vector)."""


class Quantization(msgspec.Struct, frozen=True):
    method: str
    fmt: str | None = None
    block_size: tuple[int, ...] | None = None
    scale_tensors: tuple[str, ...] = ()
    """Suffixes of tensors that carry scales, e.g. weight_scale_inv, blocks/scales (mxfp4)."""
    ignored_modules: tuple[str, ...] = ()


class RemoteCode(msgspec.Struct, frozen=True):
    auto_map: dict[str, str]
    files: tuple[str, ...]
    classes: tuple[str, ...]
    """Classes defined in the repo's .py files, found with `ast` (never imported)."""


class ParameterCounts(msgspec.Struct, frozen=True):
    total: int
    active: int
    by_dtype: dict[str, int]
    by_component: dict[str, int]
    """embedding | attention | mlp | experts | shared_experts | router | norms | head | ssm | mtp | vision | other"""


class TargetFit(msgspec.Struct, frozen=True):
    gpu: str
    count: int
    memory_bytes_per_gpu: int
    fits: bool | None
    """None when the weight bytes are unknown: no claim either way."""
    recommended_tensor_parallel: int | None
    """Smallest valid TP degree (≤ count) whose shard of the weights leaves room for one sequence."""
    concurrent_sequences: int
    """Sequences of max_model_len that fit in the KV budget at that TP degree (all replicas together)."""
    notes: tuple[str, ...] = ()
    valid_tensor_parallel: tuple[int, ...] = ()
    """TP degrees ≤ count that engines accept for this model (heads, KV heads and quantization blocks split evenly)."""
    would_fit: tuple[str, ...] = ()
    """When it does not fit: what would (more GPUs, an fp8 KV cache, a shorter context)."""


class WeightsEstimate(msgspec.Struct, frozen=True):
    """How weight bytes were sized from config.json alone, when no safetensors headers or index were read."""

    parameters: int
    """transformers' meta-device count (parameters plus persistent buffers) plus the MTP layers."""
    mtp_parameters: int
    """Multi-token-prediction layers transformers' class drops but the checkpoint stores and engines load."""
    quantized_parameters: int
    dtype: str
    """Storage dtype of the tensors that stay unquantized (from config.json; bfloat16 when it names none)."""
    quantization: str | None
    """The byte model used for quantized tensors, e.g. 'fp8: 1 B + a float32 scale per 128×128 block'."""
    transformers_version: str


class MemoryPlan(msgspec.Struct, frozen=True):
    weights_bytes: int | None
    """None when unknown (no headers, no index total, no estimate possible): never counted as 0 B."""
    kv_dtype: str
    max_model_len: int
    kv_bytes_per_token: int
    """Bytes one more token adds to the cache at max_model_len: layers whose window is shorter have stopped growing."""
    kv_bytes_per_token_by_kind: dict[str, int]
    """Per-token bytes per layer kind (full, sliding, chunked, mla) before any window cap."""
    state_bytes_per_sequence: int
    """Fixed recurrent state (SSM / linear attention / short conv) per sequence, independent of length."""
    kv_bytes_per_sequence: int
    """Whole cache of one sequence at max_model_len: windows capped, plus the fixed state."""
    target: TargetFit | None = None
    weights_source: str = "headers"
    """headers (exact) | index (total_size of the safetensors index) | estimated (from config) | unknown"""
    weights_estimate: WeightsEstimate | None = None


class TensorGroupStat(msgspec.Struct, frozen=True):
    """Used by novelty and by generate's weight map: the tensor-name set reduced to per-layer templates."""

    template: str
    count: int
    shape: tuple[int, ...] = ()
    """Shape of the group's first tensor (layer 0, expert 0): tells fused from separate and Conv1D from Linear."""


def rope_feature(rope_type: str) -> str:
    """The `features` entry naming the rope type (for people and the novelty diff); code reads `ModelProfile.rope`."""
    return f"rope:{rope_type}"


def quantized_feature(method: str) -> str:
    """The `features` entry naming the quantization; code reads `ModelProfile.quantization`."""
    return f"quantized:{method}"


class Architecture(msgspec.Struct, frozen=True):
    """What inspect's architecture analysis finds in config.json and the tensor names (inspect_checkpoint/
    architecture.py, whose ArchFacts adds what only feeds features.derive); a ModelProfile carries all of it. One
    declaration for both, so profile.json opens with these fields."""

    dims: Dims
    layers: tuple[LayerInfo, ...]
    rope: Rope | None
    norms: Norms
    activation: str | None
    mlp_gated: bool | None
    """True for GLU-style MLPs (gate and up projections), False for a plain two-layer MLP."""
    biases: Biases
    multipliers: Multipliers
    tie_word_embeddings: bool
    attention_sinks: bool
    moe: Moe | None
    mtp_layers: int
    quantization: Quantization | None
    multimodal: tuple[str, ...]
    """Towers present besides the language model: vision, audio, …"""


class ModelProfile(Architecture, frozen=True):
    source: str
    revision: str | None
    model_type: str
    architectures: tuple[str, ...]
    features: tuple[str, ...]
    parameters: ParameterCounts | None
    memory: MemoryPlan | None
    closest_family: str | None
    novelty: tuple[str, ...]
    """Differences from the closest family, in plain words."""
    remote_code: RemoteCode | None
    files: tuple[str, ...]
    tensor_templates: tuple[TensorGroupStat, ...]
    config_dtype: str | None
    findings: tuple[Finding, ...]
    tool_version: str
    config_keys: tuple[str, ...] = ()
    """Language-model config keys with a value (null ones left out): what a composed adapter must read or
    knowingly ignore."""
    novel_config_keys: tuple[str, ...] = ()
    """config_keys the closest family does not have (all of them; the novelty text shows the first few)."""
    ssm: Ssm | None = None
    """The SSM layers' mixer (None without SSM layers)."""
    unknown: tuple[str, ...] = ()
    """Fields inspect could not establish (the weights could not be read: a fatal finding says why). In JSON each is
    the string "unknown"; in memory it holds an empty placeholder (None, (), False), never a value from defaults."""

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return serde.to_json(self, indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelProfile:
        return serde.from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str) -> ModelProfile:
        import json

        return cls.from_dict(json.loads(text))

    def layer_kinds(self) -> list[str]:
        return [layer.attention for layer in self.layers]

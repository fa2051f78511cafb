"""ModelProfile: the typed, frozen JSON hand-off from `inspect` to every later stage, which read it, never the
checkpoint. msgspec Structs (change one with `msgspec.structs.replace`); `ModelProfile.from_json(p.to_json()) == p`.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from onboard import serde
from onboard.findings import Finding


class Dims(msgspec.Struct, frozen=True):
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int | None
    vocab_size: int
    max_position_embeddings: int | None = None
    v_head_dim: int | None = None  # differs from head_dim for MLA (DeepSeek) and some hybrids


class LayerInfo(msgspec.Struct, frozen=True):
    index: int
    attention: str  # full | sliding | chunked | mla | linear | ssm | conv | none
    window: int | None = None  # sliding / chunked window in tokens
    mlp: str = "dense"  # dense | moe | none
    rope: bool = True  # False for NoPE layers (Llama 4, SmolLM3)
    parallel_ssm: bool = False
    """An SSM mixer runs beside attention in this layer (Falcon-H1): it adds a fixed state."""
    kv_width: int | None = None
    """K plus V elements cached per token, from the k/v projection shapes (Gemma 4's global layers are wider)."""
    kv_source: int | None = None
    """The earlier layer whose keys and values this layer attends over, caching none (Gemma 3n / 4, Kolibri 1.1)."""
    norms: tuple[str, ...] = ()
    """The norm modules this layer stores, only where layers differ in them (OLMo-hybrid); else empty."""


class Rope(msgspec.Struct, frozen=True):
    type: str
    theta: float | None
    scaling: dict[str, Any] = msgspec.field(default_factory=dict)
    partial_rotary_factor: float = 1.0
    rotary_dim: int | None = None
    original_max_position_embeddings: int | None = None
    local_theta: float | None = None  # a second base for sliding layers (Gemma 3, ModernBERT)
    interleaved: bool = False
    """config.json's `rope_interleave` (DeepSeek-V3, Kimi K2): rotary on (even, odd) pairs, not the two halves."""


class Norms(msgspec.Struct, frozen=True):
    kind: str  # rms | layernorm
    eps: float | None
    offset: float = 0.0  # 1.0 when the weight is applied as (1 + w) (Gemma)
    qk_norm: str | None = None
    """per_head | full | weightless (an L2 norm per head, no weight: Llama 4's, on its rotary layers) | None"""
    placement: str = "pre"
    """pre | post (on each sub-block's output) | sandwich (both) | post_ln (norm(x + f(x)): GPT-1, OPT)"""


class Biases(msgspec.Struct, frozen=True):
    attention_qkv: bool = False
    attention_out: bool = False
    mlp: bool = False
    lm_head: bool = False


class Multipliers(msgspec.Struct, frozen=True):
    logit_scale: float | None = None  # multiplies the logits (Cohere's logit_scale, Granite's 1 / logits_scaling)
    embedding_multiplier: float | None = None
    residual_multiplier: float | None = None
    attention_multiplier: float | None = None  # replaces 1/sqrt(head_dim) as the score scale
    query_pre_attn_scalar: float | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    # Falcon-H1: the attention block's input and output (before the residual) scaled, and the keys after projection
    attention_in_multiplier: float | None = None
    attention_out_multiplier: float | None = None
    key_multiplier: float | None = None
    mlp_multipliers: tuple[float, float] | None = None
    """(gate, down): the MLP's gate scaled before the activation, its output after down_proj (Falcon-H1)."""
    nope_temperature: tuple[float, float] | None = None
    """(floor_scale, attn_scale): on layers without rotary, queries × log1p(floor((pos + 1) / floor_scale)) ×
    attn_scale + 1 (Llama 4's attn_temperature_tuning)."""


class Moe(msgspec.Struct, frozen=True):
    num_experts: int
    top_k: int
    expert_intermediate_size: int | None = None
    num_shared_experts: int = 0
    shared_expert_intermediate_size: int | None = None
    scoring: str = "softmax"  # softmax | sigmoid
    correction_bias: bool = False  # DeepSeek-V3's e_score_correction_bias: used for selection only
    norm_topk_prob: bool | None = None
    routed_scaling_factor: float | None = None
    dense_first_layers: int = 0
    n_group: int | None = None
    topk_group: int | None = None


class Ssm(msgspec.Struct, frozen=True):
    """The selective state-space (Mamba) mixer of the model's SSM layers, from config.json (or the config class's
    defaults)."""

    version: int
    """1: Mamba (x_proj gives dt, B and C; dt through a rank-`dt_rank` projection); 2: Mamba-2 (one in_proj, a dt
    per head, B and C shared by `n_groups` groups of heads)."""
    state_size: int
    conv_kernel: int
    inner_size: int  # channels the mixer convolves and scans (Mamba-2: heads × head_dim)
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
    residual_in_fp32: bool = False  # the residual stream is kept (and added) in float32 around each block
    gated_norm: bool = True
    """Mamba-2's RMS norm with the z gate before out_proj; False: the output times silu(z), no norm (Falcon-H1)."""
    norm_before_gate: bool = False
    """With the gated norm: normalise, then gate (Falcon-H1's mamba_norm_before_gate); False: gate, then normalise."""
    # Falcon-H1's ssm_in_multiplier, ssm_out_multiplier (before the residual) and ssm_multipliers (z, x, B, C, dt)
    in_multiplier: float = 1.0
    out_multiplier: float = 1.0
    zxbcdt_multipliers: tuple[float, ...] | None = None


class Quantization(msgspec.Struct, frozen=True):
    method: str
    fmt: str | None = None
    block_size: tuple[int, ...] | None = None
    scale_tensors: tuple[str, ...] = ()  # suffixes of scale tensors: weight_scale_inv, blocks/scales (mxfp4)
    ignored_modules: tuple[str, ...] = ()


class RemoteCode(msgspec.Struct, frozen=True):
    auto_map: dict[str, str]
    files: tuple[str, ...]
    classes: tuple[str, ...]  # defined in the repo's .py files, found with `ast` (never imported)


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
    fits: bool | None  # None when the weight bytes are unknown: no claim either way
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
    mtp_parameters: int  # MTP layers transformers' class drops but the checkpoint stores and engines load
    quantized_parameters: int
    dtype: str  # of the unquantized tensors (config.json's; bfloat16 when it names none)
    quantization: str | None
    """The byte model of quantized tensors, e.g. 'fp8: 1 B + a float32 scale per 128×128 block'."""
    transformers_version: str


class MemoryPlan(msgspec.Struct, frozen=True):
    weights_bytes: int | None  # None when unknown: never counted as 0 B
    kv_dtype: str
    max_model_len: int
    kv_bytes_per_token: int
    """Bytes one more token adds to the cache at max_model_len: layers whose window is shorter have stopped growing."""
    kv_bytes_per_token_by_kind: dict[str, int]  # per layer kind (full, sliding, chunked, mla), before window caps
    state_bytes_per_sequence: int  # fixed recurrent state (SSM / linear attention / short conv)
    kv_bytes_per_sequence: int  # the whole cache at max_model_len: windows capped, plus the fixed state
    target: TargetFit | None = None
    weights_source: str = "headers"
    """headers (exact) | index (the safetensors index's total_size) | estimated (from config) | unknown"""
    weights_estimate: WeightsEstimate | None = None


class TensorGroupStat(msgspec.Struct, frozen=True):
    """The tensor names reduced to per-layer templates (novelty, generate's weight map)."""

    template: str
    count: int
    shape: tuple[int, ...] = ()
    """The first tensor's shape (layer 0, expert 0): tells fused from separate and Conv1D from Linear."""


def rope_feature(rope_type: str) -> str:
    """The `features` entry naming the rope type (for people and the novelty diff); code reads `ModelProfile.rope`."""
    return f"rope:{rope_type}"


def quantized_feature(method: str) -> str:
    """The `features` entry naming the quantization; code reads `ModelProfile.quantization`."""
    return f"quantized:{method}"


class Architecture(msgspec.Struct, frozen=True):
    """What inspect_checkpoint/architecture.py finds in config.json and the tensor names; a ModelProfile carries
    all of it (so profile.json opens with these fields)."""

    dims: Dims
    layers: tuple[LayerInfo, ...]
    rope: Rope | None
    norms: Norms
    activation: str | None
    mlp_gated: bool | None  # GLU-style (gate and up projections), or a plain two-layer MLP
    biases: Biases
    multipliers: Multipliers
    tie_word_embeddings: bool
    attention_sinks: bool
    moe: Moe | None
    mtp_layers: int
    quantization: Quantization | None
    multimodal: tuple[str, ...]  # towers besides the language model: vision, audio, …


class ModelProfile(Architecture, frozen=True):
    source: str
    revision: str | None
    model_type: str
    architectures: tuple[str, ...]
    features: tuple[str, ...]
    parameters: ParameterCounts | None
    memory: MemoryPlan | None
    closest_family: str | None
    novelty: tuple[str, ...]  # differences from the closest family, in plain words
    remote_code: RemoteCode | None
    files: tuple[str, ...]
    tensor_templates: tuple[TensorGroupStat, ...]
    config_dtype: str | None
    findings: tuple[Finding, ...]
    tool_version: str
    config_keys: tuple[str, ...] = ()
    """Language-model config keys with a non-null value: what a composed adapter must read or knowingly ignore."""
    novel_config_keys: tuple[str, ...] = ()  # config_keys the closest family does not have
    ssm: Ssm | None = None
    unknown: tuple[str, ...] = ()
    """Fields inspect could not establish (a fatal finding says why): "unknown" in JSON, an empty placeholder in
    memory (serde), never a default's value."""

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return serde.to_json(self, indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelProfile:
        return serde.from_dict(cls, data)

    @classmethod
    def from_json(cls, text: str) -> ModelProfile:
        return cls.from_dict(json.loads(text))

    def layer_kinds(self) -> list[str]:
        return [layer.attention for layer in self.layers]

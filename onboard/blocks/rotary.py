"""Rotary embedding frequencies for every HF rope type (equal to transformers' ROPE_INIT_FUNCTIONS), and the cos/sin
half tables [..., R/2] the `rope` kernel consumes, in float32, already times the attention factor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class RopeConfig:
    """Rope parameters of one attention type (field names follow HF `rope_parameters`)."""

    head_dim: int
    rope_type: str = "default"
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 1.0
    max_position_embeddings: int = 2048
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None

    @property
    def rotary_dim(self) -> int:
        """Number of rotated dims of each head (partial rotary rotates the first `rotary_dim`)."""
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_dict(
        cls, config: Mapping[str, Any], head_dim: int | None = None, layer_type: str | None = None
    ) -> RopeConfig:
        """From a config.json dict: `rope_parameters`, or the older `rope_scaling` + `rope_theta`. `head_dim`
        overrides the config's (MLA rotates `qk_rope_head_dim`); `layer_type` picks one entry of per-layer-type
        parameters (Gemma 3)."""
        params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        nested = sorted(k for k, v in params.items() if isinstance(v, Mapping))
        if nested:
            if layer_type not in nested:
                raise ValueError(f"rope parameters are given per layer type {nested}: pass layer_type= one of them")
            params = dict(params[layer_type])
        elif layer_type is not None and config.get("layer_types") and layer_type not in config["layer_types"]:
            raise ValueError(f"layer_type {layer_type!r} is not in the config's layer_types")
        if head_dim is None:
            head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        rope_type = params.get("rope_type", params.get("type", "default"))
        omax = params.get("original_max_position_embeddings", config.get("original_max_position_embeddings"))
        if rope_type in ("llama3", "yarn", "longrope") and omax is None:
            omax = config["max_position_embeddings"]  # HF's standardize_rope_params default
        lists = {k: tuple(params[k]) for k in ("short_factor", "long_factor") if params.get(k) is not None}
        scalars = {
            k: params[k]
            for k in ("factor", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "mscale")
            + ("mscale_all_dim", "attention_factor", "truncate")
            if params.get(k) is not None
        }
        return cls(
            head_dim=head_dim,
            rope_type=rope_type,
            rope_theta=float(params.get("rope_theta") or config.get("rope_theta") or 10000.0),
            partial_rotary_factor=float(
                params.get("partial_rotary_factor", config.get("partial_rotary_factor") or 1.0)
            ),
            max_position_embeddings=config.get("max_position_embeddings", 2048),
            original_max_position_embeddings=omax,
            **scalars,
            **lists,
        )


def _base_inv_freq(cfg: RopeConfig, base: float | None = None) -> torch.Tensor:
    dim = cfg.rotary_dim
    base = cfg.rope_theta if base is None else base
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _default(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(cfg), 1.0


def _linear(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    return _base_inv_freq(cfg) / cfg.factor, 1.0


def _dynamic(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    # NTK-aware: grow the base once the sequence exceeds the trained length.
    dim, mpe = cfg.rotary_dim, cfg.max_position_embeddings
    seq_len = max(seq_len or mpe, mpe)
    base = cfg.rope_theta * ((cfg.factor * seq_len / mpe) - (cfg.factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(cfg, base), 1.0


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    dim, base, omax = cfg.rotary_dim, cfg.rope_theta, cfg.original_max_position_embeddings
    factor = cfg.factor if cfg.factor is not None else cfg.max_position_embeddings / omax
    attention_factor = cfg.attention_factor
    if attention_factor is None:
        if cfg.mscale and cfg.mscale_all_dim:
            attention_factor = float(yarn_mscale(factor, cfg.mscale) / yarn_mscale(factor, cfg.mscale_all_dim))
        else:
            attention_factor = yarn_mscale(factor)
    beta_fast, beta_slow = cfg.beta_fast or 32, cfg.beta_slow or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(omax / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if cfg.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation = 1 - ramp  # 1 where dims keep their original frequency
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq, attention_factor


def _longrope(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    dim, omax = cfg.rotary_dim, cfg.original_max_position_embeddings
    factor = cfg.factor if cfg.factor is not None else cfg.max_position_embeddings / omax
    attention_factor = cfg.attention_factor
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(omax))
    ext = cfg.long_factor if seq_len and seq_len > omax else cfg.short_factor
    ext_factors = torch.tensor(ext, dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext_factors * cfg.rope_theta**shape), attention_factor


def _llama3(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    inv_freq = _base_inv_freq(cfg)
    factor, low, high = cfg.factor, cfg.low_freq_factor, cfg.high_freq_factor
    old_len = cfg.original_max_position_embeddings
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, scaled), 1.0


def _proportional(cfg: RopeConfig, seq_len: int | None) -> tuple[torch.Tensor, float]:
    # Gemma-4 style: frequencies relative to the full head_dim, zero frequency for the un-rotated pairs.
    angles = int(cfg.partial_rotary_factor * cfg.head_dim // 2)
    rotated = 1.0 / (cfg.rope_theta ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).float() / cfg.head_dim))
    inv_freq = torch.cat((rotated, torch.zeros(cfg.head_dim // 2 - angles)))
    return inv_freq / (cfg.factor or 1.0), 1.0


ROPE_TYPES: dict[str, Callable[[RopeConfig, int | None], tuple[torch.Tensor, float]]] = {
    "default": _default,
    "linear": _linear,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "longrope": _longrope,
    "llama3": _llama3,
    "proportional": _proportional,
}


def inv_freq_and_attention_factor(cfg: RopeConfig, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """Inverse frequencies [R/2] (float32) and the attention factor multiplying cos/sin, for `cfg` at `seq_len`."""
    fn = ROPE_TYPES.get(cfg.rope_type)
    if fn is None:
        raise ValueError(f"unknown rope_type {cfg.rope_type!r}; known: {sorted(ROPE_TYPES)}")
    return fn(cfg, seq_len)


class RotaryEmbedding(nn.Module):
    """cos/sin half tables for positions. Dynamic NTK and longrope pick their frequencies from this call's max
    position (transformers caches grown ones across calls: the same for one forward from position 0)."""

    def __init__(self, cfg: RopeConfig) -> None:
        super().__init__()
        self.cfg = cfg
        inv_freq, self.attention_factor = inv_freq_and_attention_factor(cfg)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _inv_freq_for(self, seq_len: int) -> tuple[torch.Tensor, float]:
        cfg = self.cfg
        trained = {"dynamic": cfg.max_position_embeddings, "longrope": cfg.original_max_position_embeddings}
        if cfg.rope_type in trained and seq_len > trained[cfg.rope_type]:
            inv_freq, factor = inv_freq_and_attention_factor(cfg, seq_len)
            return inv_freq.to(self.inv_freq.device), factor
        return self.inv_freq, self.attention_factor

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """position_ids [B, S] (or [S]) -> (cos, sin), each [B, S, R/2] float32, scaled by the attention factor."""
        seq_len = int(position_ids.max()) + 1 if position_ids.numel() else 0
        inv_freq, factor = self._inv_freq_for(seq_len)
        freqs = position_ids[..., None].float() * inv_freq.to(position_ids.device)
        return freqs.cos() * factor, freqs.sin() * factor

"""Quantize-dequantize in torch, rounding as the engines and the tools that write their checkpoints round.

Every function takes float32 with the matmul's input as the LAST dimension and returns the dequantized float32
values the engine multiplies with: int8 per-channel / per-token (vLLM W8A8, llm-compressor's scales), fp8-e4m3
per-tensor and per-128x128-block (DeepSeek-V3), int4 group-128 asymmetric (AutoAWQ's rounding, fp16 scales), MXFP4.
"""

from __future__ import annotations

import torch

FP8_MAX = 448.0
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def int8_per_channel(w: torch.Tensor) -> torch.Tensor:
    scale = (w.abs().amax(dim=-1, keepdim=True) / 127.5).clamp(min=torch.finfo(torch.float32).eps)
    return torch.clamp(torch.round(w / scale), -128, 127) * scale


def int8_per_token(x: torch.Tensor) -> torch.Tensor:
    """vLLM's dynamic per-token int8 activation quantization."""
    scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.clamp(torch.round(x / safe), -128, 127) * scale


def _to_fp8(scaled: torch.Tensor) -> torch.Tensor:
    return scaled.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def fp8_per_tensor(w: torch.Tensor) -> torch.Tensor:
    scale = w.abs().amax() / FP8_MAX
    if float(scale) == 0.0:
        return torch.zeros_like(w)
    return _to_fp8(w / scale) * scale


def fp8_block(w: torch.Tensor, block: int = 128) -> torch.Tensor:
    """128x128 blocks over the last two dimensions; a partial block at the edge has its own scale (as DeepSeek's
    weight_scale_inv of shape ceil(out/128) x ceil(in/128))."""
    *lead, rows, cols = w.shape
    pad_r, pad_c = (-rows) % block, (-cols) % block
    padded = torch.nn.functional.pad(w, (0, pad_c, 0, pad_r))
    blocks = padded.reshape(*lead, (rows + pad_r) // block, block, (cols + pad_c) // block, block)
    scale = blocks.abs().amax(dim=(-3, -1), keepdim=True) / FP8_MAX
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    out = (_to_fp8(blocks / safe) * scale).reshape(padded.shape)
    return out[..., :rows, :cols]


def fp8_per_token_group(x: torch.Tensor, group: int = 128) -> torch.Tensor:
    """DeepSeek's act_quant / vLLM's per_token_group_quant_fp8: one scale per token and group of 128 channels."""
    shaped = x.reshape(*x.shape[:-1], x.shape[-1] // group, group)
    scale = shaped.abs().amax(dim=-1, keepdim=True).clamp(min=1e-10) / FP8_MAX
    return (_to_fp8(shaped / scale) * scale).reshape(x.shape)


def int4_group_asym(w: torch.Tensor, group: int = 128) -> torch.Tensor:
    shaped = w.reshape(*w.shape[:-1], w.shape[-1] // group, group)
    hi, lo = shaped.amax(dim=-1, keepdim=True), shaped.amin(dim=-1, keepdim=True)
    scale = (hi - lo).clamp(min=1e-5) / 15
    zero = torch.clamp(-torch.round(lo / scale), 0, 15)
    q = torch.clamp(torch.round(shaped / scale) + zero, 0, 15)
    stored = scale.to(torch.float16).to(torch.float32)  # the kernel dequantizes with the checkpoint's fp16 scale
    return ((q - zero) * stored).reshape(w.shape)


def mxfp4(w: torch.Tensor) -> torch.Tensor:
    shaped = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = shaped.abs().amax(dim=-1, keepdim=True)
    # floor(log2(amax)) exactly: frexp's mantissa is in [0.5, 1).
    floor_log2 = torch.frexp(amax).exponent.to(torch.float32) - 1
    scale = torch.where(amax > 0, torch.exp2((floor_log2 - 2).clamp(min=-127)), torch.ones_like(amax))
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float32)
    # Nearest grid value; a value on a midpoint takes the smaller magnitude (llama.cpp keeps the first best index).
    index = torch.bucketize(shaped.abs() / scale, (grid[1:] + grid[:-1]) / 2, right=False)
    return (torch.sign(shaped) * grid[index] * scale).reshape(w.shape)

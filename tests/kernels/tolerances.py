"""The one per-dtype tolerance table for kernel tests, and a verbose float64 comparison.

A kernel output in `dtype` passes when |actual - expected| <= atol + rtol * |expected| elementwise, where `expected`
is the PyTorch reference computed in float64 on the same (dtype-rounded) inputs. rtol is about two units in the last
place of the dtype: one for the final rounding, one for an intermediate rounding that HF's semantics require (e.g.
Llama's RMSNorm casts before the weight multiply) or that the Triton interpreter's truncating fp32->bf16 cast adds.
"""

from __future__ import annotations

import os

import torch

# dtype -> (atol, rtol)
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 2e-3),
    torch.bfloat16: (8e-3, 1.6e-2),
}

DTYPES = tuple(TOLERANCES)


def assert_close_verbose(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype, max_report: int = 5) -> None:
    """Assert `actual` matches `expected` within TOLERANCES[dtype], comparing in float64.

    NaN and inf count as mismatches (in either tensor): a kernel that overflows must not pass by comparing inf == inf.
    The failure message gives the mismatch count, the worst error and the first mismatching indices with values.
    """
    atol, rtol = TOLERANCES[dtype]
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: actual {tuple(actual.shape)} vs expected {tuple(expected.shape)}")
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    err = (a - e).abs()
    bad = ~(torch.isfinite(a) & torch.isfinite(e)) | ~(err <= atol + rtol * e.abs())
    n_bad = int(bad.sum())
    if n_bad == 0:
        return
    idx = bad.nonzero()[:max_report]
    lines = [
        f"{n_bad} of {a.numel()} elements differ beyond {dtype} tolerance (atol={atol}, rtol={rtol}); "
        f"max |diff| = {err[torch.isfinite(err)].max().item() if torch.isfinite(err).any() else float('nan'):.3g}"
    ]
    for i in idx.tolist():
        t = tuple(i)
        lines.append(f"  at {t}: actual={a[t].item():.8g} expected={e[t].item():.8g}")
    raise AssertionError("\n".join(lines))


# Where the Triton side of the kernel tests runs: the interpreter on CPU by default; the real GPU when
# ONBOARD_TEST_GPU=1 (tests/conftest.py then leaves TRITON_INTERPRET unset). Inputs are built on CPU (same seeds
# either way) and moved here just for the kernel call.
KERNEL_DEVICE = "cuda" if os.environ.get("ONBOARD_TEST_GPU") == "1" else "cpu"


def dev(t: torch.Tensor) -> torch.Tensor:
    """`t` on KERNEL_DEVICE, keeping its strides when it is already there."""
    return t if t.device.type == KERNEL_DEVICE else t.to(KERNEL_DEVICE)

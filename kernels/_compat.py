"""Triton import shim: kernel modules import `triton`/`tl` from here so that their PyTorch references stay importable
on machines without Triton (macOS, Windows), where only the CPU path of `dispatch` is ever taken."""

from __future__ import annotations

from typing import Any

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # pragma: no cover - exercised only where triton is not installed
    HAS_TRITON = False

    class _TritonStub:
        """Enough of `triton` for `@triton.jit` definitions to import; launching them raises in `require_triton`."""

        @staticmethod
        def jit(fn: Any = None, **_kwargs: Any) -> Any:
            return fn if fn is not None else (lambda f: f)

        @staticmethod
        def next_power_of_2(n: int) -> int:
            return 1 << max(n - 1, 0).bit_length()

        @staticmethod
        def cdiv(a: int, b: int) -> int:
            return -(-a // b)

    class _LanguageStub:
        constexpr = Any

    triton = _TritonStub()  # type: ignore[assignment]
    tl = _LanguageStub()  # type: ignore[assignment]


def require_triton(op: str) -> None:
    """Raise a clear error when a Triton path is requested but Triton is not installed."""
    if not HAS_TRITON:
        from onboard.errors import InputError

        raise InputError(
            f"the Triton kernel for {op} needs the `triton` package, which is not installed",
            hint="install triton (Linux + CUDA), or run on CPU tensors so the PyTorch reference is used",
        )


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (Triton block sizes must be powers of two)."""
    return triton.next_power_of_2(n)

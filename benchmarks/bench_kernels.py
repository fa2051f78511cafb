"""Bandwidth benchmark of the Triton kernels against their PyTorch references.

    python benchmarks/bench_kernels.py                 # CUDA: GB/s per kernel, Triton vs torch reference
    python benchmarks/bench_kernels.py --interpret-smoke   # CPU: tiny shapes under TRITON_INTERPRET=1 (exercise only)

GB/s counts the bytes each op must move at least (inputs read once, output written once), so it is comparable with
the GPU's peak memory bandwidth. Without CUDA (and without --interpret-smoke) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_ERR = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3.2e-2}


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], tuple]  # -> positional args for both implementations
    triton_fn: Callable
    torch_fn: Callable
    bytes_moved: Callable[[tuple], int]


def _cases(device: str, dtype, tiny: bool) -> list[Case]:
    import torch

    from onboard.kernels import geglu, rmsnorm, rope, softcap, swiglu

    m, hidden, inter, heads, hd, vocab = (7, 96, 37, 3, 16, 101) if tiny else (4096, 4096, 14336, 32, 128, 32768)

    def rand(*shape: int):
        return torch.randn(*shape, device=device, dtype=dtype)

    def nbytes(*ts) -> int:
        return sum(t.numel() * t.element_size() for t in ts)

    def angles():
        a = torch.rand(m, hd // 2, device=device) * 10
        return a.cos(), a.sin()

    return [
        *(
            Case(
                f"rmsnorm(offset {offset:g})",
                lambda offset=offset: (rand(m, hidden), rand(hidden), 1e-6, offset),
                rmsnorm.rms_norm_triton,
                rmsnorm.rms_norm_reference,
                lambda a: 2 * nbytes(a[0]) + nbytes(a[1]),
            )
            for offset in (0.0, 1.0)
        ),
        *(
            Case(
                f"rope({layout})",
                lambda interleaved=interleaved: (rand(m, heads, hd), *angles(), interleaved),
                rope.rope_triton,
                rope.rope_reference,
                lambda a: 2 * nbytes(a[0]) + nbytes(a[1], a[2]),
            )
            for layout, interleaved in (("neox", False), ("interleaved", True))
        ),
        Case(
            "swiglu",
            lambda: (rand(m, inter), rand(m, inter)),
            swiglu.swiglu_triton,
            swiglu.swiglu_reference,
            lambda a: 3 * nbytes(a[0]),
        ),
        Case(
            "geglu(tanh)",
            lambda: (rand(m, inter), rand(m, inter), "tanh"),
            geglu.geglu_triton,
            geglu.geglu_reference,
            lambda a: 3 * nbytes(a[0]),
        ),
        Case(
            "softcap",
            lambda: (rand(m, vocab) * 50, 30.0),
            softcap.softcap_triton,
            softcap.softcap_reference,
            lambda a: 2 * nbytes(a[0]),
        ),
    ]


def _time_cuda(fn: Callable[[], object]) -> float:
    """Median milliseconds per call (triton's do_bench: warm-up, L2 flush, CUDA events)."""
    from triton.testing import do_bench

    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def _time_cpu(fn: Callable[[], object]) -> float:
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def run(device: str, dtype_name: str, tiny: bool) -> int:
    import torch

    dtype = getattr(torch, dtype_name)
    timer = _time_cuda if device == "cuda" else _time_cpu
    print(f"device={torch.cuda.get_device_name() if device == 'cuda' else 'cpu (interpreter)'} dtype={dtype_name}")
    print(f"{'kernel':<20}{'triton ms':>11}{'GB/s':>9}{'torch ms':>11}{'GB/s':>9}{'speed-up':>10}{'max err':>11}")
    worst = 0.0
    for case in _cases(device, dtype, tiny):
        args = case.make()
        out_t, out_r = case.triton_fn(*args), case.torch_fn(*args)
        ref = out_r.double()
        diff = ((out_t.double() - ref).abs() / (1 + ref.abs())).max().item()
        worst = max(worst, diff)
        ms_t = timer(lambda c=case, a=args: c.triton_fn(*a))
        ms_r = timer(lambda c=case, a=args: c.torch_fn(*a))
        gb = case.bytes_moved(args) / 1e9
        print(
            f"{case.name:<20}{ms_t:>11.4f}{gb / ms_t * 1e3:>9.1f}{ms_r:>11.4f}{gb / ms_r * 1e3:>9.1f}"
            f"{ms_r / ms_t:>9.2f}x{diff:>11.2e}"
        )
    # A kernel that disagrees with its reference makes the numbers meaningless: fail loudly. The error is
    # |triton - torch| / (1 + |torch|); both round to the dtype, so allow ~2 ulps of it.
    if worst > MAX_ERR[dtype_name]:
        print(f"FAIL: max err {worst:.2e} exceeds {MAX_ERR[dtype_name]:.1e} for {dtype_name}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interpret-smoke", action="store_true", help="tiny shapes on CPU under TRITON_INTERPRET=1")
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"])
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    if args.interpret_smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # must precede the first `import triton`
        return run("cpu", args.dtype, tiny=True)
    import torch

    if not torch.cuda.is_available():
        print("bench_kernels: needs a CUDA GPU (none found); use --interpret-smoke to exercise it on CPU")
        return 0
    return run("cuda", args.dtype, tiny=False)


if __name__ == "__main__":
    sys.exit(main())

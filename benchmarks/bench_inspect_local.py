"""Local inspect of a 671B sharded checkpoint vs a bare header read and vs a meta-device model.

Builds (once, cached under .bench/) the DeepSeek-V3-like checkpoint that benchmarks/bench_inspect_hub.py serves:
163 shards, 256 experts, ~93k tensors, data regions as sparse holes (`--kimi`: the 1.03T Kimi-K2 layout, 128 shards,
~140k tensors). Then times, in one run, best of N interleaved repeats:

  bare          open + read 8 bytes + read header + json.loads, for every shard (no checks, no analysis), in process
  headers       onboard's source + validated headers + integrity (the checkpoint I/O layer alone), in process
  inspect       onboard.inspect_checkpoint.inspect(path): the whole profile, in process (imports already done)
  process       `python -m onboard inspect PATH --json`: the whole command, interpreter start and imports included
                (bytecode compiled beforehand, as in an installed package: one untimed run writes the .pyc files)
  meta_process  a fresh `python -c` that imports torch and transformers, builds the config from config.json and
                instantiates `AutoModelForCausalLM.from_config(config)` on the meta device (no weights) and counts
                its parameters: what a user runs to count parameters with transformers, start to exit. The
                like-for-like contender of `process` (both whole processes).
  meta          the same instantiation in this process, torch and transformers imported before timing (their
                import time is left out): a lower bound for transformers, printed for reference.

and prints process/bare (target <= 2.5), meta_process/process (target >= 20), and meta/process and meta/inspect
(the in-process meta figure against the whole-process and the in-process inspect).

    .venv/bin/python benchmarks/bench_inspect_local.py            # full size
    .venv/bin/python benchmarks/bench_inspect_local.py --quick    # seconds: 8 shards, 4 layers
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synthetic  # noqa: E402

from onboard.inspect_checkpoint.safetensors_header import bare_read_header  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent


def best_of(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small checkpoint (smoke test)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per contender (best is kept)")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the checkpoint (default .bench/)")
    parser.add_argument("--no-meta", action="store_true", help="skip the transformers meta-device contender")
    parser.add_argument("--kimi", action="store_true", help="the 1.03T Kimi-K2 layout (128 shards, 384 experts)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 5)
    name = "kimi-like" if args.kimi else "hub-deepseek-like"  # the hub benchmark's checkpoint unless --kimi
    root = args.dir or REPO_ROOT / ".bench" / (name + "-quick" if args.quick else name)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local benchmark never touches a hub

    start = time.perf_counter()
    if args.kimi or args.quick:
        _synthetic.build(root, quick=args.quick)
    else:
        _synthetic.build(root, shards=163, experts=256)
    shards = _synthetic.shard_paths(root)
    index = json.loads((root / "model.safetensors.index.json").read_text())
    n_tensors = len(index["weight_map"])
    print(f"checkpoint: {root} ({len(shards)} shards, {n_tensors:,} tensors; built/checked in "
          f"{time.perf_counter() - start:.1f} s)")  # fmt: skip

    from onboard.inspect_checkpoint import inspect
    from onboard.inspect_checkpoint.integrity import check_integrity
    from onboard.inspect_checkpoint.source import open_source

    def bare() -> None:
        for path in shards:
            bare_read_header(path)

    def headers() -> None:
        src = open_source(str(root))
        check_integrity(src, src.read_headers(src.safetensors_files()))

    def full() -> None:
        inspect(str(root))

    command = [sys.executable, "-m", "onboard", "inspect", str(root), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    # As installed: bytecode compiled once (pip does it at install), not recompiled by every timed process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def process() -> None:
        subprocess.run(command, stdout=subprocess.DEVNULL, env=env, check=True)

    profile = inspect(str(root))  # warm-up: page cache, imports, lazy tables
    bare()
    process()  # warm-up: writes the .pyc files a checkout may lack
    results: dict[str, list[float]] = {"bare": [], "headers": [], "inspect": [], "process": []}
    for _ in range(repeats):  # interleaved, so background load hits every contender alike
        results["bare"].append(best_of(bare, 1))
        results["headers"].append(best_of(headers, 1))
        results["inspect"].append(best_of(full, 1))
        results["process"].append(best_of(process, 1))
    t = {k: min(v) for k, v in results.items()}
    print(f"parameters (inspect): {profile.parameters.total:,}" if profile.parameters else "parameters: n/a")
    print(f"bare header read     {t['bare'] * 1e3:9.1f} ms")
    print(
        f"onboard headers+integrity {t['headers'] * 1e3:9.1f} ms   ratio headers/bare = {t['headers'] / t['bare']:.2f}"
    )
    print(f"onboard inspect      {t['inspect'] * 1e3:9.1f} ms   ratio inspect/bare = {t['inspect'] / t['bare']:.2f}"
          "  (in process)")  # fmt: skip
    print(f"onboard inspect CLI  {t['process'] * 1e3:9.1f} ms   ratio process/bare = {t['process'] / t['bare']:.2f}"
          "  (whole process; target <= 2.5)")  # fmt: skip
    if not args.no_meta:
        t["meta_process"] = time_meta_process(root, repeats=min(repeats, 3))
        print(f"transformers meta CLI {t['meta_process'] * 1e3:8.1f} ms   ratio meta_process/process = "
              f"{t['meta_process'] / t['process']:.1f}  (whole process, like for like; target >= 20)")  # fmt: skip
        t["meta"] = time_meta(root)
        print(f"transformers meta    {t['meta'] * 1e3:9.1f} ms   (in process, torch+transformers imported before "
              f"timing) meta/process = {t['meta'] / t['process']:.1f}, meta/inspect = {t['meta'] / t['inspect']:.1f}")  # fmt: skip
    return t


# What a user runs to count parameters with transformers: a fresh interpreter, start to exit.
META_SCRIPT = """
import json, sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM
cfg = json.load(open(sys.argv[1]))
cfg.pop("quantization_config", None)  # from_config would try to set up fp8 kernels; the shapes are the same
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), trust_remote_code=False)
print(model.num_parameters())
"""


def time_meta_process(root: Path, repeats: int) -> float:
    """Best wall time of `repeats` fresh processes running META_SCRIPT (imports included)."""
    times, out = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", META_SCRIPT, str(root / "config.json")], capture_output=True,
                             text=True, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout  # fmt: skip
        times.append(time.perf_counter() - start)
    print(f"meta model parameters (whole process): {int(out.split()[-1]):,}")
    return min(times)


def time_meta(root: Path) -> float:
    """Instantiate the model from its config on the meta device (imports done before timing)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = json.loads((root / "config.json").read_text())
    cfg.pop("quantization_config", None)  # from_config would try to set up fp8 kernels; the shapes are the same
    config = AutoConfig.for_model(**cfg)
    gc.collect()
    start = time.perf_counter()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    elapsed = time.perf_counter() - start
    print(f"meta model parameters: {model.num_parameters():,}")
    return elapsed


if __name__ == "__main__":
    main()

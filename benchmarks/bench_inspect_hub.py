"""Hub inspect of a 671B, 163-shard checkpoint behind the loopback hub: ceilings, not ratios.

Serves a synthetic DeepSeek-V3-sized checkpoint (256 experts, 61 layers, fp8 with block scales, ~93k tensors over 163
sparse shards) with tests/hubserver.py in its own process (http.server's default listen backlog, 5), with a latency
injected on every request (default 50 ms). Every timed run starts cold: no HF or onboard cache, a new HTTP session.

  default       onboard.inspect_checkpoint.inspect(repo), best of N: at most 1.0 s, and the bytes the hub served at
                most 1.1x what inspect needs (config.json, the index, every shard's length prefix and header).
  --against-hf  huggingface_hub's get_safetensors_metadata(repo) and inspect(repo) in turns, best of N each: inspect
                must not be slower (the backlog-5 comparison).

Prints each figure with its ceiling and exits 1 when one is above it (--quick: figures only).

    .venv/bin/python benchmarks/bench_inspect_hub.py                # 163 shards, 50 ms
    .venv/bin/python benchmarks/bench_inspect_hub.py --against-hf   # the same server, against huggingface_hub
    .venv/bin/python benchmarks/bench_inspect_hub.py --quick        # 8 small shards, 10 ms (smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO_ROOT))
# huggingface_hub reads these at import time: set them before anything imports it.
_CACHE = Path(tempfile.mkdtemp(prefix="onboard-bench-hub-"))
os.environ["HF_HUB_CACHE"] = str(_CACHE / "hf" / "hub")
os.environ["ONBOARD_CACHE"] = str(_CACHE / "onboard")
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "0"
os.environ.pop("HF_TOKEN", None)

import _synthetic  # noqa: E402

REPO = "bench/deepseek-like"
CEILING_S = 1.0  # hub inspect at 50 ms per request, 163 shards
CEILING_BYTES = 1.1  # bytes served over the bytes inspect needs


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def timed(url: str, fn: Callable[[], object]) -> tuple[float, dict]:
    """Wall seconds of `fn` from cold caches and a new HTTP session, and the server's counts for it with the CPU
    seconds of this process (the server runs in another): a figure taken on a busy machine can be told apart from
    the work itself."""
    from huggingface_hub import close_session

    close_session()
    for sub in ("hf", "onboard"):
        shutil.rmtree(_CACHE / sub, ignore_errors=True)
    _get(url + "/_reset")
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    return took, {**_get(url + "/_stats"), "cpu_s": cpu}


def needed_bytes(root: Path) -> int:
    """What inspect must read: config.json, the index and each shard's 8-byte prefix and header."""
    total = (root / "config.json").stat().st_size + (root / "model.safetensors.index.json").stat().st_size
    for shard in _synthetic.shard_paths(root):
        with open(shard, "rb") as f:
            total += 8 + struct.unpack("<Q", f.read(8))[0]
    return total


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; the exit status: 1 when a figure is above its ceiling (full size only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 small shards, 10 ms latency (figures, no ceilings)")
    parser.add_argument("--against-hf", action="store_true", help="compare with get_safetensors_metadata")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--latency-ms", type=float, default=None)
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    latency = (args.latency_ms if args.latency_ms is not None else (10 if args.quick else 50)) / 1000
    root = REPO_ROOT / ".bench" / ("hub-quick" if args.quick else "hub-deepseek-like")
    _synthetic.build(root, quick=args.quick, shards=8 if args.quick else 163, experts=None if args.quick else 256)
    n_shards = len(_synthetic.shard_paths(root))

    from huggingface_hub import HfApi

    from onboard.inspect_checkpoint import inspect

    cmd = [sys.executable, "-m", "tests.hubserver", "--repo", f"{REPO}={root}", "--latency", str(latency)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    seen: dict[str, object] = {}
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        os.environ["HF_ENDPOINT"] = url  # onboard reads it at call time

        def hf() -> None:
            seen["hf"] = HfApi(endpoint=url).get_safetensors_metadata(REPO)

        def onboard() -> None:
            seen["inspect"] = inspect(REPO)

        contenders = {"inspect": onboard, **({"hf": hf} if args.against_hf else {})}
        runs: dict[str, list[tuple[float, dict]]] = {name: [] for name in contenders}
        for _ in range(repeats):  # in turns, so a busy machine slows every contender alike
            for name, fn in contenders.items():
                runs[name].append(timed(url, fn))
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(_CACHE, ignore_errors=True)

    best = {name: min(results, key=lambda run: run[0]) for name, results in runs.items()}
    print(
        f"{n_shards} shards behind the loopback hub (listen backlog 5), {latency * 1e3:.0f} ms per request, "
        f"best of {repeats}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    for name, (took, stats) in best.items():
        print(
            f"  {name:8s} {took * 1e3:7.0f} ms ({stats['cpu_s'] * 1e3:.0f} ms CPU), "
            f"{stats['bytes_served'] / 1e6:.2f} MB in {stats['requests']} requests "
            f"({stats['shard_requests']} to shards), {stats['max_in_flight']} in flight at most"
        )
    profile = seen["inspect"]
    print(f"parameters: inspect {profile.parameters.total:,}")  # type: ignore[attr-defined]
    print(f"parameters by dtype: inspect {json.dumps(profile.parameters.by_dtype)}")  # type: ignore[attr-defined]
    took, stats = best["inspect"]
    ratio = stats["bytes_served"] / needed_bytes(root)
    checks = [
        (f"inspect {took * 1e3:.0f} ms", f"ceiling {CEILING_S * 1e3:.0f} ms", took <= CEILING_S),
        (f"bytes served {ratio:.3f}x the bytes needed", f"ceiling {CEILING_BYTES}x", ratio <= CEILING_BYTES),
    ]
    if args.against_hf:
        print(f"parameters by dtype: huggingface_hub {json.dumps(seen['hf'].parameter_count)}")  # type: ignore[attr-defined]
        hf_took = best["hf"][0]
        checks.append(
            (
                f"inspect {took * 1e3:.0f} ms, get_safetensors_metadata {hf_took * 1e3:.0f} ms",
                "not slower",
                took <= hf_took,
            )
        )
    for figure, ceiling, within in checks:
        print(f"{figure} ({ceiling}){'' if within else ': ABOVE THE CEILING'}")
    return 0 if args.quick or all(within for _, _, within in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

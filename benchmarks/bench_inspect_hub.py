"""Hub inspect of 100 shards behind the loopback hub server (50 ms per request) vs huggingface_hub's own reader.

Serves a synthetic 100-shard DeepSeek-V3-like checkpoint (sparse files) with tests/hubserver.py, 50 ms injected
latency on every request, and times in one run (fresh caches for every repeat, best of N):

  hf        HfApi(endpoint=...).get_safetensors_metadata(repo)    (huggingface_hub's safetensors reader)
  headers   onboard: open_source(repo) + read_headers(all shards)  (listing + every header)
  inspect   onboard.inspect_checkpoint.inspect(repo)               (the whole profile, config files included)

Prints hf/headers and hf/inspect (target >= 5) and the bytes each one fetched (the server's count of body bytes).

    .venv/bin/python benchmarks/bench_inspect_hub.py           # 100 shards, 50 ms
    .venv/bin/python benchmarks/bench_inspect_hub.py --quick   # 8 small shards, 10 ms
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_OFFLINE"] = "0"
os.environ.pop("HF_TOKEN", None)

import _synthetic  # noqa: E402

REPO = "bench/deepseek-like"


def fresh_caches() -> None:
    """Every repeat starts cold: no header cache, no downloaded config or index."""
    for sub in ("hf", "onboard"):
        shutil.rmtree(_CACHE / sub, ignore_errors=True)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def timed(url: str, fn: Callable[[], object]) -> tuple[float, int, int]:
    fresh_caches()
    _get(url + "/_reset")
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    stats = _get(url + "/_stats")
    return elapsed, stats["bytes_served"], stats["requests"]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 small shards, 10 ms latency (smoke test)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--latency-ms", type=float, default=None)
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    latency = (args.latency_ms if args.latency_ms is not None else (10 if args.quick else 50)) / 1000
    root = REPO_ROOT / ".bench" / ("hub-quick" if args.quick else "hub-deepseek-like")
    # DeepSeek-V3 sizes (256 experts, 61 layers) over 100 shards: ~900 tensors, ~110 KB of header per shard.
    _synthetic.build(root, quick=args.quick, shards=8 if args.quick else 100, experts=None if args.quick else 256)
    n_shards = len(_synthetic.shard_paths(root))

    from huggingface_hub import HfApi

    from onboard.inspect_checkpoint import inspect
    from onboard.inspect_checkpoint.source import open_source

    # The server runs in its own process, as a real hub would: its threads do not compete for our GIL.
    cmd = [sys.executable, "-m", "tests.hubserver", "--repo", f"{REPO}={root}", "--latency", str(latency)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        os.environ["HF_ENDPOINT"] = url  # onboard reads it at call time

        def hf() -> object:
            return HfApi(endpoint=url).get_safetensors_metadata(REPO)

        def headers() -> object:
            src = open_source(REPO)
            return src.read_headers(src.safetensors_files())

        def full() -> object:
            return inspect(REPO)

        contenders = {"hf": hf, "headers": headers, "inspect": full}
        runs: dict[str, list[tuple[float, int, int]]] = {k: [] for k in contenders}
        for _ in range(repeats):
            for name, fn in contenders.items():
                runs[name].append(timed(url, fn))
    finally:
        server.terminate()
        server.wait(timeout=10)
    shutil.rmtree(_CACHE, ignore_errors=True)
    best = {k: min(v) for k, v in runs.items()}
    print(f"{n_shards} shards behind the loopback hub, {latency * 1e3:.0f} ms per request, best of {repeats}")
    for name, label in (("hf", "huggingface_hub get_safetensors_metadata"), ("headers", "onboard listing + headers"),
                        ("inspect", "onboard inspect (whole profile)")):  # fmt: skip
        t, nbytes, nreq = best[name]
        print(f"  {label:42s} {t * 1e3:8.0f} ms  {nbytes / 1e6:7.2f} MB  {nreq:4d} requests")
    ratio_h = best["hf"][0] / best["headers"][0]
    ratio_i = best["hf"][0] / best["inspect"][0]
    print(f"speed-up hf/headers = {ratio_h:.1f}x, hf/inspect = {ratio_i:.1f}x  (target >= 5)")
    return {"hf": best["hf"][0], "headers": best["headers"][0], "inspect": best["inspect"][0]}


if __name__ == "__main__":
    main()

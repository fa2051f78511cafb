"""Hub inspect of a 671B, 163-shard checkpoint behind the loopback hub (50 ms per request) vs huggingface_hub's reader.

Serves a synthetic DeepSeek-V3-sized checkpoint (256 experts, 61 layers, fp8 with block scales, ~93k tensors over 163
sparse shards) with tests/hubserver.py, 50 ms injected latency on every request, and times in one run (fresh caches
and a new HTTP session for every repeat, as in a new process; best of N):

  hf        HfApi(endpoint=...).get_safetensors_metadata(repo)    (huggingface_hub's safetensors reader)
  headers   onboard: open_source(repo) + read_headers(all shards)  (listing + every header)
  inspect   onboard.inspect_checkpoint.inspect(repo)               (the whole profile, config files included)

Prints hf/headers and hf/inspect (target >= 5), the bytes each one fetched (the server's count of body bytes: the
listing, the index, the small files and the headers), the range-request bytes over the headers' own bytes (target
<= 1.5), range requests per shard (target <= 1.1), the most requests in flight at once, and the parameter count
(huggingface_hub's and inspect's).

    .venv/bin/python benchmarks/bench_inspect_hub.py           # 163 shards, 50 ms
    .venv/bin/python benchmarks/bench_inspect_hub.py --quick   # 8 small shards, 10 ms
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process, every thread (the server runs in another)
    return usage.ru_utime + usage.ru_stime


def fresh_client(ours: bool) -> None:
    """huggingface_hub's own HTTP client for its contender; for onboard's, the client onboard installs at its first
    request (`hub_client.install_client`), made anew as in a fresh process. Not timed: the session is closed here."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils._http import default_client_factory

    from onboard.inspect_checkpoint import curl_fetch, header_pack, hub_client

    header_pack.wait_for_pack_writes()  # the previous contender's header pack (written after it returned) lands untimed
    set_client_factory(default_client_factory)
    hub_client._checked = not ours
    curl_fetch.reset()  # libcurl's loop and its open connections: none kept from the previous repeat


def timed(url: str, fn: Callable[[], object]) -> tuple[float, dict]:
    fresh_client(ours=fn.__name__ != "hf")
    fresh_caches()
    _get(url + "/_reset")
    cpu, start = _cpu_s(), time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    return elapsed, {**_get(url + "/_stats"), "cpu_s": _cpu_s() - cpu}


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
    _synthetic.build(root, quick=args.quick, shards=8 if args.quick else 163, experts=None if args.quick else 256)
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

        seen: dict[str, object] = {}

        def hf() -> object:
            seen["hf"] = HfApi(endpoint=url).get_safetensors_metadata(REPO)
            return seen["hf"]

        def headers() -> object:
            src = open_source(REPO)
            seen["headers"] = src.read_headers(src.safetensors_files())
            seen["range_bytes"] = src.bytes_fetched
            return seen["headers"]

        def full() -> object:
            seen["inspect"] = inspect(REPO)
            return seen["inspect"]

        contenders = {"hf": hf, "headers": headers, "inspect": full}
        runs: dict[str, list[tuple[float, dict]]] = {k: [] for k in contenders}
        for _ in range(repeats):
            for name, fn in contenders.items():
                runs[name].append(timed(url, fn))
    finally:
        server.terminate()
        server.wait(timeout=10)
    shutil.rmtree(_CACHE, ignore_errors=True)
    best = {k: min(v, key=lambda run: run[0]) for k, v in runs.items()}
    print(f"{n_shards} shards behind the loopback hub, {latency * 1e3:.0f} ms per request, best of {repeats}")
    for name, label in (("hf", "huggingface_hub get_safetensors_metadata"), ("headers", "onboard listing + headers"),
                        ("inspect", "onboard inspect (whole profile)")):  # fmt: skip
        t, stats = best[name]
        print(f"  {label:42s} {t * 1e3:8.0f} ms ({stats['cpu_s']:.2f} s CPU)  {stats['bytes_served'] / 1e6:7.2f} MB  {stats['requests']:4d} "
              f"requests ({stats['range_requests']} ranged, {stats['list_requests']} listing), "
              f"{stats['max_in_flight']} in flight at most")  # fmt: skip
        overrun = stats["overrun_ms"]
        print(f"  {'':42s} the server's own time beyond the {latency * 1e3:.0f} ms per request: median "
              f"{overrun[len(overrun) // 2]:.0f} ms, max {overrun[-1]:.0f} ms (its work and queueing, one process)")  # fmt: skip
    header_bytes = sum(8 + h.header_len for h in seen["headers"].values())  # type: ignore[union-attr]
    ranged = best["headers"][1]["shard_requests"]
    print(f"headers {header_bytes / 1e6:.2f} MB; onboard's range requests fetched {seen['range_bytes'] / 1e6:.2f} MB "
          f"= {seen['range_bytes'] / header_bytes:.2f}x the headers (target <= 1.5), in {ranged} requests for "
          f"{n_shards} shards = {ranged / n_shards:.2f} per shard (target <= 1.1)")  # fmt: skip
    hf_params = sum(seen["hf"].parameter_count.values())  # type: ignore[attr-defined]
    ours = sum(t.numel for h in seen["headers"].values() for t in h.tensors.values())  # type: ignore[union-attr]
    profile = seen["inspect"]
    print(f"parameters: huggingface_hub {hf_params:,}, onboard headers {ours:,} (equal: {hf_params == ours}), "
          f"inspect's model total {profile.parameters.total:,}")  # type: ignore[attr-defined]  # fmt: skip
    ratio_h = best["hf"][0] / best["headers"][0]
    ratio_i = best["hf"][0] / best["inspect"][0]
    print(f"speed-up hf/headers = {ratio_h:.1f}x, hf/inspect = {ratio_i:.1f}x  (target >= 5)")
    return {"hf": best["hf"][0], "headers": best["headers"][0], "inspect": best["inspect"][0],
            "range_ratio": seen["range_bytes"] / header_bytes, "requests_per_shard": ranged / n_shards}  # fmt: skip


if __name__ == "__main__":
    main()

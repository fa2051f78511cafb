"""The sandboxed reference's forward vs transformers in process, same model, same dtype, same threads (CPU).

A llama-shaped model (~35M parameters, random weights, built from its config and saved to a temp dir) is loaded
twice: in this process (trust_remote_code=False) and in the sandbox worker through run_isolated (bubblewrap).
Prints the median forward time of each side and the ratio sandbox / in-process (target <= 1.5x). The sandbox's forward is timed inside the worker, so process start, imports and
loading do not count there; the whole call (start + imports + load + forwards + transfer back) is reported
separately, because that is what a caller waits for. The logits must agree exactly (same dtype and threads).

    python benchmarks/bench_sandbox.py            # ~35M params, seq 256, batch 1 and 4, 10 repeats
    python benchmarks/bench_sandbox.py --quick    # tiny model, seq 32, batch 1, 2 repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

FULL = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6, num_attention_heads=8,
            num_key_value_heads=4, vocab_size=16000, max_position_embeddings=2048)  # fmt: skip
QUICK = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)  # fmt: skip


def _in_process(checkpoint: Path, ids: torch.Tensor, repeats: int) -> tuple[torch.Tensor, list[float]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, trust_remote_code=False).eval()
    times = []
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first is a warm-up, as in the worker
            start = time.perf_counter()
            logits = model(input_ids=ids).logits
            times.append(time.perf_counter() - start)
    return logits, times[1:]


def _sandboxed(
    checkpoint: Path, ids: torch.Tensor, repeats: int
) -> tuple[torch.Tensor, list[float], float, float, float]:
    from onboard.sandbox import run_isolated

    start = time.perf_counter()
    out = run_isolated("onboard.sandbox.probes:logits",
                       {"checkpoint": str(checkpoint), "input_ids": ids.tolist(), "repeats": repeats + 1},
                       checkpoint=checkpoint)  # fmt: skip
    whole = time.perf_counter() - start
    assert out["threads"] == torch.get_num_threads(), (out["threads"], torch.get_num_threads())
    # what the call costs beyond the model's own work: process start, imports, isolation, result transfer
    overhead = whole - out["load_s"] - sum(out["forward_s"])
    return out["logits"], out["forward_s"][1:], out["load_s"], whole, overhead


def bench(config: dict, seq: int, batches: list[int], repeats: int) -> list[dict]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from onboard.sandbox import isolation_method

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**config))
        params = sum(p.numel() for p in model.parameters())
        model.save_pretrained(tmp)
        del model
        print(f"llama {params / 1e6:.1f}M params, float32, seq {seq}, isolation: {isolation_method()}", flush=True)
        for batch in batches:
            ids = torch.randint(0, config["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(batch))
            # in process before and after the sandbox: load from other processes hits both sides alike
            ref, t_before = _in_process(Path(tmp), ids, repeats)
            got, t_box, load_s, whole, overhead = _sandboxed(Path(tmp), ids, repeats)
            _, t_after = _in_process(Path(tmp), ids, repeats)
            t_in, t_sb = statistics.median(t_before + t_after), statistics.median(t_box)
            gap = float((got - ref).abs().max())
            rows.append(dict(batch=batch, in_process_s=t_in, sandbox_s=t_sb, ratio=t_sb / t_in, whole_call_s=whole,
                             load_s=load_s, overhead_s=overhead, max_abs_diff=gap))  # fmt: skip
            print(f"batch {batch}: forward in process {t_in * 1e3:8.1f} ms, in the sandbox {t_sb * 1e3:8.1f} ms, "
                  f"ratio sandbox/in-process {t_sb / t_in:5.2f}x (target <= 1.5x); whole sandboxed call "
                  f"{whole:6.1f} s (load {load_s:.1f} s, {repeats + 1} forwards, start + imports + transfer {overhead:.1f} s); "
                  f"max|Δlogit| {gap:.1e}", flush=True)  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, seq 32, batch 1, 2 repeats")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seq", type=int, default=256)
    args = parser.parse_args(argv)
    from transformers.utils import logging

    logging.disable_progress_bar()  # "Loading weights" bars would bury the figures
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    if args.quick:
        return bench(QUICK, 32, [1], 2)
    return bench(FULL, args.seq, [1, 4], args.repeats)


if __name__ == "__main__":
    main()

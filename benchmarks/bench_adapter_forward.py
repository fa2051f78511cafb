"""Adapter forward vs transformers eager, same weights (CPU by default).

Configurations: a ~100M-parameter llama-shaped model and a ~100M-parameter MoE (qwen3_moe-shaped); seq 512;
batch 1 and 8. Prints median wall time per forward for each side and the ratio transformers / adapter (target
>= 1.0: the adapter at least as fast). Also checks the logits agree (float32) so a fast-but-wrong run is visible.

    python benchmarks/bench_adapter_forward.py            # full (several minutes on 2 cores)
    python benchmarks/bench_adapter_forward.py --quick    # seq 128, batch 1 and 2, one repeat
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

REPO = Path(__file__).resolve().parents[1]

CONFIGS = {
    "llama-100M": (
        "llama",
        dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048),
    ),
    "moe-100M": (
        "qwen3_moe",
        dict(hidden_size=512, intermediate_size=1024, moe_intermediate_size=512, num_hidden_layers=8,
             num_attention_heads=8, num_key_value_heads=4, head_dim=64, num_experts=16, num_experts_per_tok=2,
             vocab_size=32000, max_position_embeddings=2048, norm_topk_prob=True),
    ),
}  # fmt: skip


def _time_pair(fn_a, fn_b, repeats: int) -> tuple[float, float]:
    """Median wall time of each, runs interleaved (a, b, a, b, ...) so load from other processes hits both alike."""
    fn_a(), fn_b()  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in ((fn_a, times[0]), (fn_b, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def bench(name: str, seq: int, batches: list[int], repeats: int) -> list[tuple]:
    from transformers import AutoConfig, AutoModelForCausalLM

    from onboard.generate_adapter.parity import load_adapter

    model_type, kwargs = CONFIGS[name]
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        hf = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **kwargs))
        hf.save_pretrained(tmp)
        params = sum(p.numel() for p in hf.parameters())
        hf = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager").eval()
        ours = load_adapter(REPO / "adapters" / f"{model_type}.py").Model.from_pretrained(tmp)
    rows = []
    for batch in batches:
        ids = torch.randint(0, kwargs["vocab_size"], (batch, seq), generator=torch.Generator().manual_seed(batch))
        with torch.inference_mode():
            gap = float((ours(ids) - hf(input_ids=ids).logits).abs().max())
            t_hf, t_ours = _time_pair(lambda ids=ids: hf(input_ids=ids), lambda ids=ids: ours(ids), repeats)
        rows.append((name, params / 1e6, batch, seq, t_hf, t_ours, t_hf / t_ours, gap))
        print(f"{name:11s} {params / 1e6:6.1f}M  batch {batch:2d} seq {seq}: transformers eager {t_hf * 1e3:8.1f} ms, "
              f"adapter {t_ours * 1e3:8.1f} ms, ratio {t_hf / t_ours:5.2f}x  (max|Δlogit| {gap:.1e})", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seq 128, batch 1 and 2, one repeat")
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    seq, batches, repeats = (128, [1, 2], 1) if args.quick else (512, [1, 8], args.repeats)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, CPU")
    for name in args.configs:
        bench(name, seq, batches, repeats)


if __name__ == "__main__":
    main()

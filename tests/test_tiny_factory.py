"""The tiny-checkpoint factory and the transformers ground truth that `onboard inspect` is tested against."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tiny.configs import WINDOW
from tests.tiny.factory import TINY, make_tiny_checkpoint, make_tiny_config
from tests.tiny.fixtures import tiny_checkpoint, tiny_ground_truth  # noqa: F401 - fixtures used by name

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Issue 2 acceptance: these must all have a tiny checkpoint.
REQUIRED = """llama mistral mixtral qwen2 qwen2_moe qwen3 qwen3_moe qwen3_next gemma gemma2 gemma3_text phi3 phimoe
deepseek_v2 deepseek_v3 gpt_oss olmo2 olmoe granite granitemoe cohere cohere2 starcoder2 gpt2 gpt_neox falcon glm4
glm4_moe minimax jamba mamba2 nemotron_h smollm3 llama4_text ernie4_5_moe exaone4 hunyuan_v1_moe apertus seed_oss lfm2
ernie4_5""".split()
KINDS = {"full", "sliding", "chunked", "mla", "linear", "ssm", "conv", "none"}
F32 = 4
# Hand-computed from the TINY configs: catches a factory or measurement regression, not only a crash.
EXPECTED_KINDS = {
    "llama": ["full", "full"],
    "mistral": ["sliding", "sliding"],
    "qwen2": ["full", "full"],  # sliding_window set but use_sliding_window=False
    "qwen3": ["full", "sliding"],  # max_window_layers=1
    "gemma2": ["sliding", "full"],
    "cohere2": ["sliding", "sliding", "sliding", "full"],
    "exaone4": ["sliding", "sliding", "sliding", "full"],
    "gpt_oss": ["sliding", "full"],
    "gpt_neo": ["full", "sliding"],
    "llama4_text": ["chunked", "chunked", "chunked", "full"],
    "deepseek_v3": ["mla", "mla", "mla"],
    "qwen3_next": ["linear", "linear", "linear", "full"],
    "minimax": ["full", "linear"],
    "jamba": ["ssm", "full"],
    "nemotron_h": ["ssm", "none", "full", "none"],
    "falcon_h1": ["full+ssm", "full+ssm"],
    "zamba2": ["ssm", "full+ssm", "ssm"],
    "recurrent_gemma": ["linear", "linear", "sliding"],
    "lfm2": ["conv", "full"],
    "mamba2": ["ssm", "ssm"],
    "rwkv": ["linear", "linear"],
    "kimi_linear": ["linear", "mla"],
    "deepseek_v32": ["mla", "mla", "mla"],
    "lfm3": ["conv", "sliding", "conv", "full"],
    # transformers 5.25: Ergo's every 4th layer is global (NoPE); Kolibri 1.1's indexed_attention layers attend like
    # full ones (a weightless indexer masks keys); MiniCPM5-MoE and Param2-MoE (GLM-4-MoE) attend fully everywhere.
    "ergo": ["sliding", "sliding", "sliding", "full"],
    "kolibri1_1": ["sliding", "full", "sliding", "full"],
    "minicpm5_moe": ["full", "full", "full"],
    "param2moe": ["full", "full", "full"],
}
KV_PER_TOKEN = {  # bytes per token per sequence over growing layers, float32
    "llama": 2 * 2 * 2 * 16 * F32,  # layers * (K, V) * kv heads * head_dim
    "gpt_bigcode": 2 * 2 * 1 * 16 * F32,  # MQA
    "gpt_oss": 1 * 2 * 2 * 16 * F32,  # the full layer only; the sliding one is capped
    "deepseek_v3": 3 * (32 + 8) * F32,  # MLA latent: kv_lora_rank + qk_rope_head_dim
    "deepseek_v32": 3 * (32 + 8 + 16) * F32,  # + DSA indexer keys (index_head_dim)
    "gemma4_text": 1 * 2 * 2 * 32 * F32,  # full layer with its own head_dim (global_head_dim=32)
    "mistral": 0,
    "mamba2": 0,
    "ergo": 1 * 2 * 2 * 16 * F32,  # the global layer only; head_dim = hidden / heads
    "kolibri1_1": 1 * 2 * 2 * 16 * F32,  # layer 1: layer 3 attends to layer 1's K/V and caches none of its own
    "minicpm5_moe": 3 * 2 * 2 * 16 * F32,  # the output gate (q_gate_proj) adds nothing to the cache
    "param2moe": 3 * 2 * 2 * 16 * F32,
}


def test_required_architectures_have_tiny_configs() -> None:
    missing = sorted(set(REQUIRED) - set(TINY))
    assert not missing, f"add tiny configs for {missing} to tests/tiny/configs.py TINY"
    assert len(TINY) >= 70


def test_unknown_override_is_rejected() -> None:
    with pytest.raises(ValueError, match="hidden_sise"):
        make_tiny_config("llama", {"hidden_sise": 32})
    with pytest.raises(KeyError, match="no tiny config"):
        make_tiny_config("not_a_model")


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = make_tiny_checkpoint("llama", tmp_path / "a", seed=3)
    b = make_tiny_checkpoint("llama", tmp_path / "b", seed=3)
    c = make_tiny_checkpoint("llama", tmp_path / "c", seed=4)
    data = [(d / "model.safetensors").read_bytes() for d in (a, b, c)]
    assert data[0] == data[1] != data[2]


def test_bfloat16_checkpoint_and_ground_truth(tmp_path: Path) -> None:
    from tests.tiny.ground_truth import ground_truth

    gt = ground_truth("qwen3", make_tiny_checkpoint("qwen3", tmp_path / "q", dtype="bfloat16"))
    assert gt["dtype"] == "bfloat16"
    assert gt["safetensors_numel_by_dtype"] == {"BF16": gt["num_parameters"]}
    assert gt["weights_bytes_measured"] == gt["safetensors_bytes"] == 2 * gt["num_parameters"]


def test_tokenizer_files_are_copied(tmp_path: Path, shared_data: Path) -> None:
    tok = shared_data / "qwen" / "qwen3-1.7b_mlx-bf16-copy"
    out = make_tiny_checkpoint("qwen3", tmp_path / "q", tokenizer_dir=tok)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (tok / name).read_bytes()
    assert not (out / "model.safetensors.index.json").exists()  # only tokenizer files travel


@pytest.mark.slow
@pytest.mark.parametrize("model_type", list(TINY))
def test_tiny_checkpoint_loads_runs_and_measures(model_type: str, tiny_checkpoint, tiny_ground_truth) -> None:  # noqa: F811
    import torch
    from transformers import AutoModelForCausalLM

    ckpt = tiny_checkpoint(model_type)
    model = AutoModelForCausalLM.from_pretrained(ckpt).eval()
    vocab = model.config.vocab_size
    with torch.no_grad():
        logits = model(input_ids=torch.randint(3, min(vocab, 1000), (2, 5))).logits
    assert logits.shape[:2] == (2, 5) and logits.shape[-1] >= vocab
    assert torch.isfinite(logits).all()

    gt = tiny_ground_truth(model_type)
    kv = gt["kv_cache"]
    assert gt["num_parameters"] == model.num_parameters()
    assert gt["numel_accounted"], f"file numel {gt['safetensors_numel']} vs params + {gt['persistent_buffers']}"
    assert len(gt["layer_kinds"]) == len(gt["sliding_window"]) == gt["num_layers"] == len(kv["per_layer"])
    assert {part for kind in gt["layer_kinds"] for part in kind.split("+")} <= KINDS
    short, long = kv["probe_tokens"]
    expected_total = kv["kv_bytes_per_token"] * long + kv["capped_bytes_per_sequence"] + kv["state_bytes_per_sequence"]
    assert kv["measured_total_bytes_at_long_probe"] == expected_total
    for row, window in zip(kv["per_layer"], gt["sliding_window"]):
        if row["capped_tokens"] is not None and window is not None:
            assert row["capped_tokens"] == window - 1  # transformers keeps window - 1 past tokens
    if gt["moe"] is not None:
        top_k = 1 if model_type == "zaya" else 2  # ZAYA's config accepts top-1 routing only
        assert (gt["moe"]["num_experts"], gt["moe"]["top_k"]) == (4, top_k)
    if model_type in EXPECTED_KINDS:
        assert gt["layer_kinds"] == EXPECTED_KINDS[model_type]
    if model_type in KV_PER_TOKEN:
        assert kv["kv_bytes_per_token"] == KV_PER_TOKEN[model_type]
    if model_type == "mistral":
        assert kv["capped_bytes_per_sequence"] == 2 * 2 * 2 * 16 * F32 * (WINDOW - 1)
    if model_type == "deepseek_v3":
        assert gt["moe"]["dense_layers"] == [0] and gt["moe"]["num_shared_experts"] == 1
        assert set(gt["persistent_buffers"]) == {f"model.layers.{i}.mlp.gate.e_score_correction_bias" for i in (1, 2)}

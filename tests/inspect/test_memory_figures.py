"""KV-cache figures of real configs (../shared/data) against the arithmetic done here from the published shapes.

A layer caches K and V for each token: kv_heads x head_dim each, kv-dtype bytes per element; a sliding layer stops
growing at its window. What users size a deployment by: bytes per token, per layer kind, per sequence.
"""

from __future__ import annotations

import json

import pytest

from onboard.inspect_checkpoint import profile_from_parts
from onboard.inspect_checkpoint.memory import parse_target
from onboard.profile import MemoryPlan


def memory_of(shared_data, rel: str, max_model_len: int, kv_dtype: str = "bfloat16") -> MemoryPlan:
    config = json.loads((shared_data / rel / "config.json").read_text())
    return profile_from_parts(config, None, max_model_len=max_model_len, kv_dtype=kv_dtype).memory


def kv_bytes_per_layer(kv_heads: int, head_dim: int, width: int) -> int:
    return kv_heads * head_dim * 2 * width  # K and V


@pytest.mark.parametrize(("kv_dtype", "width"), [("bfloat16", 2), ("fp8", 1), ("float32", 4)])
def test_llama_3_2_3b_every_layer_grows_with_every_token(shared_data, kv_dtype: str, width: int) -> None:
    plan = memory_of(shared_data, "llama3/llama-3.2-3b-instruct_hf-mirror", 8192, kv_dtype)
    per_token = 28 * kv_bytes_per_layer(8, 128, width)  # 28 layers, 8 KV heads of 128
    assert per_token == 114_688 * width // 2
    assert (plan.kv_bytes_per_token, plan.kv_bytes_per_token_by_kind) == (per_token, {"full": per_token})
    assert (plan.kv_bytes_per_sequence, plan.state_bytes_per_sequence) == (per_token * 8192, 0)
    assert plan.kv_dtype == kv_dtype and plan.max_model_len == 8192
    assert plan.target is None  # no --target: no fit claimed


@pytest.mark.parametrize("max_model_len", [300, 512, 4096])
def test_gemma_3_sliding_layers_stop_growing_at_their_window(shared_data, max_model_len: int) -> None:
    """Gemma 3 1B: 26 layers, every 6th global (4), the rest sliding over 512 tokens; 1 KV head of 256."""
    plan = memory_of(shared_data, "gemma/gemma-3-1b-it_user-upload", max_model_len)
    layer = kv_bytes_per_layer(1, 256, 2)
    full, sliding = 4, 22
    assert plan.kv_bytes_per_token_by_kind == {"full": full * layer, "sliding": sliding * layer}
    growing = full if max_model_len > 512 else full + sliding
    assert plan.kv_bytes_per_token == growing * layer
    cached = full * max_model_len + sliding * min(512, max_model_len)
    assert plan.kv_bytes_per_sequence == cached * layer


def test_gpt_oss_20b_alternating_128_token_windows(shared_data) -> None:
    plan = memory_of(shared_data, "gpt-oss/gpt-oss-20b_hf-mirror", 131072)
    layer = kv_bytes_per_layer(8, 64, 2)
    assert plan.kv_bytes_per_token_by_kind == {"full": 12 * layer, "sliding": 12 * layer}
    assert plan.kv_bytes_per_token == 12 * layer
    assert plan.kv_bytes_per_sequence == 12 * layer * 131072 + 12 * layer * 128


def test_mixtral_experts_do_not_change_the_cache(shared_data) -> None:
    plan = memory_of(shared_data, "mistral/mixtral-8x7b-v0.1_hf-mirror", 32768)
    assert plan.kv_bytes_per_token == 32 * kv_bytes_per_layer(8, 128, 2) == 131_072
    assert plan.kv_bytes_per_sequence == 131_072 * 32768  # 4 GiB per 32k-token sequence


def test_target_gpus_and_counts_as_users_write_them() -> None:
    from onboard.errors import InputError
    from onboard.inspect_checkpoint.memory import Target, parse_target

    assert parse_target("h100") == Target("h100", 1)
    assert parse_target("H100x8") == Target("h100", 8) == parse_target("8xh100")
    assert parse_target(" a100-80g x4 ") == Target("a100-80g", 4)
    assert parse_target("h100x1024") == Target("h100", 1024)
    for bad in ("h100x0", "h100x1025", "0xh100"):
        with pytest.raises(InputError, match="between 1 and 1024"):
            parse_target(bad)
    with pytest.raises(InputError, match="unknown --target 'v100'") as caught:
        parse_target("v100")
    assert "h100" in str(caught.value.hint) and "mi300x" in str(caught.value.hint)
    # The known GPUs as a user reads them: sorted, comma-separated.
    assert "one of: a10, a100, a100-40g, a100-80g, a10g, b200, b300, gb200, h100, h100-nvl," in str(caught.value.hint)


def test_kv_dtype_names_and_widths() -> None:
    from onboard.errors import InputError
    from onboard.inspect_checkpoint.memory import kv_dtype_bytes

    assert [kv_dtype_bytes(n) for n in ("BF16", "float16", "fp8_e5m2", "float32", "int8")] == [2, 2, 1, 4, 1]
    with pytest.raises(InputError, match="unknown --kv-dtype 'fp4'") as caught:
        kv_dtype_bytes("fp4")
    assert "bfloat16" in str(caught.value.hint)
    assert "one of: bf16, bfloat16, float16, float32, float8_e4m3fn," in str(caught.value.hint)


def test_deepseek_mla_latent_and_v3_2_indexer_keys(shared_data) -> None:
    """DeepSeek-R1 (no headers read): each of its 61 MLA layers caches one latent per token, kv_lora_rank 512 +
    qk_rope_head_dim 64, not per-head K and V. DeepSeek-V3.2 has the same shape plus its sparse-attention indexer,
    whose keys (index_head_dim 128, index_topk set, no layer_types in its config.json) are cached per token too."""
    r1 = json.loads((shared_data / "deepseek/deepseek-r1_hf-mirror/config.json").read_text())
    plan = profile_from_parts(r1, None, max_model_len=4096, kv_dtype="bfloat16").memory
    assert plan.kv_bytes_per_token_by_kind == {"mla": 61 * (512 + 64) * 2} == {"mla": 70_272}
    assert plan.kv_bytes_per_sequence == 70_272 * 4096 and plan.state_bytes_per_sequence == 0
    v3_2 = {**r1, "model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128,
            "index_n_heads": 64, "index_topk": 2048}  # fmt: skip
    assert "layer_types" not in v3_2
    plan = profile_from_parts(v3_2, None, max_model_len=4096, kv_dtype="bfloat16").memory
    assert plan.kv_bytes_per_token == 61 * (512 + 64 + 128) * 2 == 85_888


def test_concurrent_sequences_follow_the_per_sequence_figure(shared_data) -> None:
    """On one H100, the sequences the fit claims are the KV budget left after the weights divided by the per-sequence
    figure the plan reports, Gemma 3's sliding layers capped at their 512-token window (32k-token sequences)."""
    from onboard.inspect_checkpoint.target_fit import per_gpu_budget

    config = json.loads((shared_data / "gemma/gemma-3-1b-it_user-upload/config.json").read_text())
    plan = profile_from_parts(config, None, max_model_len=32768, target=parse_target("h100")).memory
    layer = kv_bytes_per_layer(1, 256, 2)
    assert plan.kv_bytes_per_sequence == (4 * 32768 + 22 * 512) * layer
    fit = plan.target
    assert fit.fits and fit.recommended_tensor_parallel == 1
    budget = per_gpu_budget(fit.memory_bytes_per_gpu, plan.weights_bytes, 1)
    assert fit.concurrent_sequences == int(budget // plan.kv_bytes_per_sequence) > 100

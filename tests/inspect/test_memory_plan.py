"""Memory plans never count unknown weights as 0 B; fits name the smallest valid TP degree or what would fit."""

from __future__ import annotations

import functools
import json

import pytest

from onboard.inspect_checkpoint import inspect, profile_from_parts
from onboard.inspect_checkpoint.memory import parse_target
from onboard.inspect_checkpoint.quant_bytes import byte_model
from onboard.inspect_checkpoint.summary import render_summary
from onboard.inspect_checkpoint.target_fit import CacheLayer, CacheModel, Sharding
from onboard.profile import ModelProfile

# Llama-3.2-3B's shape (values from its config.json), enough for transformers to build it on the meta device.
LLAMA_3B = {
    "model_type": "llama", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 28,
    "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}  # fmt: skip


@functools.cache
def _transformers_count() -> int:
    """LLAMA_3B's parameters as transformers builds it (meta device: shapes only): 3,212,749,824 with 5.24."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{k: v for k, v in LLAMA_3B.items() if k != "torch_dtype"})
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=False).num_parameters()


def test_unknown_model_type_is_unknown_not_zero():
    p = profile_from_parts({**LLAMA_3B, "model_type": "brand_new_arch"}, None, target=parse_target("h100x8"))
    assert p.memory.weights_bytes is None and p.memory.weights_source == "unknown"
    assert p.memory.target.fits is None and p.memory.target.recommended_tensor_parallel is None
    text = render_summary(p)
    assert "weights unknown" in text and "target 8× h100: unknown" in text and "0 B;" not in text
    note = next(f for f in p.findings if f.code == "no-safetensors-headers")
    assert "does not know model_type 'brand_new_arch'" in note.message
    assert ModelProfile.from_json(p.to_json()) == p


def test_quantization_without_a_byte_model_is_unknown():
    config = {**LLAMA_3B, "quantization_config": {"quant_method": "hqq_v9"}}
    p = profile_from_parts(config, None, target=parse_target("h100"))
    assert p.memory.weights_bytes is None and p.memory.target.fits is None
    assert any("'hqq_v9' has no byte model" in f.message for f in p.findings)


def test_incomplete_download_uses_the_index_total(tmp_path):
    """No header read: the index's total_size sizes the weights (not 0 B). Through inspect, a download whose listed
    shards are missing is unusable (fatal missing-shard): its memory plan is withheld as unknown, never 0 B."""
    index = {"metadata": {"total_size": 6_425_499_648}, "weight_map": {"lm_head.weight": "model-1.safetensors"}}
    p = profile_from_parts(LLAMA_3B, None, index=index)
    assert p.memory.weights_source == "index" and p.memory.weights_bytes == 6_425_499_648
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_3B))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    p = inspect(str(tmp_path))
    assert p.memory is None and "memory" in p.unknown and p.findings[0].code == "missing-shard"


def test_does_not_fit_says_what_would():
    # 6.4 GB of weights + 14 GiB of bf16 KV for one 131072-token sequence > the 19.6 GiB usable on one L4.
    p = profile_from_parts(LLAMA_3B, None, target=parse_target("l4"), max_model_len=131072)
    fit = p.memory.target
    assert fit.fits is False and fit.recommended_tensor_parallel is None
    would = " | ".join(fit.would_fit)
    assert "2× l4 at tensor parallel 2" in would
    assert "fp8 KV cache (--kv-dtype fp8) at tensor parallel 1" in would
    shorter = next(w for w in fit.would_fit if "--max-model-len" in w)
    length = int(shorter.split("--max-model-len ")[1].split(")")[0])
    assert 32768 < length < 131072
    assert profile_from_parts(LLAMA_3B, None, target=parse_target("l4"), max_model_len=length).memory.target.fits
    assert "does not fit; would fit with" in render_summary(p)


def test_mla_cache_is_replicated_gqa_is_split():
    mla = CacheModel((CacheLayer(576, None, True),), 0, 128)
    gqa = CacheModel((CacheLayer(2 * 8 * 128, None, False),), 0, 8)
    assert mla.bytes_per_gpu(1000, 2, 8) == mla.bytes_per_gpu(1000, 2, 1) == 576 * 2 * 1000
    assert gqa.bytes_per_gpu(1000, 2, 8) == gqa.bytes_per_gpu(1000, 2, 1) / 8
    # KV heads fewer than the TP degree are replicated: 8 heads on 16 ranks keep one head each.
    assert gqa.bytes_per_gpu(1000, 2, 16) == gqa.bytes_per_gpu(1000, 2, 8)


def test_valid_tensor_parallel_degrees():
    gqa = Sharding(attention_heads=32, kv_heads=8, mla=False, mlp_widths=(14336,), quant_block=None)
    assert gqa.valid(16) == [1, 2, 4, 8, 16]
    assert "6 KV heads" in Sharding(24, 6, False, (), None).why_not(4)
    # Qwen3-30B-A3B-FP8 shape: 768-wide experts with 128×128 fp8 blocks; tp=4 leaves 192 rows, not whole blocks.
    fp8 = Sharding(attention_heads=32, kv_heads=4, mla=False, mlp_widths=(768, 6144), quant_block=128)
    assert fp8.valid(8) == [1, 2]
    assert "not a multiple of the 128-row quantization block" in fp8.why_not(4)


def test_byte_models():
    fp8 = byte_model({"quant_method": "fp8", "weight_block_size": [128, 128]})
    assert fp8.tensor_bytes((2048, 7168)) == 2048 * 7168 + 16 * 56 * 4
    # Fused experts: one 128×128 grid of scales per expert.
    assert fp8.tensor_bytes((256, 4096, 7168)) == 256 * (4096 * 7168 + 32 * 56 * 4)
    mxfp4 = byte_model({"quant_method": "mxfp4"})
    assert mxfp4.experts_only and mxfp4.tensor_bytes((32, 5760, 2880)) == 32 * (5760 * 2880 // 2 + 5760 * 90)
    gptq = byte_model({"quant_method": "gptq", "bits": 4, "group_size": 128})
    assert gptq.tensor_bytes((4096, 4096)) == 4096 * 4096 // 2 + 4096 * 32 * 2 + 4096 * 32 // 2
    assert byte_model({"quant_method": "unheard_of"}) is None


@pytest.mark.parametrize("kv_dtype", ["bfloat16", "fp8"])
def test_estimated_plan_round_trips(kv_dtype):
    p = profile_from_parts(LLAMA_3B, None, target=parse_target("h100x2"), kv_dtype=kv_dtype)
    assert p.memory.weights_source == "estimated" and p.memory.weights_estimate.parameters == _transformers_count()
    assert ModelProfile.from_json(p.to_json()) == p


# microsoft/Phi-3-medium-4k-instruct config.json: 40 heads over 10 KV heads, 17,920-wide MLP.
PHI3_MEDIUM = {
    "model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "hidden_size": 5120, "intermediate_size": 17920,
    "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 10, "vocab_size": 32064,
    "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip
# Qwen/Qwen3-30B-A3B-FP8 config.json: 768-wide experts, weights in 128x128 fp8 blocks.
QWEN3_30B_A3B_FP8 = {
    "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}  # fmt: skip


def test_tensor_parallel_degrees_engines_accept_on_8_gpus(shared_data):
    """vLLM splits attention heads and KV heads (or replicates KV heads evenly) and the MLP's rows; fp8 blocks must
    stay whole on each rank. The degrees ≤ 8 of three real configs, and why the first refused one is refused."""
    gemma = json.loads((shared_data / "gemma/gemma-3-1b-it_user-upload/config.json").read_text())
    fits = {
        name: profile_from_parts(config, None, target=parse_target("h100x8"), max_model_len=4096).memory.target
        for name, config in (("phi3", PHI3_MEDIUM), ("gemma3", gemma), ("qwen3_moe", QWEN3_30B_A3B_FP8))
    }
    # 10 KV heads: 4 and 8 ranks neither split nor replicate them; 5 ranks take 8 heads and 2 KV heads each.
    assert fits["phi3"].valid_tensor_parallel == (1, 2, 5)
    assert "tp=3: 40 attention heads do not split 3 ways" in " ".join(fits["phi3"].notes)
    # Gemma 3 1B: 4 heads over 1 KV head (replicated); its 6,912-wide MLP would split 3, 6 and 8 ways.
    assert fits["gemma3"].valid_tensor_parallel == (1, 2, 4)
    # 768-wide experts over 4 ranks leave 192 rows: not whole 128-row blocks. 6,144 / 8 = 768 would be.
    assert fits["qwen3_moe"].valid_tensor_parallel == (1, 2)

"""Real configs of popular models (../shared/data) give profiles consistent with published facts."""

from __future__ import annotations

import json

import pytest

from onboard.inspect_checkpoint import profile_from_parts
from onboard.inspect_checkpoint.memory import GPUS, parse_target
from onboard.inspect_checkpoint.summary import render_summary
from onboard.inspect_checkpoint.target_fit import ACTIVATION_RESERVE, GPU_MEMORY_UTILIZATION
from onboard.profile import ModelProfile


def _profile(shared_data, rel: str, **kw) -> ModelProfile:
    folder = shared_data / rel
    config = json.loads((folder / "config.json").read_text())
    index_file = folder / "model.safetensors.index.json"
    index = json.loads(index_file.read_text()) if index_file.exists() else None
    return profile_from_parts(config, None, index=index, **kw)


def test_deepseek_r1_mla_moe_fp8_yarn(shared_data):
    p = _profile(shared_data, "deepseek/deepseek-r1_hf-mirror")
    assert p.model_type == "deepseek_v3"
    assert {"mla", "moe", "shared_experts", "router_correction_bias", "sigmoid_router", "mtp", "rope:yarn",
            "quantized:fp8", "dense_first_layers"} <= set(p.features)  # fmt: skip
    assert set(p.layer_kinds()) == {"mla"} and len(p.layers) == 61
    assert [layer.mlp for layer in p.layers[:4]] == ["dense", "dense", "dense", "moe"]
    assert p.moe and (p.moe.num_experts, p.moe.top_k, p.moe.num_shared_experts) == (256, 8, 1)
    assert p.moe.n_group == 8 and p.moe.topk_group == 4 and p.moe.routed_scaling_factor == 2.5
    assert p.quantization and p.quantization.block_size == (128, 128) and p.quantization.fmt == "e4m3"
    assert p.rope and p.rope.scaling["factor"] == 40 and p.rope.original_max_position_embeddings == 4096
    assert p.mtp_layers == 1
    # vLLM's head_size for MLA models is the latent width: kv_lora_rank + qk_rope_head_dim = 576.
    assert p.memory.kv_bytes_per_token == 61 * 576 * 2


def test_gpt_oss_sinks_alternation_moe_mxfp4(shared_data):
    p = _profile(shared_data, "gpt-oss/gpt-oss-20b_hf-mirror")
    assert {"attention_sinks", "sliding_window", "interleaved_attention", "moe", "quantized:mxfp4", "rope:yarn",
            "gqa"} <= set(p.features)  # fmt: skip
    assert p.layer_kinds()[:4] == ["sliding", "full", "sliding", "full"]
    assert p.layers[0].window == 128 and p.layers[1].window is None
    truth = json.loads((shared_data / "vllm/base_model_arch_groundtruth.json").read_text())["lmsys/gpt-oss-20b-bf16"]
    assert p.dims.hidden_size == truth["hidden_size"]
    assert p.dims.num_layers == truth["total_num_hidden_layers"]
    assert p.dims.head_dim == truth["head_size"]
    assert p.dims.num_kv_heads == truth["total_num_kv_heads"]
    assert p.moe.num_experts == truth["num_experts"]
    assert p.memory.weights_bytes > 10e9  # from the index metadata: ~13.8 GB of MXFP4 weights
    # KV: 12 full layers grow with the context, 12 sliding layers stop at 128 tokens.
    per_layer = 8 * 64 * 2 * 2
    assert p.memory.kv_bytes_per_token == 12 * per_layer  # at 131072 tokens only the full layers still grow
    assert p.memory.kv_bytes_per_token_by_kind == {"sliding": 12 * per_layer, "full": 12 * per_layer}
    assert p.memory.kv_bytes_per_sequence == 12 * per_layer * 131072 + 12 * per_layer * 128


def test_gemma_family(shared_data):
    g1 = _profile(shared_data, "gemma/gemma-2b-it_hf-mirror")
    assert {"mqa", "norm_offset", "embedding_scaling", "tied_embeddings"} <= set(g1.features)
    assert g1.activation == "gelu_pytorch_tanh"  # config says gelu; Gemma computes the tanh approximation
    assert any(f.code == "activation-overridden" for f in g1.findings)
    g3 = _profile(shared_data, "gemma/gemma-3-1b-it_user-upload")
    kinds = g3.layer_kinds()
    assert kinds[:6] == ["sliding"] * 5 + ["full"] and kinds.count("full") == 4
    assert g3.rope.local_theta == 10000 and g3.rope.theta == 1_000_000
    assert {"qk_norm", "query_pre_attn_scalar", "sandwich_norm", "sliding_window"} <= set(g3.features)


def test_llama_mixtral_phi_smollm_qwen(shared_data):
    l2 = _profile(shared_data, "llama2/llama-2-7b-hf_hf-mirror")
    assert l2.features == ("rope:default",) and l2.dims.num_kv_heads == 32
    l3 = _profile(shared_data, "llama3/llama-3.2-3b-instruct_hf-mirror")
    assert "rope:llama3" in l3.features and l3.rope.scaling["factor"] == 32.0 and "gqa" in l3.features
    mx = _profile(shared_data, "mistral/mixtral-8x7b-v0.1_hf-mirror")
    assert mx.moe and (mx.moe.num_experts, mx.moe.top_k) == (8, 2) and "sliding_window" not in mx.features
    phi = _profile(shared_data, "phi/phi-3-mini-128k-instruct_user-upload")
    assert "rope:longrope" in phi.features and phi.rope.original_max_position_embeddings == 4096
    assert len(phi.rope.scaling["long_factor"]) == 48
    smol = _profile(shared_data, "smollm/smollm3-3b_hf-copy")
    assert "nope_layers" in smol.features
    assert [layer.rope for layer in smol.layers[:4]] == [True, True, True, False]
    qwen = _profile(shared_data, "qwen/qwen3-1.7b_mlx-bf16-copy")
    assert {"gqa", "qk_norm", "tied_embeddings"} <= set(qwen.features)


def test_target_fit_tensor_parallel(shared_data):
    # DeepSeek-R1's config alone (no headers, no index): weights estimated from config, MTP layer included. The
    # published checkpoint's index says total_size 688,586,727,753 bytes (163 shards).
    big = _profile(shared_data, "deepseek/deepseek-r1_hf-mirror", target=parse_target("h200x8"),
                   max_model_len=32768)  # fmt: skip
    mem = big.memory
    assert mem.weights_source == "estimated" and mem.weights_bytes == pytest.approx(688.6e9, rel=0.005)
    assert mem.weights_estimate.mtp_parameters == pytest.approx(13.5e9, rel=0.05)  # one MTP layer, ~14B published
    assert mem.kv_bytes_per_sequence == 61 * 576 * 2 * 32768
    fit = mem.target
    # 689 GB / 4 = 172 GB per GPU > 141 GiB: the smallest valid degree is 8 (128 heads split 1, 2, 4, 8 ways).
    assert fit.fits and fit.recommended_tensor_parallel == 8 and fit.valid_tensor_parallel == (1, 2, 4, 8)
    # The MLA latent is whole on every rank (vLLM, SGLang): concurrency is the budget over one full latent cache.
    budget = GPUS["h200"] * GPU_MEMORY_UTILIZATION - ACTIVATION_RESERVE - mem.weights_bytes / 8
    assert fit.concurrent_sequences == int(budget // mem.kv_bytes_per_sequence) > 0
    assert "estimated from config" in render_summary(big) and "tensor parallel 8" in render_summary(big)
    mx = _profile(shared_data, "mistral/mixtral-8x7b-v0.1_hf-mirror", target=parse_target("h100x8"))
    fit = mx.memory.target
    assert mx.memory.weights_bytes > 90e9 and mx.memory.weights_source == "index"
    assert fit.fits and fit.recommended_tensor_parallel == 2 and fit.concurrent_sequences > 0
    one = _profile(shared_data, "mistral/mixtral-8x7b-v0.1_hf-mirror", target=parse_target("l4"))
    assert one.memory.target.fits is False
    assert any("l4 at tensor parallel" in alt for alt in one.memory.target.would_fit)


def test_smollm3_weights_from_config_alone(shared_data):
    # transformers 5.24: SmolLM3ForCausalLM(config).num_parameters() == 3,075,098,624 (tied head, 3.08B published).
    p = _profile(shared_data, "smollm/smollm3-3b_hf-copy")
    assert p.memory.weights_source == "estimated" and p.memory.weights_estimate.dtype == "bfloat16"
    assert p.memory.weights_bytes == pytest.approx(2 * 3_075_098_624, rel=0.02)


@pytest.mark.parametrize("rel", ["qwen/qwen3-1.7b_mlx-bf16-copy", "llama3/llama-3.2-3b-instruct_hf-mirror",
                                 "gemma/gemma-2b-it_hf-mirror", "mistral/mixtral-8x7b-v0.1_hf-mirror",
                                 "gpt-oss/gpt-oss-20b_hf-mirror"])  # fmt: skip
def test_estimate_from_config_equals_index_total(shared_data, rel):
    """The config-only estimate against the real checkpoint's index total_size (gpt-oss: MXFP4 experts)."""
    folder = shared_data / rel
    config = json.loads((folder / "config.json").read_text())
    total = json.loads((folder / "model.safetensors.index.json").read_text())["metadata"]["total_size"]
    p = profile_from_parts(config, None)
    assert p.memory.weights_source == "estimated"
    assert p.memory.weights_bytes == pytest.approx(total, rel=0.01)


LEGACY_KEYS = {"rope_theta", "rope_scaling", "rope_local_base_freq", "partial_rotary_factor"}


def test_legacy_keys_transformers_maps_are_not_novel(shared_data):
    """Pre-v5 configs carry rope_theta / rope_scaling at the top level; transformers 5 folds them into
    rope_parameters, so they are the family's own keys, not new ones."""
    configs = sorted(shared_data.rglob("config.json"))
    assert len(configs) >= 10
    carried = 0
    for path in configs:
        config = json.loads(path.read_text())
        carried += bool(LEGACY_KEYS & set(config))
        p = profile_from_parts(config, None, index={"metadata": {"total_size": 1}})
        new_keys = [line for line in p.novelty if line.startswith("config keys not in")]
        assert not [k for line in new_keys for k in LEGACY_KEYS if k in line], (path, new_keys)
    assert carried >= 8  # the check saw the keys it is about


@pytest.mark.parametrize("rel", ["deepseek/deepseek-r1_hf-mirror", "gpt-oss/gpt-oss-20b_hf-mirror",
                                 "phi/phi-3-mini-128k-instruct_user-upload"])  # fmt: skip
def test_profile_json_round_trip(shared_data, rel):
    p = _profile(shared_data, rel, target=parse_target("h100x4"))
    assert ModelProfile.from_json(p.to_json()) == p

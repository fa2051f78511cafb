"""MLA block vs transformers' DeepseekV3Attention (eager, float32) with the same state dict: q_lora on/off,
interleaved and half-split rope, yarn rope with mscale_all_dim (softmax scale correction)."""

from __future__ import annotations

import pytest
import torch

from onboard.blocks.mla import MLAttention, mla_scale
from onboard.blocks.rotary import RopeConfig, RotaryEmbedding
from tests.blocks._hf import eager, full_table, hf_mask, randomize

B, S, HIDDEN = 2, 9, 64


def _config(q_lora_rank: int | None, interleave: bool, yarn: bool):
    from transformers import DeepseekV3Config

    rope = {"rope_type": "default", "rope_theta": 10000.0}
    if yarn:
        rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64}
        rope |= {"mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}
    return eager(
        DeepseekV3Config(
            hidden_size=HIDDEN,
            num_attention_heads=4,
            num_key_value_heads=4,
            q_lora_rank=q_lora_rank,
            kv_lora_rank=16,
            qk_nope_head_dim=8,
            qk_rope_head_dim=8,
            v_head_dim=12,
            rope_interleave=interleave,
            max_position_embeddings=256,
            rope_parameters=rope,
            n_routed_experts=4,
            n_group=2,
            topk_group=1,
        )
    )


@pytest.mark.parametrize("q_lora_rank", [None, 24], ids=["q_proj", "q_lora"])
@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "half-split"])
@pytest.mark.parametrize("yarn", [False, True], ids=["default-rope", "yarn"])
def test_mla_equals_deepseek_v3_attention(q_lora_rank: int | None, interleave: bool, yarn: bool) -> None:
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention

    cfg = _config(q_lora_rank, interleave, yarn)
    hf = DeepseekV3Attention(cfg, 0)
    randomize(hf)
    rope_cfg = RopeConfig.from_dict(cfg.to_dict(), head_dim=cfg.qk_rope_head_dim)
    ours = MLAttention(
        HIDDEN,
        4,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=8,
        v_head_dim=12,
        rms_norm_eps=cfg.rms_norm_eps,
        scale=mla_scale(16, rope_cfg),
        rope_interleaved=interleave,
    )
    ours.load_state_dict(hf.state_dict(), strict=True)  # same parameter names as the checkpoint
    assert ours.scale == pytest.approx(hf.scaling, rel=1e-12)
    x = torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(3))
    cos, sin = RotaryEmbedding(rope_cfg)(torch.arange(S)[None].expand(B, -1))
    with torch.no_grad():
        expected, _ = hf(x, (full_table(cos), full_table(sin)), hf_mask(cfg, x, sliding=False))
        got = ours(x, cos, sin)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


# --- DeepSeek Sparse Attention: the indexer's top-k selection ------------------------------------------------------


def _dsa(family: str, topk: int):
    from transformers import AutoConfig

    cfg = AutoConfig.for_model(family, hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=4,
                               q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=12,
                               index_n_heads=2, index_head_dim=16, index_topk=topk, max_position_embeddings=256,
                               n_routed_experts=4, n_group=2, topk_group=1, num_hidden_layers=1)  # fmt: skip
    return eager(cfg)


@pytest.mark.parametrize(("family", "interleaved"), [("deepseek_v32", False), ("glm_moe_dsa", True)])
def test_sparse_mla_equals_the_dsa_attention(family: str, interleaved: bool) -> None:
    """MLA with the DSA indexer against DeepseekV32Attention (half-split indexer rotary) and GlmMoeDsaAttention
    (interleaved): topk 3 of up to 9 keys, so selection cuts in. The same weights without the indexer, or with the
    other rotary layout, differ: the selection and its rotary are what is checked."""
    import importlib

    from onboard.blocks.mla import IndexerSpec

    cfg = _dsa(family, topk=3)
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    hf = getattr(module, {"deepseek_v32": "DeepseekV32Attention", "glm_moe_dsa": "GlmMoeDsaAttention"}[family])(cfg, 0)
    randomize(hf, std=0.5)
    rope_cfg = RopeConfig.from_dict(cfg.to_dict(), head_dim=cfg.qk_rope_head_dim)

    def ours(indexer: IndexerSpec | None) -> MLAttention:
        m = MLAttention(HIDDEN, 4, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
                        v_head_dim=12, rms_norm_eps=cfg.rms_norm_eps, rope_interleaved=True,
                        indexer=indexer)  # fmt: skip
        m.load_state_dict(hf.state_dict(), strict=indexer is not None)
        return m

    x = torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(3))
    cos, sin = RotaryEmbedding(rope_cfg)(torch.arange(S)[None].expand(B, -1))
    with torch.no_grad():
        expected = hf(x, (full_table(cos), full_table(sin)), hf_mask(cfg, x, sliding=False))[0]
        got = ours(IndexerSpec(2, 16, 3, rope_interleaved=interleaved))(x, cos, sin)
        dense = ours(None)(x, cos, sin)
        other_rope = ours(IndexerSpec(2, 16, 3, rope_interleaved=not interleaved))(x, cos, sin)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert (dense - expected).abs().max() > 1e-2
    assert (other_rope - expected).abs().max() > 1e-3

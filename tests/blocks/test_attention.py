"""Attention block vs transformers' eager attention modules with shared weights (float32): GQA (llama), MQA,
sliding window + soft-capping + query_pre_attn_scalar (gemma2), sinks + sliding window (gpt_oss), QK-norm per head
(qwen3), over all heads (olmo2), after the rotary embedding (hunyuan_v1) and per-head LayerNorm with interleaved rope
(cohere). HF's own masks are used, so
the sliding-window boundary convention is checked too."""

from __future__ import annotations

import math

import pytest
import torch

from onboard.blocks.attention import Attention, attend, causal_mask
from onboard.blocks.norms import QKNormSpec
from onboard.blocks.rotary import RopeConfig, RotaryEmbedding
from tests.blocks._hf import copy_linear, eager, full_table, fuse_linear, hf_mask, randomize

B, S, HIDDEN = 2, 11, 64
ATOL = RTOL = 1e-5


def _run(
    hf_attn,
    cfg,
    ours: Attention,
    *,
    sliding: bool,
    half_tables: bool = False,
    interleaved: bool = False,
    hf_norms: tuple[str, str] = ("q_norm", "k_norm"),
) -> torch.Tensor:
    """Asserts that `ours` matches `hf_attn` with the same weights; returns transformers' output."""
    randomize(hf_attn)
    fuse_linear(ours.qkv_proj, hf_attn.q_proj, hf_attn.k_proj, hf_attn.v_proj)
    copy_linear(ours.o_proj, hf_attn.o_proj)
    if ours.gate_proj is not None:
        copy_linear(ours.gate_proj, hf_attn.gate_proj)
    with torch.no_grad():
        for name in ("sinks",):
            if getattr(ours, name, None) is not None:
                getattr(ours, name).copy_(getattr(hf_attn, name))
        for name, hf_name in (*zip(("q_norm", "k_norm"), hf_norms), ("sub_norm", "attn_sub_norm")):
            if getattr(getattr(ours, name, None), "weight", None) is not None:
                getattr(ours, name).weight.copy_(getattr(hf_attn, hf_name).weight)
    x, cos, sin = _inputs(cfg)
    hf_pe = (cos, sin) if half_tables else (full_table(cos, interleaved), full_table(sin, interleaved))
    with torch.no_grad():
        expected, _ = hf_attn(x, position_embeddings=hf_pe, attention_mask=hf_mask(cfg, x, sliding))
        got = ours(x, cos, sin)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=RTOL)
    return expected


def _inputs(cfg) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The input _run feeds both modules, and our rotary half tables for it."""
    x = torch.randn(B, S, HIDDEN, generator=torch.Generator().manual_seed(1))
    cos, sin = RotaryEmbedding(RopeConfig.from_dict(cfg.to_dict()))(torch.arange(S)[None].expand(B, -1))
    return x, cos, sin


def _differs(ours: Attention, cfg, expected: torch.Tensor) -> bool:
    """Whether `ours` (changed after _run matched it) now misses transformers' output by more than 1e-2."""
    with torch.no_grad():
        return bool((ours(*_inputs(cfg)) - expected).abs().max() > 1e-2)


@pytest.mark.parametrize("kv_heads", [2, 1], ids=["gqa", "mqa"])
def test_llama_gqa_and_mqa(kv_heads: int) -> None:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention

    cfg = eager(LlamaConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=kv_heads, head_dim=16))
    ours = Attention(HIDDEN, 4, kv_heads, 16)
    _run(LlamaAttention(cfg, 0), cfg, ours, sliding=False)


def test_gemma2_sliding_window_softcap_query_pre_attn_scalar() -> None:
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention

    cfg = Gemma2Config(
        hidden_size=HIDDEN,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=24,
        attn_logit_softcapping=5.0,  # small cap so capping really bites on random weights
        sliding_window=4,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
    )
    eager(cfg)
    ours = Attention(HIDDEN, 4, 2, 16, scale=24**-0.5, sliding_window=4, softcap=5.0)
    _run(Gemma2Attention(cfg, 0), cfg, ours, sliding=True)


@pytest.mark.parametrize("layer", [0, 1], ids=["sliding", "full"])
def test_gpt_oss_sinks(layer: int) -> None:
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention

    cfg = GptOssConfig(
        hidden_size=HIDDEN,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        sliding_window=4,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        num_local_experts=4,
        attention_bias=True,
    )
    eager(cfg)
    ours = Attention(HIDDEN, 4, 2, 16, qkv_bias=True, o_bias=True, sinks=True, sliding_window=4 if layer == 0 else None)
    _run(GptOssAttention(cfg, layer), cfg, ours, sliding=layer == 0, half_tables=True)


@pytest.mark.parametrize("layer", [0, 1], ids=["full", "sliding"])
def test_mimo_v2_flash_narrow_values_scaled_and_per_layer_kv_heads(layer: int) -> None:
    """MiMo-V2-Flash: values of 8 dims against 16 for queries and keys (o_proj reads H x 8), scaled by
    attention_value_scale; its sliding layers have twice the KV heads and sinks. Without the value scale the same
    weights differ."""
    from transformers import LlamaConfig, MiMoV2FlashConfig
    from transformers.models.mimo_v2_flash.modeling_mimo_v2_flash import MiMoV2FlashAttention

    cfg = eager(MiMoV2FlashConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                  v_head_dim=8, attention_value_scale=0.707, sliding_window=4, num_hidden_layers=2,
                                  layer_types=["full_attention", "sliding_attention"], n_routed_experts=4))  # fmt: skip
    hf = MiMoV2FlashAttention(cfg, layer)
    randomize(hf)
    sliding = layer == 1
    ours = Attention(HIDDEN, 4, 2 if sliding else 1, 16, v_head_dim=8, v_scale=0.707, sinks=sliding,
                     sliding_window=4 if sliding else None)  # fmt: skip
    fuse_linear(ours.qkv_proj, hf.q_proj, hf.k_proj, hf.v_proj)
    copy_linear(ours.o_proj, hf.o_proj)
    x, cos, sin = _inputs(LlamaConfig(hidden_size=HIDDEN, num_attention_heads=4, head_dim=16))
    with torch.no_grad():
        if sliding:
            ours.sinks.copy_(hf.sinks)
        expected = hf(x, position_embeddings=(full_table(cos), full_table(sin)), attention_mask=hf_mask(cfg, x, sliding))[0]
        torch.testing.assert_close(ours(x, cos, sin), expected, atol=ATOL, rtol=RTOL)
        ours.v_scale = None
        assert (ours(x, cos, sin) - expected).abs().max() > 1e-2


def test_diffllama_differential_attention() -> None:
    """DiffLlama (Differential Transformer): head pairs' softmaxes subtracted with a learned lambda over the two
    halves of V, normalised and scaled by 1 - lambda_init of layer 2. With the other layer's lambda_init, or the
    plain attention, the same weights differ."""
    from transformers import DiffLlamaConfig
    from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention

    cfg = eager(DiffLlamaConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    ours = Attention(HIDDEN, 4, 2, 16, differential=True, layer_index=2, norm_eps=cfg.rms_norm_eps)
    hf = DiffLlamaAttention(cfg, layer_idx=2)
    randomize(hf)
    with torch.no_grad():
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(ours, name).copy_(getattr(hf, name))
    expected = _run(hf, cfg, ours, sliding=False)
    ours.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * 5)
    assert _differs(ours, cfg, expected)


def test_lfm3_one_sigmoid_gate_per_head() -> None:
    """LFM3: QK-norm per head and an output gate with one value per head (g_proj [H, hidden], stored as gate_proj);
    without the gate the same weights differ."""
    from transformers import Lfm3Config, LlamaConfig
    from transformers.models.lfm3.modeling_lfm3 import Lfm3Attention

    cfg = eager(Lfm3Config(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                           use_attention_gate=True, layer_types=["full_attention"], num_hidden_layers=1))  # fmt: skip
    hf = Lfm3Attention(cfg, 0)
    randomize(hf)
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=QKNormSpec(eps=cfg.norm_eps), gate_proj=True, gate_per_head=True)
    fuse_linear(ours.qkv_proj, hf.q_proj, hf.k_proj, hf.v_proj)
    copy_linear(ours.o_proj, hf.o_proj)
    copy_linear(ours.gate_proj, hf.g_proj)
    x, cos, sin = _inputs(LlamaConfig(hidden_size=HIDDEN, num_attention_heads=4, head_dim=16))
    with torch.no_grad():
        ours.q_norm.weight.copy_(hf.q_norm.weight)
        ours.k_norm.weight.copy_(hf.k_norm.weight)
        expected = hf(x, position_embeddings=(full_table(cos), full_table(sin)),
                      attention_mask=hf_mask(cfg, x, False))[0]  # fmt: skip
        torch.testing.assert_close(ours(x, cos, sin), expected, atol=ATOL, rtol=RTOL)
        ours.gate_proj = None
        assert (ours(x, cos, sin) - expected).abs().max() > 1e-2


@pytest.mark.parametrize("heads", [4, 6], ids=["power-of-two", "extra-slopes"])
def test_bloom_alibi(heads: int) -> None:
    """BLOOM: ALiBi biases (slope per head x key position) instead of a rotary embedding; 6 heads take the extra
    slopes past the power of two. Without the biases the same weights differ."""
    from transformers import BloomConfig
    from transformers.models.bloom.modeling_bloom import BloomAttention, build_alibi_tensor

    from onboard.generate_adapter.loader import deinterleave_heads

    cfg = eager(BloomConfig(hidden_size=16 * heads, n_head=heads))
    hf = BloomAttention(cfg, layer_idx=0)
    randomize(hf)
    ours = Attention(16 * heads, heads, heads, 16, qkv_bias=True, o_bias=True, alibi=True)
    with torch.no_grad():
        ours.qkv_proj.weight.copy_(deinterleave_heads(hf.query_key_value.weight, heads, heads, 16))
        ours.qkv_proj.bias.copy_(deinterleave_heads(hf.query_key_value.bias, heads, heads, 16))
    copy_linear(ours.o_proj, hf.dense)
    x = torch.randn(B, S, 16 * heads, generator=torch.Generator().manual_seed(1))
    alibi = build_alibi_tensor(torch.ones(B, S, dtype=torch.long), heads, torch.float32)
    with torch.no_grad():
        expected = hf(x, torch.zeros_like(x), alibi, hf_mask(cfg, x, False))[0]
        torch.testing.assert_close(ours(x, None, None), expected, atol=ATOL, rtol=RTOL)
        ours.alibi = False
        assert (ours(x, None, None) - expected).abs().max() > 1e-2


def test_qwen3_per_head_qk_norm() -> None:
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention

    cfg = eager(Qwen3Config(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=QKNormSpec(eps=cfg.rms_norm_eps))
    _run(Qwen3Attention(cfg, 0), cfg, ours, sliding=False)


def test_hunyuan_qk_norm_after_rope() -> None:
    from transformers import HunYuanDenseV1Config
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1Attention

    cfg = eager(HunYuanDenseV1Config(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=QKNormSpec(eps=cfg.rms_norm_eps), qk_norm_after_rope=True)
    expected = _run(HunYuanDenseV1Attention(cfg, 0), cfg, ours, sliding=False, hf_norms=("query_layernorm",
                    "key_layernorm"))  # fmt: skip
    # The order matters: the same weights normed before the rotation (the block's default) give other outputs.
    ours.qk_norm_after_rope = False
    assert _differs(ours, cfg, expected)


def test_bitnet_sub_norm_before_o_proj() -> None:
    from transformers import BitNetConfig
    from transformers.models.bitnet.modeling_bitnet import BitNetAttention

    cfg = eager(BitNetConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2))
    ours = Attention(HIDDEN, 4, 2, 16, sub_norm_eps=cfg.rms_norm_eps)
    expected = _run(BitNetAttention(cfg, 0), cfg, ours, sliding=False)
    ours.sub_norm = None
    assert _differs(ours, cfg, expected)


def test_afmoe_sigmoid_gate_from_its_own_projection() -> None:
    from transformers import AfmoeConfig
    from transformers.models.afmoe.modeling_afmoe import AfmoeAttention

    cfg = eager(AfmoeConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                            num_hidden_layers=2, layer_types=["full_attention", "full_attention"]))  # fmt: skip
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=QKNormSpec(eps=cfg.rms_norm_eps), gate_proj=True)
    hf = AfmoeAttention(cfg, 0)
    hf.is_local_attention = True  # rotary on, as on its sliding layers (no window: a full mask)
    expected = _run(hf, cfg, ours, sliding=False)
    ours.gate_proj = None
    assert _differs(ours, cfg, expected)
    with pytest.raises(ValueError, match="one output gate"):
        Attention(HIDDEN, 4, 2, 16, output_gate=True, gate_proj=True)


def test_nanochat_inverted_rope_and_weightless_qk_norm() -> None:
    """NanoChat rotates by -angle (rotate_half = [x2, -x1]) and RMS-normalises q and k without a weight, after the
    rotation (the order does not matter without a weight: a rotation keeps the RMS)."""
    from transformers import NanoChatConfig
    from transformers.models.nanochat.modeling_nanochat import NanoChatAttention

    cfg = eager(NanoChatConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2))
    qk = QKNormSpec(eps=cfg.rms_norm_eps, weight=False)
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=qk, qk_norm_after_rope=True, rope_inverted=True)
    expected = _run(NanoChatAttention(cfg, 0), cfg, ours, sliding=False)
    ours.rope_inverted = False
    assert _differs(ours, cfg, expected)


def test_olmo2_qk_norm_over_all_heads() -> None:
    from transformers import Olmo2Config
    from transformers.models.olmo2.modeling_olmo2 import Olmo2Attention

    cfg = eager(Olmo2Config(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2))
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=QKNormSpec(eps=cfg.rms_norm_eps, scope="all", casting="gemma"))
    _run(Olmo2Attention(cfg, 0), cfg, ours, sliding=False)


@pytest.mark.parametrize("family", ["olmo", "olmoe"])
def test_clip_qkv(family: str) -> None:
    """OLMo clamps the q/k/v projections, OLMoE its normed q and k (and v): one rule, q and k after any QK-norm. The
    clip is small enough to bite on these activations: without it the outputs differ."""
    if family == "olmo":
        from transformers import OlmoConfig
        from transformers.models.olmo.modeling_olmo import OlmoAttention as HFAttention

        cfg, qk = (
            eager(OlmoConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, clip_qkv=0.3)),
            None,
        )
    else:
        from transformers import OlmoeConfig
        from transformers.models.olmoe.modeling_olmoe import OlmoeAttention as HFAttention

        cfg = eager(OlmoeConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, clip_qkv=0.3))
        qk = QKNormSpec(eps=cfg.rms_norm_eps, scope="all")
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=qk, clip_qkv=0.3)
    expected = _run(HFAttention(cfg, 0), cfg, ours, sliding=False)
    ours.clip_qkv = None
    assert _differs(ours, cfg, expected)


def test_cohere_layernorm_qk_norm_and_interleaved_rope() -> None:
    from transformers import CohereConfig
    from transformers.models.cohere.modeling_cohere import CohereAttention

    cfg = eager(CohereConfig(hidden_size=HIDDEN, num_attention_heads=4, num_key_value_heads=2, use_qk_norm=True))
    spec = QKNormSpec(eps=cfg.layer_norm_eps, kind="layer", scope="per_head_weight")
    ours = Attention(HIDDEN, 4, 2, 16, qk_norm=spec, rope_interleaved=True)
    _run(CohereAttention(cfg, 0), cfg, ours, sliding=False, interleaved=True)


def test_sliding_window_mask_boundary() -> None:
    m = causal_mask(5, 5, 2, torch.device("cpu"))
    assert m.int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1],
    ]


def test_sdpa_and_eager_paths_agree() -> None:
    # A huge cap makes softcap the identity, forcing the eager path on the same inputs as the SDPA path.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, 9, 8, generator=g) for h in (4, 2, 2))
    torch.testing.assert_close(attend(q, k, v, 0.3, 3), attend(q, k, v, 0.3, 3, softcap=1e9), atol=1e-6, rtol=1e-5)


def test_heads_not_divisible_rejected() -> None:
    with pytest.raises(ValueError, match="multiple"):
        Attention(HIDDEN, 4, 3, 16)

"""Norms, MLPs and embeddings vs their transformers counterparts with shared weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from onboard.blocks.embeddings import Embedding, LMHead
from onboard.blocks.mlp import MLP, GatedMLP
from onboard.blocks.norms import LayerNorm, QKNorm, RMSNorm
from tests.blocks._hf import copy_linear, fuse_linear, randomize

H = 48


def _x(dtype: torch.dtype = torch.float32, *shape: int) -> torch.Tensor:
    return (torch.randn(*(shape or (2, 7, H)), generator=torch.Generator().manual_seed(0)) * 2).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_rmsnorm_equals_transformers_bitwise(family: str, dtype: torch.dtype) -> None:
    from transformers.models.gemma.modeling_gemma import GemmaRMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    hf = (LlamaRMSNorm(H, eps=1e-5) if family == "llama" else GemmaRMSNorm(H, eps=1e-5)).to(dtype)
    ours = RMSNorm(H, eps=1e-5, offset=0.0 if family == "llama" else 1.0).to(dtype)
    randomize(hf)
    ours.load_state_dict(hf.state_dict())
    with torch.no_grad():
        assert torch.equal(ours(_x(dtype)), hf(_x(dtype)))


def test_layernorm_equals_torch_and_cohere() -> None:
    from transformers.models.cohere.modeling_cohere import CohereLayerNorm

    ref = nn.LayerNorm(H, eps=1e-5)
    ours = LayerNorm(H, eps=1e-5)
    randomize(ref)
    ours.load_state_dict(ref.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(ours(_x()), ref(_x()), atol=1e-6, rtol=1e-6)
    cohere = CohereLayerNorm((4, 12), eps=1e-5)  # per-head weights for QK-norm
    ours_qk = QKNorm(4, 12, eps=1e-5, kind="layer", scope="per_head_weight")
    randomize(cohere)
    with torch.no_grad():
        ours_qk.weight.copy_(cohere.weight)
        x = _x(torch.float32, 2, 7, 4, 12)
        torch.testing.assert_close(ours_qk(x), cohere(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layernorm_offset_equals_nemotron_1p(dtype: torch.dtype) -> None:
    from transformers.models.nemotron.modeling_nemotron import NemotronLayerNorm1P

    hf = NemotronLayerNorm1P(H, eps=1e-5).to(dtype)
    randomize(hf)
    ours = LayerNorm(H, eps=1e-5, offset=1.0).to(dtype)
    ours.load_state_dict(hf.state_dict())
    with torch.no_grad():
        got, expected = ours(_x(dtype)), hf(_x(dtype))
        # transformers normalises in the input dtype, the block in float32 (then rounds once): bf16 differs by an ulp
        tol = 1e-6 if dtype == torch.float32 else 2**-6
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
    plain = LayerNorm(H, eps=1e-5).to(dtype)  # the same weights applied as w, not 1 + w
    plain.load_state_dict(hf.state_dict())
    with torch.no_grad():
        assert (plain(_x(dtype)).float() - expected.float()).abs().max() > 0.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weightless_rmsnorm_equals_nanochat(dtype: torch.dtype) -> None:
    from transformers.models.nanochat.modeling_nanochat import NanoChatRMSNorm

    ours, hf = RMSNorm(H, eps=1e-6, weight=False), NanoChatRMSNorm(eps=1e-6)
    heads = QKNorm(4, 12, eps=1e-6, weight=False)
    assert not list(ours.parameters()) and not list(heads.parameters())
    with torch.no_grad():
        assert torch.equal(ours(_x(dtype)), hf(_x(dtype)))
        x = _x(dtype, 2, 7, 4, 12)
        assert torch.equal(heads(x), hf(x))
    with pytest.raises(ValueError, match="without offset or bias"):
        QKNorm(4, 12, kind="layer", weight=False)


def test_weightless_layernorm_equals_olmo() -> None:
    from transformers.models.olmo.modeling_olmo import OlmoLayerNorm

    ours = LayerNorm(H, eps=1e-5, bias=False, weight=False)
    assert not list(ours.parameters())  # nothing for a checkpoint to hold
    for dtype in (torch.float32, torch.bfloat16):
        with torch.no_grad():
            assert torch.equal(ours(_x(dtype)), OlmoLayerNorm(H)(_x(dtype)))
    with pytest.raises(ValueError, match="no bias"):
        LayerNorm(H, weight=False)


def test_biased_layernorm_qk_norm_equals_persimmon() -> None:
    ref = nn.LayerNorm(12, eps=1e-5)  # Persimmon's q_layernorm / k_layernorm: one [head_dim] weight and bias
    randomize(ref)
    ours = QKNorm(4, 12, eps=1e-5, kind="layer", bias=True)
    ours.load_state_dict(ref.state_dict())
    x = _x(torch.float32, 2, 7, 4, 12)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), ref(x), atol=1e-6, rtol=1e-6)
        assert (ours(x) - QKNorm(4, 12, eps=1e-5, kind="layer")(x) * ref.weight).abs().max() > 0.1  # bias applied
    with pytest.raises(ValueError, match="RMS norm has no bias"):
        QKNorm(4, 12, bias=True)


def test_gemma3_style_qk_norm_offset_one() -> None:
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    hf = Gemma3RMSNorm(12, eps=1e-6)
    randomize(hf)
    ours = QKNorm(4, 12, eps=1e-6, offset=1.0)
    with torch.no_grad():
        ours.weight.copy_(hf.weight)
        x = _x(torch.float32, 2, 7, 4, 12)
        assert torch.equal(ours(x), hf(x))


@pytest.mark.parametrize(
    ("act", "family"), [("silu", "llama"), ("gelu_pytorch_tanh", "gemma"), ("gelu", "llama")], ids=str
)
def test_gated_mlp_equals_transformers(act: str, family: str) -> None:
    from transformers import GemmaConfig, LlamaConfig
    from transformers.models.gemma.modeling_gemma import GemmaMLP
    from transformers.models.llama.modeling_llama import LlamaMLP

    if family == "llama":
        hf = LlamaMLP(LlamaConfig(hidden_size=H, num_attention_heads=4, intermediate_size=37, hidden_act=act))
    else:
        hf = GemmaMLP(GemmaConfig(hidden_size=H, num_attention_heads=4, intermediate_size=37, hidden_activation=act))
    randomize(hf)
    ours = GatedMLP(H, 37, act)
    fuse_linear(ours.gate_up_proj, hf.gate_proj, hf.up_proj)
    copy_linear(ours.down_proj, hf.down_proj)
    with torch.no_grad():
        torch.testing.assert_close(ours(_x()), hf(_x()), atol=1e-5, rtol=1e-5)


def test_bitnet_relu2_gated_mlp_with_sub_norm() -> None:
    from transformers import BitNetConfig
    from transformers.models.bitnet.modeling_bitnet import BitNetMLP

    cfg = BitNetConfig(hidden_size=H, num_attention_heads=4, intermediate_size=37)
    hf = BitNetMLP(cfg)
    randomize(hf)
    ours = GatedMLP(H, 37, "relu2", sub_norm_eps=cfg.rms_norm_eps)
    fuse_linear(ours.gate_up_proj, hf.gate_proj, hf.up_proj)
    copy_linear(ours.down_proj, hf.down_proj)
    with torch.no_grad():
        ours.sub_norm.weight.copy_(hf.ffn_sub_norm.weight)
        torch.testing.assert_close(ours(_x()), hf(_x()), atol=1e-5, rtol=1e-5)
        ours.sub_norm = None
        assert (ours(_x()) - hf(_x())).abs().max() > 1e-2  # the norm before down_proj matters


def test_plain_mlps_equal_starcoder2_and_nemotron() -> None:
    from transformers import NemotronConfig, Starcoder2Config
    from transformers.models.nemotron.modeling_nemotron import NemotronMLP
    from transformers.models.starcoder2.modeling_starcoder2 import Starcoder2MLP

    sc = Starcoder2MLP(Starcoder2Config(hidden_size=H, intermediate_size=37, use_bias=True))
    nm = NemotronMLP(NemotronConfig(hidden_size=H, intermediate_size=37, mlp_bias=False))
    randomize(sc)
    randomize(nm, seed=1)
    ours_sc = MLP(H, 37, "gelu_pytorch_tanh", bias=True)
    ours_nm = MLP(H, 37, "relu2", bias=False)
    copy_linear(ours_sc.up_proj, sc.c_fc)
    copy_linear(ours_sc.down_proj, sc.c_proj)
    ours_nm.load_state_dict(nm.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(ours_sc(_x()), sc(_x()), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours_nm(_x()), nm(_x()), atol=1e-5, rtol=1e-5)


def test_unknown_activation_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported gated activation 'mish'"):
        GatedMLP(H, 8, "mish")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_scaled_embedding_equals_gemma(dtype: torch.dtype) -> None:
    from transformers.models.gemma.modeling_gemma import GemmaTextScaledWordEmbedding

    hf = GemmaTextScaledWordEmbedding(100, H, 0, embed_scale=H**0.5).to(dtype)
    randomize(hf)
    ours = Embedding(100, H, scale=H**0.5).to(dtype)
    ours.load_state_dict(hf.state_dict())
    ids = torch.randint(0, 100, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(ours(ids), hf(ids))


def test_tied_lm_head_shares_the_embedding_parameter() -> None:
    emb = Embedding(100, H)
    head = LMHead(H, 100, tied_to=emb)
    assert head.weight is emb.weight
    with torch.no_grad():
        emb.weight.normal_()
    x = _x()
    torch.testing.assert_close(head(x), x @ emb.weight.T)
    with pytest.raises(ValueError, match="tied embedding"):
        LMHead(H, 99, tied_to=emb)


def test_lm_head_scale_then_final_softcap() -> None:
    head = LMHead(H, 100, scale=0.25, final_softcap=3.0)
    randomize(head, std=1.0)
    x = _x()
    raw = x @ head.weight.T
    with torch.no_grad():
        out = head(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tanh(raw * 0.25 / 3.0) * 3.0, atol=1e-5, rtol=1e-5)
    assert out.abs().max() <= 3.0

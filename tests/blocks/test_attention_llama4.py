"""Llama 4's attention options in the block library: chunked local attention (`chunk_size`) against transformers'
chunked mask, with left padding and through the KV cache; the NoPE layers' temperature tuning (`nope_temperature`)
against Llama4TextAttention's formula; and MoE(weights_on_input) against Llama4TextMoe."""

from __future__ import annotations

import math

import pytest
import torch

from onboard.blocks.attention import Attention, AttentionContext, LayerKV, _same_chunk, causal_mask
from onboard.blocks.moe import MoE, RouterSpec
from onboard.generate_adapter.runtime import padded_positions


def _attention(**options: object) -> Attention:
    torch.manual_seed(0)
    attn = Attention(32, 4, 2, 8, **options)  # type: ignore[arg-type]
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.3)
    return attn


@pytest.mark.parametrize("pad", [0, 3])
def test_chunked_mask_equals_transformers(pad: int) -> None:
    from transformers.masking_utils import chunked_causal_mask_function

    chunk, seq = 4, 11
    mask = torch.ones(1, pad + seq, dtype=torch.long)
    mask[:, :pad] = 0
    ctx = AttentionContext(mask.bool() if pad else None, None, padded_positions(mask))
    ours = causal_mask(pad + seq, pad + seq, None, torch.device("cpu")) & _same_chunk(ctx, pad + seq, pad + seq, chunk)
    theirs_fn = chunked_causal_mask_function(chunk, torch.tensor([pad]))
    idx = torch.arange(pad + seq)
    theirs = theirs_fn(torch.tensor(0), torch.tensor(0), idx[:, None], idx[None, :])
    real = slice(pad, None)  # padding rows and columns are hidden by the padding mask either way
    assert torch.equal(ours[0, 0, real, real], theirs[real, real])
    assert not ours[0, 0, real, real].all()  # the chunks do cut in


def test_chunked_attention_is_unchanged_by_left_padding_and_by_the_cache() -> None:
    attn = _attention(chunk_size=4)
    x = torch.randn(1, 10, 32)
    full = attn(x, None, None, AttentionContext(None, None, torch.arange(10)[None]))
    unchunked = _attention()(x, None, None, AttentionContext(None, None, torch.arange(10)[None]))
    assert not torch.allclose(full[:, 4:], unchunked[:, 4:], atol=1e-3)  # the chunk mask changes what is seen
    assert torch.allclose(full[:, :4], unchunked[:, :4], atol=1e-6)  # the first chunk is plain causal attention
    # three padding tokens on the left: the real rows are unchanged (chunks count from the first real token)
    mask = torch.cat((torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 10, dtype=torch.long)), dim=1)
    padded = attn(torch.cat((torch.randn(1, 3, 32), x), dim=1), None, None,
                  AttentionContext(mask.bool(), None, padded_positions(mask)))  # fmt: skip
    assert torch.allclose(padded[:, 3:], full, atol=1e-5)
    # right padding (a shorter row in a batch): the real positions are unchanged too
    mask = torch.cat((torch.ones(1, 10, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long)), dim=1)
    right = attn(torch.cat((x, torch.randn(1, 3, 32)), dim=1), None, None,
                 AttentionContext(mask.bool(), None, padded_positions(mask)))  # fmt: skip
    assert torch.allclose(right[:, :10], full, atol=1e-5)
    # prefill 6 tokens, then decode one at a time through the cache
    cache = LayerKV()
    steps = [attn(x[:, :6], None, None, AttentionContext(None, cache, torch.arange(6)[None]))]
    for t in range(6, 10):
        steps.append(attn(x[:, t : t + 1], None, None, AttentionContext(None, cache, torch.tensor([[t]]))))
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_nope_temperature_scales_queries_as_llama4_does() -> None:
    floor_scale, attn_scale = 4.0, 0.1
    attn = _attention(nope_temperature=(floor_scale, attn_scale))
    plain = _attention()
    x = torch.randn(1, 12, 32)
    positions = torch.arange(12)[None]
    expected = torch.log1p(torch.floor((positions.float() + 1.0) / floor_scale)) * attn_scale + 1.0
    assert torch.equal(attn._nope_scale(AttentionContext(None, None, positions)).flatten(), expected.flatten())
    out = attn(x, None, None, AttentionContext(None, None, positions))
    assert torch.allclose(out[:, :3], plain(x, None, None, AttentionContext(None, None, positions))[:, :3])  # scale 1
    assert not torch.allclose(out[:, 3:], plain(x, None, None, AttentionContext(None, None, positions))[:, 3:])
    # only layers without rotary are scaled
    cos, sin = torch.ones(1, 12, 4), torch.zeros(1, 12, 4)
    assert torch.allclose(attn(x, cos, sin, AttentionContext(None, None, positions)),
                          plain(x, cos, sin, AttentionContext(None, None, positions)))  # fmt: skip
    assert math.isclose(float(expected[0, 11]), math.log1p(3) * 0.1 + 1, rel_tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_moe_weights_on_input_equals_llama4_moe(dtype: torch.dtype) -> None:
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    config = Llama4TextConfig(hidden_size=32, intermediate_size=16, num_local_experts=4, num_experts_per_tok=2)
    torch.manual_seed(0)
    ref = Llama4TextMoe(config)
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.3)
    ours = MoE(32, 4, 16, RouterSpec(top_k=2, scoring="sigmoid", norm_topk_prob=False), activation="silu",
               shared_intermediate_size=16, weights_on_input=True)  # fmt: skip
    sd = ref.state_dict()
    with torch.no_grad():
        ours.router.weight.copy_(sd["router.weight"])
        ours.experts_gate_up.copy_(sd["experts.gate_up_proj"].transpose(1, 2))  # [E, H, 2I] -> [E, 2I, H]
        ours.experts_down.copy_(sd["experts.down_proj"].transpose(1, 2))
        ours.shared.gate_up_proj.weight.copy_(torch.cat((sd["shared_expert.gate_proj.weight"],
                                                         sd["shared_expert.up_proj.weight"])))  # fmt: skip
        ours.shared.down_proj.weight.copy_(sd["shared_expert.down_proj.weight"])
    x = torch.randn(2, 5, 32)
    exact = ref(x)[0].view(2, 5, 32).double()  # float32, the yardstick for both sides' bfloat16 rounding
    ref, ours = ref.to(dtype), ours.to(dtype)
    theirs_error = (ref(x.to(dtype))[0].view(2, 5, 32).double() - exact).abs().max()
    ours_error = (ours(x.to(dtype)).double() - exact).abs().max()
    if dtype == torch.float32:
        assert ours_error < 1e-5, ours_error
    else:  # summation orders differ (per-expert Linear vs bmm): within twice transformers' own bf16 error
        assert ours_error <= 2 * theirs_error, (ours_error, theirs_error)
    # the same weights applied to the experts' outputs instead: not Llama 4's block
    ours.weights_on_input = False
    assert (ours(x.to(dtype)).double() - exact).abs().max() > 10 * max(ours_error, 1e-4)

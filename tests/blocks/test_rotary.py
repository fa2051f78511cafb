"""Rotary frequencies and cos/sin tables vs transformers' ROPE_INIT_FUNCTIONS / rotary modules, for every rope type,
with configs parsed by RopeConfig.from_dict from the HF config's own dict."""

from __future__ import annotations

import pytest
import torch

from onboard.blocks.rotary import RopeConfig, RotaryEmbedding, inv_freq_and_attention_factor

HEAD_DIM, MAX_POS, OMAX = 32, 256, 64


def _factors(n: int, start: float, step: float) -> list[float]:
    return [start + i * step for i in range(n)]


# name -> (rope_parameters, partial_rotary_factor)
CASES = {
    "linear": ({"rope_type": "linear", "factor": 4.0}, None),
    "linear-partial": ({"rope_type": "linear", "factor": 2.0}, 0.5),
    "dynamic": ({"rope_type": "dynamic", "factor": 2.0}, None),
    "yarn": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": OMAX}, None),
    "yarn-mscale": (
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": OMAX, "mscale": 1.0}
        | {"mscale_all_dim": 0.707, "beta_fast": 16, "beta_slow": 2},
        None,
    ),
    "yarn-no-truncate-attn-factor": (
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": OMAX, "truncate": False}
        | {"attention_factor": 1.3},
        None,
    ),
    "longrope": (
        {"rope_type": "longrope", "original_max_position_embeddings": OMAX}
        | {"short_factor": _factors(16, 1.0, 0.1), "long_factor": _factors(16, 2.0, 0.2)},
        None,
    ),
    "longrope-partial": (
        {"rope_type": "longrope", "original_max_position_embeddings": OMAX, "factor": 3.0}
        | {"short_factor": _factors(8, 1.0, 0.1), "long_factor": _factors(8, 2.0, 0.2)},
        0.5,
    ),
    "llama3": (
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
        | {"original_max_position_embeddings": OMAX},
        None,
    ),
    "proportional": ({"rope_type": "proportional", "factor": 1.0}, 0.25),
}


def _hf_config(rope_parameters: dict, partial: float | None):
    from transformers import LlamaConfig

    params = dict(rope_parameters, rope_theta=500000.0)
    if partial is not None:
        params["partial_rotary_factor"] = partial
    return LlamaConfig(
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POS,
        rope_parameters=params,
    )


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seq_len", [None, 40, 300])
def test_inv_freq_and_attention_factor_equal_transformers(name: str, seq_len: int | None) -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    hf_cfg = _hf_config(*CASES[name])
    hf_inv, hf_factor = ROPE_INIT_FUNCTIONS[hf_cfg.rope_parameters["rope_type"]](hf_cfg, None, seq_len=seq_len)
    ours = RopeConfig.from_dict(hf_cfg.to_dict())
    inv, factor = inv_freq_and_attention_factor(ours, seq_len)
    assert ours.rope_type == hf_cfg.rope_parameters["rope_type"]
    torch.testing.assert_close(inv, hf_inv, atol=0, rtol=1e-6)
    assert factor == pytest.approx(hf_factor, rel=1e-12)


def test_default_rope_equals_llama_and_partial_default_equals_gpt_neox() -> None:
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    llama = _hf_config({"rope_type": "default"}, None)
    hf_inv, _ = LlamaRotaryEmbedding.compute_default_rope_parameters(llama)
    torch.testing.assert_close(inv_freq_and_attention_factor(RopeConfig.from_dict(llama.to_dict()))[0], hf_inv)

    neox = GPTNeoXConfig(hidden_size=128, num_attention_heads=4, rotary_pct=0.25, rotary_emb_base=10000)
    hf_inv, _ = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(neox)
    ours = RopeConfig.from_dict(neox.to_dict())
    assert ours.rotary_dim == 8
    torch.testing.assert_close(inv_freq_and_attention_factor(ours)[0], hf_inv)


@pytest.mark.parametrize("name", ["linear", "dynamic", "yarn-mscale", "longrope", "llama3"])
@pytest.mark.parametrize("seq_len", [20, 300])
def test_cos_sin_equal_llama_rotary_embedding(name: str, seq_len: int) -> None:
    # Covers the seq-len switches: dynamic NTK past max_position_embeddings, longrope long factors past the original.
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    hf_cfg = _hf_config(*CASES[name])
    pos = torch.arange(seq_len)[None].expand(2, -1)
    hf_cos, hf_sin = LlamaRotaryEmbedding(hf_cfg)(torch.zeros(1, dtype=torch.float32), pos)
    cos, sin = RotaryEmbedding(RopeConfig.from_dict(hf_cfg.to_dict()))(pos)
    half = cos.shape[-1]
    torch.testing.assert_close(cos, hf_cos[..., :half], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(sin, hf_sin[..., :half], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(hf_cos[..., half:], hf_cos[..., :half])  # HF's table is the half table, twice


def test_from_dict_reads_old_style_rope_scaling() -> None:
    cfg = RopeConfig.from_dict(
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
            | {"original_max_position_embeddings": 8192},
        }
    )
    assert (cfg.rope_type, cfg.head_dim, cfg.rope_theta, cfg.factor) == ("llama3", 128, 500000.0, 8.0)
    assert cfg.original_max_position_embeddings == 8192


def test_unknown_rope_type_rejected() -> None:
    with pytest.raises(ValueError, match="unknown rope_type 'mrope'"):
        inv_freq_and_attention_factor(RopeConfig(head_dim=16, rope_type="mrope"))


def test_from_dict_per_layer_type_parameters() -> None:
    from transformers import Gemma3TextConfig

    d = Gemma3TextConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16).to_dict()
    assert RopeConfig.from_dict(d, layer_type="sliding_attention").rope_theta == 10000.0
    assert RopeConfig.from_dict(d, layer_type="full_attention").rope_theta == 1000000.0
    with pytest.raises(ValueError, match="per layer type"):
        RopeConfig.from_dict(d)  # silently taking one theta for both would be a parity bug

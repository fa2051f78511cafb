"""The runtime side of layers that differ in their keys and values (Gemma 4): which layer a KV-shared layer reads
(as transformers' kv_sharing_modes decides), per_layer_config overrides applied to one layer's args, and the
attention block's refusals when a KV-shared layer has nothing to read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch

from onboard.blocks.attention import Attention, AttentionContext, LayerKV
from onboard.errors import ConfigError
from onboard.generate_adapter.runtime import ArgsBase, kv_shared_source

S, F = "sliding_attention", "full_attention"


@pytest.mark.parametrize(
    ("layer_types", "shared"),
    [([S, F, S, F], 2), ([S, S, F, S, S, F], 2), ([S, S, S, F, S, F, S, F], 3), ([S, F, S, F], 0)],
)
def test_kv_shared_source_is_transformers_producer(layer_types: list[str], shared: int) -> None:
    from transformers import Gemma4UnifiedTextConfig

    config = Gemma4UnifiedTextConfig(
        num_hidden_layers=len(layer_types), layer_types=layer_types, num_kv_shared_layers=shared
    )
    modes = config.kv_sharing_modes
    producer = {t: i for i, t in enumerate(layer_types) if modes[i] == "store"}
    expected = [producer[t] if modes[i] == "reuse" else None for i, t in enumerate(layer_types)]
    assert [kv_shared_source(layer_types, shared, i) for i in range(len(layer_types))] == expected
    assert sum(e is not None for e in expected) == shared


def test_kv_shared_layer_without_an_earlier_layer_of_its_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="num_kv_shared_layers=1"):
        kv_shared_source([S, S, F], 1, 2)  # the only full layer is the shared one


@dataclass
class _Args(ArgsBase):
    head_dim: int = 16
    num_key_value_heads: int = 2
    per_layer_config: dict[str, Any] | None = None


def test_per_layer_config_overrides_one_layers_args() -> None:
    args = _Args(per_layer_config={"1": {"head_dim": 32, "num_key_value_heads": 1}})
    assert args.for_layer(0) is args
    one = args.for_layer(1)
    assert (one.head_dim, one.num_key_value_heads, args.head_dim) == (32, 1, 16)
    with pytest.raises(ConfigError, match="sliding_window"):
        _Args(per_layer_config={"0": {"sliding_window": 8}}).for_layer(0)


def test_kv_shared_attention_reads_the_source_layers_cache_and_never_extends_it() -> None:
    torch.manual_seed(0)
    source, shared = Attention(32, 4, 2, 8), Attention(32, 4, 2, 8, kv_shared=True)
    assert shared.qkv_proj.out_features == 4 * 8 and shared.k_norm is None  # queries only
    with pytest.raises(ValueError, match="no keys and values"):
        shared(torch.randn(1, 5, 32), None, None, AttentionContext())
    kv, x = LayerKV(), torch.randn(1, 5, 32)
    source(x, None, None, AttentionContext(None, kv))
    keys = kv.k
    out = shared(x, None, None, AttentionContext(None, kv))
    assert kv.k is keys and out.shape == (1, 5, 32)


def test_values_from_keys_projects_no_values() -> None:
    attn = Attention(32, 4, 1, 8, values_from_keys=True, v_norm_eps=1e-6)
    assert attn.qkv_proj.out_features == 4 * 8 + 8
    kv = LayerKV()
    attn(torch.randn(1, 3, 32), None, None, AttentionContext(None, kv))
    # no rotary and no k_norm here: the cached values are the keys, RMS-normalised without a weight
    rms = kv.k.float().pow(2).mean(-1, keepdim=True).add(1e-6).rsqrt()
    torch.testing.assert_close(kv.v, kv.k * rms)

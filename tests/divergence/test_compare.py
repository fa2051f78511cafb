"""compare() and the cause heuristics on synthetic captures: what counts as a divergence, how points are matched,
and that each heuristic fires on its own pattern and stays quiet on others."""

from __future__ import annotations

import json

import pytest
import torch

from onboard.comparator import THRESHOLDS
from onboard.errors import UnknownDtype
from onboard.generate_adapter.divergence import compare, fusions
from onboard.generate_adapter.divergence_capture import by_position, point_of
from onboard.generate_adapter.divergence_causes import (
    constant_ratio,
    grows_with_position,
    missing_modules,
    norm_offset,
    past_position,
    per_channel_scale,
    per_token_scale,
    scores_only,
)
from onboard.generate_adapter.loader import WeightRule

S, C = 24, 32
G = torch.Generator().manual_seed(0)


def _rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


def _capture(**points: torch.Tensor) -> dict[str, torch.Tensor]:
    return {k.replace("__", "."): v for k, v in points.items()}


def test_first_point_beyond_tolerance_in_reference_order() -> None:
    ref = _capture(embedding=_rand(S, C), layers__0__attention=_rand(S, C), layers__0__mlp=_rand(S, C))
    ours = dict(ref)
    ours["layers.0.mlp"] = ref["layers.0.mlp"] * 1.5
    ours["layers.0.attention"] = ref["layers.0.attention"] + 1e-6  # within float32's 1e-4
    result = compare(ours, ref)
    assert result["first_divergence"]["layer"] == 0 and result["first_divergence"]["module"] == "mlp"
    assert [r["module"] for r in result["per_layer_error"]] == ["embedding", "attention", "mlp"]
    assert result["per_layer_error"][0] == {"layer": None, "module": "embedding", "max_abs": 0.0, "rel": 0.0,
                                            "tolerance": 1e-4}  # fmt: skip
    assert result["first_divergence"]["likely_cause"][0].startswith("ratio ≈ constant (adapter/reference = 1.5)")


def test_non_finite_and_shape_mismatch_diverge_and_stay_valid_json() -> None:
    ref = _capture(layers__0__attention=_rand(S, C), layers__0__mlp=_rand(S, C))
    nan = ref["layers.0.attention"].clone()
    nan[3, 4] = float("nan")
    result = compare({"layers.0.attention": nan, "layers.0.mlp": ref["layers.0.mlp"]}, ref)
    first = result["first_divergence"]
    assert first["module"] == "attention" and first["rel"] is None and first["nonfinite"] == 1
    assert "non-finite" in first["likely_cause"][0]
    json.dumps(result, allow_nan=False)
    result = compare({"layers.0.attention": _rand(S, C + 1)}, ref)
    assert result["first_divergence"]["module"] == "attention" and "shapes differ" in result["first_divergence"][
        "likely_cause"][0]  # fmt: skip
    assert result["only_in_reference"] == ["layers.0.mlp"]


def test_low_precision_tolerance_follows_the_reference_noise() -> None:
    ref = _capture(layers__0__attention=_rand(S, C))
    noisy = {"layers.0.attention": ref["layers.0.attention"] * (1 + 0.04 * _rand(S, C))}  # the reference's bf16
    ours = {"layers.0.attention": ref["layers.0.attention"] * (1 + 0.05 * _rand(S, C))}
    assert compare(ours, ref, "bfloat16")["first_divergence"] is not None  # floor 2e-2 alone
    calibrated = compare(ours, ref, "bfloat16", noise=noisy)
    assert calibrated["first_divergence"] is None and calibrated["per_layer_error"][0]["tolerance"] > 0.1


def test_fused_projection_is_split_by_the_reference_widths() -> None:
    rules = (WeightRule("model.layers.{i}.self_attn.qkv_proj.weight", tuple(
        f"model.layers.{{i}}.self_attn.{p}_proj.weight" for p in "qkv"), "cat"),)  # fmt: skip
    fused = fusions(rules)
    assert fused == {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")}
    q, k, v = _rand(S, 16), _rand(S, 8), _rand(S, 8)
    ref = {"layers.2.self_attn.q_proj": q, "layers.2.self_attn.k_proj": k, "layers.2.self_attn.v_proj": v}
    ours = {"layers.2.self_attn.qkv_proj": torch.cat((q, k * 2, v), dim=-1)}
    result = compare(ours, ref, fused=fused)
    assert result["first_divergence"]["module"] == "self_attn.k_proj" and result["only_in_adapter"] == []


def test_points_by_role_and_layout() -> None:
    assert point_of("model.layers.3.self_attn") == (3, "attention")
    assert point_of("model.layers.3.block_sparse_moe.router") == (3, "router")
    assert point_of("model.layers.3.mlp.gate") == (3, "router")
    assert point_of("model.layers.3") == (3, "layer_output")
    assert point_of("model.norm") == (None, "final_norm")
    assert point_of("model.layers.3.self_attn.q_proj") is None
    assert point_of("model.layers.3.self_attn.q_proj", ("self_attn.q_proj",)) == (3, "self_attn.q_proj")
    heads_first, seq_first = _rand(1, 4, S, 8), None
    seq_first = heads_first.transpose(1, 2)  # [B, S, H, D]: the same values in the other layout
    assert torch.equal(by_position(heads_first, S), by_position(seq_first, S))
    assert by_position(_rand(S, 6), S).shape == (S, 6)  # router logits [tokens, experts]


def test_each_heuristic_fires_on_its_pattern_only() -> None:
    ref, tol = _rand(S, C), 1e-4
    noise = ref + 0.3 * _rand(S, C)
    w = 0.1 * _rand(C)
    assert norm_offset(ref * w / (1 + w), ref, w).startswith("≈ w / (1+w)")
    assert norm_offset(ref * (1 + w) / w, ref, w).startswith("≈ (1+w) / w")
    assert norm_offset(noise, ref, w) is None
    assert per_channel_scale(ref * (1 + w), ref) is not None and per_channel_scale(noise, ref) is None
    per_token = 1 + 0.2 * torch.rand(S, 1, generator=G)
    assert per_token_scale(ref * per_token, ref) is not None and per_token_scale(noise, ref) is None
    assert per_channel_scale(ref * per_token, ref) is None and per_token_scale(ref * (1 + w), ref) is None
    assert constant_ratio(ref * 0.5, ref, tol) is not None and constant_ratio(noise, ref, tol) is None
    late = ref.clone()
    late[16:] += 0.5
    assert past_position(late, ref, tol) == "only positions ≥ 16 diverge: a window or chunk boundary at 16 " \
                                           "(sliding window, chunking)"  # fmt: skip
    assert past_position(noise, ref, tol) is None
    from_one = ref.clone()
    from_one[1:] += 0.5
    assert scores_only(from_one, ref, tol) is not None and scores_only(noise, ref, tol) is None
    positions = torch.arange(S, dtype=torch.float64)[:, None]
    table = torch.cos(positions * torch.tensor([1.0, 0.1, 0.01]))
    theirs = torch.cat((table, table), dim=-1)  # transformers repeats each frequency
    assert grows_with_position([table], [theirs], tol) is None
    wrong = torch.cos(positions * torch.tensor([1.0, 0.05, 0.001]))
    assert grows_with_position([wrong], [theirs], tol).startswith("rotary cos/sin tables differ from position 1")
    assert missing_modules(["q_norm", "k_norm"]).endswith("missing QK-norm")
    assert missing_modules(["experts"]) is None  # our MoE blocks never call an experts module


def test_point_tolerance_is_the_comparators_row_and_an_unknown_dtype_is_refused() -> None:
    """The bisect's per-point bound is comparator.THRESHOLDS["point_error"] (floor, or the multiplier on the
    reference's own error in that dtype); a dtype the table has no column for is an error, not float32's bound."""
    ref = _capture(layers__0__mlp=_rand(S, C))
    ours = {"layers.0.mlp": ref["layers.0.mlp"] * (1 + 3e-3)}
    row = THRESHOLDS["point_error"]
    result = compare(ours, ref, "float16")
    assert result["point_tolerance"] == row["floor"]["float16"] and result["first_divergence"] is None
    noisy = {"layers.0.mlp": ref["layers.0.mlp"] * (1 + 4e-2)}  # the reference's own float16 run, this far off
    widened = compare({"layers.0.mlp": ref["layers.0.mlp"] * (1 + 6e-2)}, ref, "float16", noise=noisy)
    assert widened["per_layer_error"][0]["tolerance"] == pytest.approx(row["multiplier"] * 4e-2, rel=1e-3)
    assert widened["first_divergence"] is None
    with pytest.raises(UnknownDtype, match=r"dtype 'float8_e4m3fn' has no column"):
        compare(ours, ref, "float8_e4m3fn")

"""TensorIndex groups tensors by name shape without per-tensor Python work; its sums must still be exact."""

from __future__ import annotations

from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.tensor_index import TensorIndex


def _t(name: str, dtype: str, shape: tuple[int, ...], begin: int, width: int, file: str = "a.safetensors"):
    n = 1
    for d in shape:
        n *= d
    return name, TensorInfo(name, dtype, shape, (begin, begin + n * width), file)


def test_groups_counts_bytes_and_first_tensor():
    items = dict([
        _t("model.layers.0.self_attn.q_proj.weight", "BF16", (8, 4), 0, 2),
        _t("model.layers.1.self_attn.q_proj.weight", "BF16", (8, 4), 64, 2),
        _t("model.layers.10.self_attn.q_proj.weight", "BF16", (8, 4), 128, 2, "b.safetensors"),
        _t("model.layers.0.mlp.experts.3.w1.weight", "F8_E4M3", (2, 4), 192, 1),
        _t("model.layers.1.mlp.experts.12.w1.weight", "F8_E4M3", (2, 4), 200, 1),
        _t("model.embed_tokens.weight", "BF16", (100, 4), 208, 2),
    ])  # fmt: skip
    idx = TensorIndex.from_tensors(items)
    by_template = {g.template: g for g in idx.groups}
    q = by_template["model.layers.{}.self_attn.q_proj.weight"]
    assert (q.count, q.nbytes, q.numel, q.first_shape, q.first_name) == (3, 192, 96, (8, 4), items and q.first_name)
    assert q.first_name == "model.layers.0.self_attn.q_proj.weight"
    experts = by_template["model.layers.{}.mlp.experts.{}.w1.weight"]
    assert (experts.count, experts.numel, experts.dtype) == (2, 16, "F8_E4M3")
    assert idx.total == 6
    assert sorted(idx.names_of([q])) == sorted(n for n in items if "q_proj" in n)
    assert dict(idx.shapes_of([experts])) == {n: (2, 4) for n in items if "experts" in n}


def test_mixed_dtype_group_is_split():
    items = dict([
        _t("model.layers.0.w.weight", "BF16", (2, 2), 0, 2),
        _t("model.layers.1.w.weight", "F32", (2, 2), 8, 4),
        _t("model.layers.2.w.weight", "BF16", (2, 2), 24, 2),
    ])  # fmt: skip
    groups = {(g.dtype, g.count, g.numel) for g in TensorIndex.from_tensors(items).groups}
    assert groups == {("BF16", 2, 8), ("F32", 1, 4)}


def test_packed_mxfp4_blocks_count_two_values_a_byte():
    items = dict([_t("model.layers.0.mlp.experts.gate_up_proj_blocks", "U8", (4, 8, 16), 0, 1)])
    (group,) = TensorIndex.from_tensors(items).groups
    assert group.numel == 2 * 4 * 8 * 16


def test_digits_inside_names_stay_apart():
    """`w1`/`w3` and `fc1`/`fc2` mask to the same key; they must still be separate groups with their own counts."""
    items = dict([
        _t("model.layers.0.mlp.experts.0.w1.weight", "BF16", (4, 2), 0, 2),
        _t("model.layers.0.mlp.experts.0.w3.weight", "BF16", (4, 2), 16, 2),
        _t("model.layers.0.mlp.experts.1.w1.weight", "BF16", (4, 2), 32, 2),
        _t("transformer.h.0.mlp.fc1.weight", "F32", (8, 2), 48, 4),
        _t("transformer.h.0.mlp.fc2.weight", "F32", (2, 8), 112, 4),
    ])  # fmt: skip
    got = {g.template: (g.count, g.numel, g.first_shape) for g in TensorIndex.from_tensors(items).groups}
    assert got == {
        "model.layers.{}.mlp.experts.{}.w1.weight": (2, 16, (4, 2)),
        "model.layers.{}.mlp.experts.{}.w3.weight": (1, 8, (4, 2)),
        "transformer.h.{}.mlp.fc1.weight": (1, 16, (8, 2)),
        "transformer.h.{}.mlp.fc2.weight": (1, 16, (2, 8)),
    }

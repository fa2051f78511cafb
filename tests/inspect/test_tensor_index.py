"""TensorIndex groups tensors by name shape without per-tensor Python work; its sums must still be exact."""

from __future__ import annotations

import itertools
from pathlib import Path

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader, TensorInfo
from onboard.inspect_checkpoint.safetensors_header import read_local_header
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from tests import malformed as M


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


def _shards(root: Path) -> list[SafetensorsHeader]:
    """Five shards of twelve layers: layer 10's q_proj in BF16 (one masked name, two dtypes), layer 11's MLP wider
    (shapes unlike the group's first), experts named w1/w3 (digits inside a name), layers 9 and 10 masking apart."""
    tensors: dict[str, tuple[str, list[int]]] = {"model.embed_tokens.weight": ("BF16", [32, 8])}
    for i in range(12):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = ("BF16" if i == 10 else "F32", [8, 8])
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = ("F32", [24 if i == 11 else 16, 8])
        for e in range(3):
            for w in ("w1", "w3"):
                tensors[f"model.layers.{i}.mlp.experts.{e}.{w}.weight"] = ("F8_E4M3", [4, 8])
    tensors["lm_head.weight"] = ("BF16", [32, 8])
    names = list(tensors)
    cuts = [0, 5, 30, 31, 70, len(names)]  # uneven shards, one holding a single tensor
    headers = []
    for k, (a, b) in enumerate(itertools.pairwise(cuts)):
        name = f"model-{k + 1:05d}-of-00005.safetensors"
        M.write_safetensors(root / name, M.header_dict({n: tensors[n] for n in names[a:b]}))
        headers.append(read_local_header(root / name, name))
    return headers


def _facts(index: TensorIndex) -> list[tuple]:
    every = index.shapes_of(index.groups)
    per_group = [index.shapes_of([g]) for g in index.groups]
    fields = [(g.template, g.dtype, g.count, g.nbytes, g.first_name, g.first_shape, g.first_file) for g in index.groups]
    return [index.total, fields, every, per_group]


def test_headers_and_tensors_group_alike(tmp_path: Path) -> None:
    """Grouped from the parsed headers (their raw records, sizes known from the shapes) or from TensorInfo objects
    (sizes summed from the offsets), the same tensors give the same groups, firsts and tensors behind every group."""
    headers = _shards(tmp_path)
    from_headers = TensorIndex.from_headers(headers)
    from_tensors = TensorIndex.from_tensors({n: t for h in headers for n, t in h.tensors.items()})
    assert len({g.template for g in from_headers.groups}) < len(from_headers.groups)  # the mixed-dtype group is split
    assert _facts(from_headers) == _facts(from_tensors)


def test_each_group_answers_for_its_own_tensors(tmp_path: Path) -> None:
    """A masked name split by dtype or by digits inside names (`w1`/`w3`) gives groups whose queries name their own
    tensors: not the whole masked name's under its first group, and none under the others."""
    index = TensorIndex.from_headers(_shards(tmp_path))
    for g in index.groups:
        shapes = index.shapes_of([g])
        assert len(shapes) == g.count, g
        assert {tn.template(name) for name, _ in shapes} == {g.template}, g
    q_bf16 = next(g for g in index.groups if g.template.endswith("q_proj.weight") and g.dtype == "BF16")
    assert index.names_of([q_bf16]) == ["model.layers.10.self_attn.q_proj.weight"]
    up = next(g for g in index.groups if g.template.endswith("up_proj.weight"))
    assert dict(index.shapes_of([up]))["model.layers.11.mlp.up_proj.weight"] == (24, 8)  # the wider layer's own


def test_names_beyond_ascii_group_like_the_rest():
    """ASCII names are masked as bytes, others as text: both give the same groups."""
    items = dict([
        _t("model.layers.0.mlp.größe.weight", "BF16", (4, 2), 0, 2),
        _t("model.layers.1.mlp.größe.weight", "BF16", (4, 2), 16, 2),
        _t("model.layers.0.mlp.w1.weight", "BF16", (4, 2), 32, 2),
        _t("model.layers.1.mlp.w1.weight", "BF16", (4, 2), 48, 2),
    ])  # fmt: skip
    got = {g.template: g.count for g in TensorIndex.from_tensors(items).groups}
    assert got == {"model.layers.{}.mlp.größe.weight": 2, "model.layers.{}.mlp.w1.weight": 2}

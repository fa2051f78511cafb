"""TensorIndex sums groups in bulk (count × the first tensor's bytes when a group is even): uneven groups, odd
names and inspect's collector pause must not change what a user reads."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from onboard.errors import ConfigError
from onboard.inspect_checkpoint import inspect
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from tests import malformed as M


def _tensors(specs: list[tuple[str, str, tuple[int, ...]]]) -> dict[str, TensorInfo]:
    """name, dtype, shape -> TensorInfo laid out back to back in one file."""
    width = {"BF16": 2, "F32": 4}
    out, pos = {}, 0
    for name, dtype, shape in specs:
        n = width[dtype]
        for d in shape:
            n *= d
        out[name] = TensorInfo(name, dtype, shape, (pos, pos + n), "model.safetensors")
        pos += n
    return out


def test_group_with_uneven_sizes_sums_each_tensor() -> None:
    """Layers of different widths (variable-FFN models) share a template; bytes are the exact sum, not count × first."""
    items = _tensors([
        ("model.layers.0.mlp.up_proj.weight", "BF16", (16, 4)),
        ("model.layers.1.mlp.up_proj.weight", "BF16", (32, 4)),
        ("model.layers.2.mlp.up_proj.weight", "BF16", (8, 4)),
        ("model.layers.0.input_layernorm.weight", "BF16", (4,)),
        ("model.layers.1.input_layernorm.weight", "BF16", (4,)),
    ])  # fmt: skip
    groups = {g.template: g for g in TensorIndex.from_tensors(items).groups}
    up = groups["model.layers.{}.mlp.up_proj.weight"]
    assert (up.count, up.nbytes, up.numel, up.first_shape) == (3, (16 + 32 + 8) * 4 * 2, (16 + 32 + 8) * 4, (16, 4))
    norm = groups["model.layers.{}.input_layernorm.weight"]
    assert (norm.count, norm.nbytes) == (2, 16)


def test_uneven_and_mixed_dtype_group_splits_with_exact_sums() -> None:
    items = _tensors([
        ("model.layers.0.w.weight", "BF16", (2, 2)),
        ("model.layers.1.w.weight", "F32", (2, 2)),
        ("model.layers.2.w.weight", "BF16", (4, 2)),
    ])  # fmt: skip
    got = {(g.dtype, g.count, g.nbytes) for g in TensorIndex.from_tensors(items).groups}
    assert got == {("BF16", 2, 8 + 16), ("F32", 1, 16)}


def test_tensor_name_with_a_newline_is_grouped_on_its_own() -> None:
    """JSON allows any character in a tensor name; one holding a newline used to shift every later tensor's group
    (IndexError on a whole checkpoint)."""
    items = _tensors([
        ("model.layers.0.odd\nname.weight", "BF16", (2,)),
        ("model.layers.0.w.weight", "F32", (4,)),
        ("model.layers.1.w.weight", "F32", (4,)),
    ])  # fmt: skip
    got = {g.template: (g.dtype, g.count, g.nbytes) for g in TensorIndex.from_tensors(items).groups}
    assert got == {"model.layers.{}.odd\nname.weight": ("BF16", 1, 4), "model.layers.{}.w.weight": ("F32", 2, 32)}


def test_inspect_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    """inspect pauses the cyclic collector while it reads headers; a caller's setting survives, errors included."""
    root = M.valid(tmp_path / "repo")
    assert gc.isenabled()
    assert inspect(str(root)).parameters.total > 0
    assert gc.isenabled()
    (root / "config.json").unlink()
    with pytest.raises(ConfigError, match="no config.json"):
        inspect(str(root))
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(ConfigError, match="no config.json"):
            inspect(str(root))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_parsed_headers_with_uneven_layers_sum_each_tensor(tmp_path: Path) -> None:
    """From parsed (checked) headers, tensors of one dtype and shape share a size; a group whose shapes differ,
    even with equal sizes, is summed tensor by tensor."""
    from onboard.inspect_checkpoint.safetensors_header import read_local_header

    tensors = {
        "model.layers.0.mlp.up_proj.weight": ("BF16", [16, 4]),
        "model.layers.1.mlp.up_proj.weight": ("BF16", [8, 8]),
        "model.layers.2.mlp.up_proj.weight": ("BF16", [32, 4]),
        "model.layers.0.mlp.down_proj.weight": ("BF16", [4, 16]),
        "model.layers.1.mlp.down_proj.weight": ("BF16", [4, 16]),
    }
    path = M.write_safetensors(tmp_path / "model.safetensors", M.header_dict(tensors))
    groups = {g.template: g for g in TensorIndex.from_headers([read_local_header(path, "model.safetensors")]).groups}
    up = groups["model.layers.{}.mlp.up_proj.weight"]
    assert (up.count, up.nbytes, up.first_shape) == (3, (64 + 64 + 128) * 2, (16, 4))
    down = groups["model.layers.{}.mlp.down_proj.weight"]
    assert (down.count, down.nbytes) == (2, 2 * 64 * 2)


def test_shapes_of_several_groups_in_checkpoint_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small groups answer from positions listed once, larger ones from a pass over all tensors; both give every
    tensor of the asked groups, in checkpoint order."""
    import onboard.inspect_checkpoint.tensor_index as ti

    monkeypatch.setattr(ti, "SMALL_GROUP", 2)
    items = _tensors([
        ("model.layers.0.norm.weight", "F32", (4,)),
        ("model.layers.0.mlp.experts.0.w.weight", "BF16", (2, 2)),
        ("model.layers.0.mlp.experts.1.w.weight", "BF16", (2, 2)),
        ("model.layers.1.norm.weight", "F32", (4,)),
        ("model.layers.1.mlp.experts.0.w.weight", "BF16", (2, 2)),
    ])  # fmt: skip
    index = TensorIndex.from_tensors(items)
    groups = {g.template: g for g in index.groups}
    norm, experts = groups["model.layers.{}.norm.weight"], groups["model.layers.{}.mlp.experts.{}.w.weight"]
    every = [(name, t.shape) for name, t in items.items()]
    assert index.shapes_of([norm]) == [e for e in every if "norm" in e[0]]
    assert index.shapes_of([norm]) == index.shapes_of([norm])  # answered again from the listed positions
    assert index.shapes_of([experts, norm]) == every
    assert index.names_of([experts]) == [n for n in items if "experts" in n]

"""Safetensors header parsing: agreement with the safetensors library, and one precise error per kind of damage."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from onboard.errors import CheckpointError
from onboard.inspect_checkpoint import safetensors_header as sh
from tests import malformed as M


@pytest.fixture(params=["fast", "slow"])
def path_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the msgspec fast path and on the json-only slow path (every header refused by the fast one)."""
    if request.param == "slow":
        monkeypatch.setattr(sh, "_fast_parse", lambda *args: None)
    return request.param


def _code(path: Path, name: str = "model.safetensors") -> str:
    with pytest.raises(CheckpointError) as info:
        sh.read_local_header(path, name)
    assert name in info.value.message and info.value.hint
    return info.value.code


def test_matches_the_safetensors_library(tmp_path: Path, path_kind: str) -> None:
    arrays = {
        "b.weight": np.zeros((3, 5), dtype=np.float16),
        "a.bias": np.zeros((7,), dtype=np.int64),
        "c.scalar": np.zeros((), dtype=np.float32),
        "d.empty": np.zeros((0, 4), dtype=np.uint8),
        "e.flag": np.zeros((2, 2), dtype=bool),
    }
    path = tmp_path / "m.safetensors"
    save_file(arrays, str(path), metadata={"format": "np", "note": "x"})
    header = sh.read_local_header(path, "m.safetensors")
    assert header.metadata == {"format": "np", "note": "x"}
    assert header.file_size == path.stat().st_size
    with safe_open(str(path), "np") as f:
        assert set(header.tensors) == set(f.keys())
        for name in f.keys():
            t = header.tensors[name]
            assert list(t.shape) == list(f.get_slice(name).get_shape())
            assert t.dtype == f.get_slice(name).get_dtype()
            assert t.nbytes == arrays[name].nbytes and t.numel == arrays[name].size
            assert t.file == "m.safetensors"


def test_real_shards_from_shared_data(shared_data: Path) -> None:
    files = sorted((shared_data / "safetensors").rglob("*.safetensors"))
    assert files
    for path in files:
        header = sh.read_local_header(path, path.name)
        with safe_open(str(path), "np") as f:
            assert set(header.tensors) == set(f.keys())


def test_unusual_order_and_empty_header(tmp_path: Path, path_kind: str) -> None:
    header = M.header_dict(M.TENSORS)
    names = list(M.TENSORS)
    shuffled = {"__metadata__": header["__metadata__"], **{n: header[n] for n in reversed(names)}}
    path = M.write_safetensors(tmp_path / "x.safetensors", shuffled)
    parsed = sh.read_local_header(path, "x.safetensors")
    assert list(parsed.tensors) == list(reversed(names))
    assert parsed.tensors["lm_head.weight"].data_offsets == tuple(header["lm_head.weight"]["data_offsets"])
    empty = M.write_raw(tmp_path / "e.safetensors", b"{}", 0)
    assert len(sh.read_local_header(empty, "e.safetensors").tensors) == 0


@pytest.mark.parametrize(
    "builder, code",
    [(b, c) for b, c in M.CORPUS.values() if c not in ("path-traversal", "pickle-only", "remote-code-required",
                                                       "missing-shard", "duplicate-tensor", "symlink-outside")],
    ids=lambda x: getattr(x, "__name__", x),
)  # fmt: skip
def test_corpus_codes(tmp_path: Path, builder, code: str, path_kind: str) -> None:
    root = builder(tmp_path / "repo")
    assert _code(root / "model.safetensors") == code


def test_damage_kinds_one_by_one(tmp_path: Path, path_kind: str) -> None:
    def header_with(**changes: object) -> dict:
        h = M.header_dict(M.TENSORS)
        for key, value in changes.items():
            h["model.norm.weight"][key] = value  # type: ignore[index]
        return h

    cases = {
        "gap": (header_with(data_offsets=[10**6, 10**6 + 32]), "offsets-past-eof"),
        "negative-shape": (header_with(shape=[-8]), "header-invalid"),
        "float-offsets": (header_with(data_offsets=[0.5, 32]), "header-invalid"),
        "reversed": (header_with(data_offsets=[32, 0]), "header-invalid"),
        "not-object": ({"model.norm.weight": [1, 2]}, "header-invalid"),
        "bad-metadata": ({"__metadata__": {"a": 1}}, "header-invalid"),
    }
    for label, (header, code) in cases.items():
        path = M.write_safetensors(tmp_path / f"{label}.safetensors", header, M.data_len(M.header_dict(M.TENSORS)))
        assert _code(path, f"{label}.safetensors") == code, label
    # Trailing bytes after the last tensor: the layout does not cover the file.
    path = M.write_safetensors(
        tmp_path / "t.safetensors", M.header_dict(M.TENSORS), M.data_len(M.header_dict(M.TENSORS)) + 64
    )
    assert _code(path, "t.safetensors") == "offsets-gap"
    # A gap in the middle (data region still exactly covered in total length).
    h = M.header_dict(M.TENSORS)
    h["lm_head.weight"]["data_offsets"] = [
        h["lm_head.weight"]["data_offsets"][0] + 8,
        h["lm_head.weight"]["data_offsets"][1] + 8,
    ]  # type: ignore[index]
    path = M.write_safetensors(tmp_path / "g.safetensors", h, M.data_len(h))
    assert _code(path, "g.safetensors") == "offsets-gap"
    # Non-UTF-8 bytes, a JSON list, a file shorter than the length prefix.
    assert _code(M.write_raw(tmp_path / "u.safetensors", b'{"\xff":1}', 0), "u.safetensors") == "header-not-json"
    assert _code(M.write_raw(tmp_path / "l.safetensors", b"[1, 2]", 0), "l.safetensors") == "header-not-json"
    (tmp_path / "s.safetensors").write_bytes(b"abc")
    assert _code(tmp_path / "s.safetensors", "s.safetensors") == "truncated"
    assert (
        _code(M.write_raw(tmp_path / "z.safetensors", b"", 0, claimed_len=1), "z.safetensors")
        == "header-length-invalid"
    )


def test_error_names_file_and_tensor(tmp_path: Path) -> None:
    root = M.unknown_dtype(tmp_path / "r")
    with pytest.raises(CheckpointError) as info:
        sh.read_local_header(root / "model.safetensors", "model.safetensors")
    assert "model.safetensors" in info.value.message and "model.norm.weight" in info.value.message
    assert info.value.file == "model.safetensors" and info.value.tensor == "model.norm.weight"


def test_huge_header_claim_is_rejected_before_reading(tmp_path: Path) -> None:
    # 100 MB + 1 claimed in a 10-byte file, and 1 TB claimed in a large sparse file: no allocation, no read.
    assert _code(M.huge_header_claim(tmp_path / "a") / "model.safetensors") == "header-length-invalid"
    big = tmp_path / "big.safetensors"
    with open(big, "wb") as f:
        f.write(struct.pack("<Q", 2**40))
        f.truncate(2**41)
    assert _code(big, "big.safetensors") == "header-length-invalid"


def test_parse_header_without_file_size(path_kind: str) -> None:
    raw = json.dumps(M.header_dict(M.TENSORS)).encode()
    header = sh.parse_header("x.safetensors", len(raw), raw, None)
    assert header.file_size is None and len(header.tensors) == len(M.TENSORS)
    with pytest.raises(CheckpointError) as info:
        sh.parse_header("x.safetensors", len(raw) + 10, raw, None)
    assert info.value.code == "truncated"


def test_tensor_map_is_a_lazy_mapping(tmp_path: Path) -> None:
    path = M.write_safetensors(tmp_path / "x.safetensors", M.header_dict(M.TENSORS))
    tensors = sh.read_local_header(path, "x.safetensors").tensors
    assert len(tensors) == len(M.TENSORS) and "lm_head.weight" in tensors and "nope" not in tensors
    assert tensors["lm_head.weight"] is tensors["lm_head.weight"]  # built once
    records = tensors.records
    assert list(records) == list(M.TENSORS)
    assert all(tuple(r.shape) == tuple(M.TENSORS[name][1]) for name, r in records.items())
    assert dict(tensors) == {n: tensors[n] for n in M.TENSORS}


def test_metadata_with_a_dtype_key_is_still_metadata(tmp_path: Path, path_kind: str) -> None:
    """The fast path decodes dtypes against the known names; a writer's `__metadata__` may hold any string under
    any key, `dtype` included, and stays a valid header with its metadata intact."""
    header = M.header_dict(M.TENSORS)
    header["__metadata__"] = {"format": "pt", "dtype": "my-custom-format", "shape": "n/a"}
    path = M.write_safetensors(tmp_path / "m.safetensors", header)
    parsed = sh.read_local_header(path, "m.safetensors")
    assert parsed.metadata == {"format": "pt", "dtype": "my-custom-format", "shape": "n/a"}
    assert set(parsed.tensors) == set(M.TENSORS)
    assert {parsed.tensors[n].dtype for n in M.TENSORS} == {spec[0] for spec in M.TENSORS.values()}

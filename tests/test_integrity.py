# ruff: noqa: F811  (pytest fixtures imported from tests.hubserver are used as parameters)
"""Integrity findings: every entry of the malformed corpus gives its code, locally and through the hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onboard.findings import Finding
from onboard.inspect_checkpoint.integrity import check_integrity
from onboard.inspect_checkpoint.remote_code import find_remote_code, remote_code_findings
from onboard.inspect_checkpoint.source import Source, open_source
from tests import malformed as M
from tests.hubserver import HubServer, hub_env, hub_server  # noqa: F401  (fixtures)


def findings_of(src: Source) -> list[Finding]:
    headers = src.read_headers(src.safetensors_files())
    found = list(src.findings) + check_integrity(src, headers)
    found += remote_code_findings(find_remote_code(src, src.read_json("config.json") or {}), natively_supported=False)
    return found


@pytest.mark.parametrize("case", sorted(M.CORPUS))
def test_corpus_local(case: str, tmp_path: Path) -> None:
    builder, code = M.CORPUS[case]
    found = findings_of(open_source(str(builder(tmp_path / "repo"))))
    hits = [f for f in found if f.code == code]
    assert hits, f"{case}: expected {code}, got {[f.code for f in found]}"
    assert all(f.severity == "fatal" for f in hits)
    assert all(f.message and f.hint for f in found)
    assert not list(tmp_path.glob("*EXECUTED*"))  # no pickle loaded, no repo code run


HUB_CASES = ["truncated", "header_past_eof", "huge_header_claim", "offsets_past_eof", "non_json_header",
             "missing_shard", "duplicate_tensor", "path_traversal", "pickle_only"]  # fmt: skip


@pytest.mark.parametrize("case", HUB_CASES)
def test_corpus_through_the_hub(case: str, hub_env: HubServer, tmp_path: Path) -> None:
    builder, code = M.CORPUS[case]
    hub_env.add_repo("org/bad", builder(tmp_path / "repo"))
    found = findings_of(open_source("org/bad"))
    assert code in [f.code for f in found], [f.code for f in found]
    assert not list(tmp_path.glob("*EXECUTED*"))


def test_valid_checkpoint_has_no_findings(tmp_path: Path) -> None:
    assert findings_of(open_source(str(M.valid(tmp_path / "repo")))) == []
    assert findings_of(open_source(str(M.write_repo(tmp_path / "single")))) == []


def _with_index(root: Path, mutate) -> Source:  # type: ignore[no-untyped-def]
    index = json.loads((root / "model.safetensors.index.json").read_text())
    mutate(index["weight_map"])
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return open_source(str(root))


def test_index_versus_headers(tmp_path: Path) -> None:
    second = "model-00002-of-00002.safetensors"
    # Listed in the index for a shard that does not hold it: fatal, naming shard and tensor.
    src = _with_index(M.valid(tmp_path / "a"), lambda wm: wm.__setitem__("model.ghost.weight", second))
    hit = [f for f in findings_of(src) if f.code == "tensor-missing"]
    assert hit and hit[0].severity == "fatal" and hit[0].file == second and hit[0].tensor == "model.ghost.weight"
    # Held by a shard but not in the index: an error.
    src = _with_index(M.valid(tmp_path / "b"), lambda wm: wm.pop("lm_head.weight"))
    hit = [f for f in findings_of(src) if f.code == "tensor-not-indexed"]
    assert hit and hit[0].severity == "error" and hit[0].tensor == "lm_head.weight"
    # A stale extra shard at the top level: a warning; other formats in sub-folders are fine.
    root = M.valid(tmp_path / "c")
    M.write_safetensors(root / "stale.safetensors", M.header_dict({"x": ("F32", [2])}))
    (root / "original").mkdir()
    M.write_safetensors(root / "original" / "consolidated.safetensors", M.header_dict({"x": ("F32", [2])}))
    codes = [(f.code, f.severity, f.file) for f in findings_of(open_source(str(root)))]
    assert codes == [("extra-shard", "warning", "stale.safetensors")]


def test_invalid_index(tmp_path: Path) -> None:
    root = M.valid(tmp_path / "r")
    (root / "model.safetensors.index.json").write_text(json.dumps({"weight_map": ["not", "a", "map"]}))
    assert [f.code for f in findings_of(open_source(str(root)))] == ["index-invalid"]


def test_weight_formats(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "none", {})
    assert [f.code for f in findings_of(open_source(str(root)))] == ["no-weights"]
    (root / "training_args.bin").write_bytes(b"not weights")
    assert [f.code for f in findings_of(open_source(str(root)))] == ["no-weights"]
    both = M.write_repo(tmp_path / "both")
    (both / "pytorch_model.bin").write_bytes(b"\x80\x04.")
    assert findings_of(open_source(str(both))) == []  # safetensors present: the pickle is simply ignored
    pk = M.pickle_only(tmp_path / "pk")
    hit = [f for f in findings_of(open_source(str(pk))) if f.code == "pickle-only"]
    assert "pickle-only checkpoint: convert to safetensors" in hit[0].message and hit[0].file == "pytorch_model.bin"


def test_many_tensors_are_checked_quickly(tmp_path: Path) -> None:
    import time

    tensors = {f"model.layers.{i}.w{j}": ("BF16", [4, 4]) for i in range(100) for j in range(100)}
    shards = {f"model-{k:05d}.safetensors": dict(list(tensors.items())[k::4]) for k in range(4)}
    src = open_source(str(M.write_repo(tmp_path / "r", shards, index=True)))
    headers = src.read_headers(src.safetensors_files())
    start = time.perf_counter()
    assert check_integrity(src, headers) == []
    assert time.perf_counter() - start < 0.5  # 10k tensors: set and dict comparisons, not Python loops

"""Local sources: SOURCE resolution, listing, symlink safety, JSON errors, git revision, shard discovery."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from onboard.errors import ConfigError, InputError, SourceNotFound
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import LocalSource, is_safe_relpath, open_source
from tests import malformed as M


def test_local_folder_listing_and_reads(tmp_path: Path) -> None:
    root = M.valid(tmp_path / "repo")
    (root / "sub").mkdir()
    (root / "sub" / "notes.txt").write_text("hello")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "refs" / "heads" / "main").write_text("a" * 40 + "\n")
    src = open_source(str(root))
    assert isinstance(src, LocalSource) and src.repo_id is None and src.local_dir == root.resolve()
    assert src.revision == "a" * 40
    paths = [f.path for f in src.files]
    assert "sub/notes.txt" in paths and not any(p.startswith(".git") for p in paths)
    assert src.file_size("config.json") == (root / "config.json").stat().st_size
    assert src.read_json("config.json")["model_type"] == "llama"
    assert src.read_json("nope.json") is None and src.read_text("sub/notes.txt") == "hello"
    assert src.path_of("../repo/config.json") is None
    assert src.safetensors_files() == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    headers = src.read_headers(src.safetensors_files())
    assert all(isinstance(h, SafetensorsHeader) for h in headers.values())
    assert src.findings == () and src.bytes_fetched == 0


def test_packed_refs_and_detached_head(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "r")
    git = root / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/dev\n")
    (git / "packed-refs").write_text(f"# pack-refs\n{'b' * 40} refs/heads/dev\n")
    assert open_source(str(root)).revision == "b" * 40
    (git / "HEAD").write_text("c" * 40 + "\n")
    assert open_source(str(root)).revision == "c" * 40


def test_shards_without_index_are_top_level_safetensors(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "r", M.split_two())
    (root / "original").mkdir()
    M.write_safetensors(root / "original" / "consolidated.safetensors", M.header_dict(M.TENSORS))
    src = open_source(str(root))
    assert src.index() is None
    assert src.safetensors_files() == sorted(M.split_two())


def test_index_with_unsafe_paths_is_filtered(tmp_path: Path) -> None:
    src = open_source(str(M.path_traversal(tmp_path / "r")))
    assert "../outside.safetensors" not in src.safetensors_files()


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "r")
    (root / "config.json").write_text('{\n  "model_type": "llama",\n  "hidden_size": 8,,\n}')
    with pytest.raises(ConfigError) as info:
        open_source(str(root)).read_json("config.json")
    assert "config.json" in info.value.message and "line 3" in info.value.message and info.value.hint
    (root / "config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        open_source(str(root)).read_json("config.json")
    (root / "config.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ConfigError, match="UTF-8"):
        open_source(str(root)).read_json("config.json")
    (root / "config.json").write_bytes(
        b'{\r\n  "model_type": "llama",\r\n  "name": "caf\xc3\xa9"\r\n}\r\n'
    )  # Windows-saved
    assert open_source(str(root)).read_json("config.json") == {"model_type": "llama", "name": "café"}


@pytest.mark.parametrize("spec", ["./does-not-exist", "/no/such/folder", "~/no-such-onboard-folder"])
def test_missing_local_folder(spec: str) -> None:
    with pytest.raises(SourceNotFound) as info:
        open_source(spec)
    assert spec in info.value.message and info.value.hint


@pytest.mark.parametrize("spec", ["a/b/c", "just-a-name", "org/", "org/na me", "org/..", "-x/y"])
def test_invalid_repo_ids(spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # so that no relative path accidentally exists
    with pytest.raises(SourceNotFound) as info:
        open_source(spec)
    assert info.value.hint


def test_file_instead_of_folder_and_revision_on_local(tmp_path: Path) -> None:
    root = M.write_repo(tmp_path / "r")
    with pytest.raises(SourceNotFound, match="is a file"):
        open_source(str(root / "config.json"))
    with pytest.raises(InputError, match="--revision"):
        open_source(str(root), revision="main")


def test_symlinks(tmp_path: Path) -> None:
    root = M.symlink_outside(tmp_path / "r")
    (root / "inside.json").symlink_to(root / "config.json")
    (root / "dangling.json").symlink_to(root / "gone.json")
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    (root / "linked_dir").symlink_to(outside_dir)
    src = open_source(str(root))
    codes = {(f.code, f.file) for f in src.findings}
    assert ("symlink-outside", "tokenizer_config.json") in codes
    assert ("symlink-outside", "linked_dir") in codes
    assert ("symlink-dangling", "dangling.json") in codes
    assert all(f.severity == "fatal" for f in src.findings if f.code == "symlink-outside")
    paths = {f.path for f in src.files}
    assert "inside.json" in paths and "tokenizer_config.json" not in paths
    assert src.read_json("tokenizer_config.json") is None  # never read through the escaping link
    assert src.read_json("inside.json")["model_type"] == "llama"


def test_hf_cache_snapshot_layout_is_inside(tmp_path: Path) -> None:
    # huggingface_hub's cache: snapshots/<sha>/file -> ../../blobs/<hash>; those links are part of the repo.
    repo = tmp_path / "models--org--name"
    blobs, snap = repo / "blobs", repo / "snapshots" / ("d" * 40)
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (blobs / "cfg").write_text(json.dumps(M.CONFIG))
    (snap / "config.json").symlink_to(os.path.relpath(blobs / "cfg", snap))
    src = open_source(str(snap))
    assert src.findings == () and src.read_json("config.json")["model_type"] == "llama"


def test_huge_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from onboard.inspect_checkpoint import source

    monkeypatch.setattr(source, "MAX_FILES", 3)
    root = M.write_repo(tmp_path / "r")
    for i in range(3):
        (root / f"d{i}").mkdir()
        (root / f"d{i}" / "f").write_text("x")
    with pytest.raises(InputError, match="not a checkpoint folder"):
        open_source(str(root))


def test_is_safe_relpath() -> None:
    assert is_safe_relpath("a/b.safetensors") and is_safe_relpath("model.safetensors")
    assert is_safe_relpath("a/./b.safetensors") and is_safe_relpath("x/..y.safetensors") and is_safe_relpath("a//b")
    for bad in ("", "../x", "a/../../x", "/etc/x", "C:/x", "a\\..\\x", "\\x", "a/..", "..", "a/../b"):
        assert not is_safe_relpath(bad), bad


def test_index_reads_whole_whatever_its_shape(tmp_path: Path) -> None:
    """The usual index decodes on a fast typed path; an index with other keys, or naming a shard the folder lacks,
    is still read whole (the missing shard is integrity's to report)."""
    root = M.valid(tmp_path / "r")
    index = json.loads((root / "model.safetensors.index.json").read_text())
    assert open_source(str(root)).index() == index
    index["producer"] = {"tool": "custom", "version": 3}
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    assert open_source(str(root)).index() == index
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "model-00009-of-00009.safetensors"
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    src = open_source(str(root))
    assert src.index() == index
    assert "model-00009-of-00009.safetensors" in src.safetensors_files()


def test_large_index_is_read_like_a_small_one(tmp_path: Path) -> None:
    """An index over MAP_FROM_BYTES (read from a memory map) gives the same document, and the same precise error
    when it is malformed."""
    from onboard.inspect_checkpoint.source import MAP_FROM_BYTES

    root = M.valid(tmp_path / "r")
    index = json.loads((root / "model.safetensors.index.json").read_text())
    shard = next(iter(index["weight_map"].values()))
    index["weight_map"].update({f"model.extra.{i}.weight": shard for i in range(MAP_FROM_BYTES // 40)})
    text = json.dumps(index, indent=1)
    assert len(text) > MAP_FROM_BYTES
    (root / "model.safetensors.index.json").write_text(text)
    assert open_source(str(root)).index() == index
    (root / "model.safetensors.index.json").write_text(text[:-20] + ",,}")
    with pytest.raises(ConfigError, match=r"model.safetensors.index.json: malformed JSON at line \d+"):
        open_source(str(root)).index()

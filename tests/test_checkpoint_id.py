"""onboard/checkpoint_id.py: one content fingerprint of a checkpoint folder and one golden key."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from onboard.checkpoint_id import SAMPLE_BYTES, SAMPLES, WHOLE_FILE_BYTES, checkpoint_fingerprint, golden_key


def _checkpoint(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "llama", "rms_norm_eps": 1e-6}))
    (root / "tokenizer.json").write_text("{}")
    return root


def test_content_not_mtime_or_documentation(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "a")
    before = checkpoint_fingerprint(ckpt)
    os.utime(ckpt / "config.json", (1, 1))
    (ckpt / "README.md").write_text("model card\n")
    (ckpt / ".cache").mkdir()
    (ckpt / ".cache" / "lock").write_text("x")
    assert checkpoint_fingerprint(ckpt) == before
    (ckpt / "tokenizer.json").write_text('{"added_tokens": []}')  # a tokenizer edit changes what goldens mean
    assert checkpoint_fingerprint(ckpt) != before


def test_large_weight_shards_are_sampled_header_and_data(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "big")
    header = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    shard = ckpt / "model.safetensors"
    with shard.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(WHOLE_FILE_BYTES + 2**20)  # sparse: a "large" shard without writing 65 MiB
    base = checkpoint_fingerprint(ckpt)
    start = 8 + len(header)
    span = shard.stat().st_size - start - SAMPLE_BYTES
    with shard.open("r+b") as fh:  # a byte inside the 10th sample, as a fine-tune changes every tensor
        fh.seek(start + span * 10 // SAMPLES + 1)
        fh.write(b"\x01")
    assert checkpoint_fingerprint(ckpt) != base


def test_golden_key_prefers_the_repo_id(tmp_path: Path) -> None:
    assert golden_key("Qwen/Qwen3-8B") == "Qwen__Qwen3-8B"
    snapshot = _checkpoint(tmp_path / "hub" / "models--acme--chat-7b" / "snapshots" / ("c" * 40))
    assert golden_key(str(snapshot)) == "acme__chat-7b"
    plain = _checkpoint(tmp_path / "plain")
    assert golden_key(str(plain)) == "plain" and golden_key(str(plain), "acme/chat-7b") == "acme__chat-7b"
    (plain / "config.json").write_text(json.dumps({"_name_or_path": "acme/chat-7b"}))
    assert golden_key(str(plain)) == "acme__chat-7b"
    (plain / "config.json").write_text(json.dumps({"_name_or_path": "/scratch/run-3/checkpoint-500"}))
    assert golden_key(str(plain)) == "plain"

"""Builders of tiny checkpoints, valid and malformed, written byte by byte (no torch, milliseconds each).

`CORPUS` maps a case name to (builder, expected finding code). Each builder writes a repo folder (config.json,
safetensors shards, maybe an index) under the directory it is given and returns it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from math import prod
from pathlib import Path

from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES

TensorSpec = dict[str, tuple[str, list[int]]]  # name -> (dtype, shape)

CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float32",
}  # fmt: skip

TENSORS: TensorSpec = {
    "model.embed_tokens.weight": ("F32", [16, 8]),
    "model.layers.0.input_layernorm.weight": ("F32", [8]),
    "model.layers.0.self_attn.q_proj.weight": ("F32", [8, 8]),
    "model.layers.0.self_attn.k_proj.weight": ("F32", [4, 8]),
    "model.layers.0.self_attn.v_proj.weight": ("F32", [4, 8]),
    "model.layers.0.self_attn.o_proj.weight": ("F32", [8, 8]),
    "model.layers.0.post_attention_layernorm.weight": ("F32", [8]),
    "model.layers.0.mlp.gate_proj.weight": ("F32", [16, 8]),
    "model.layers.0.mlp.up_proj.weight": ("F32", [16, 8]),
    "model.layers.0.mlp.down_proj.weight": ("F32", [8, 16]),
    "model.norm.weight": ("F32", [8]),
    "lm_head.weight": ("F32", [16, 8]),
}


def header_dict(tensors: TensorSpec) -> dict[str, object]:
    """A safetensors header laying the tensors out contiguously, in the given order."""
    out: dict[str, object] = {"__metadata__": {"format": "pt"}}
    pos = 0
    for name, (dtype, shape) in tensors.items():
        n = int(prod(shape) * DTYPE_BYTES[dtype])
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    return out


def data_len(header: dict[str, object]) -> int:
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]  # type: ignore[index]
    return max(ends, default=0)


def write_raw(path: Path, header_bytes: bytes, data: int | bytes, claimed_len: int | None = None) -> Path:
    """prefix + header + data (an int: that many zero bytes, written as a sparse hole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes) if claimed_len is None else claimed_len))
        f.write(header_bytes)
        if isinstance(data, bytes):
            f.write(data)
        elif data:
            f.truncate(8 + len(header_bytes) + data)
    return path


def write_safetensors(path: Path, header: dict[str, object], data: int | None = None) -> Path:
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the safetensors writer pads the header to 8 bytes
    return write_raw(path, raw, data_len(header) if data is None else data)


def write_repo(root: Path, shards: dict[str, TensorSpec] | None = None, index: bool | dict | None = None) -> Path:
    """A repo with config.json and the shards; `index=True` writes a matching model.safetensors.index.json."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(CONFIG))
    shards = shards if shards is not None else {"model.safetensors": TENSORS}
    for name, tensors in shards.items():
        write_safetensors(root / name, header_dict(tensors))
    if index is True:
        index = make_index(shards)
    if isinstance(index, dict):
        (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


def make_index(shards: dict[str, TensorSpec]) -> dict[str, object]:
    weight_map = {t: shard for shard, tensors in shards.items() for t in tensors}
    return {"metadata": {"total_size": 0}, "weight_map": weight_map}


def split_two() -> dict[str, TensorSpec]:
    names = list(TENSORS)
    return {
        "model-00001-of-00002.safetensors": {n: TENSORS[n] for n in names[:6]},
        "model-00002-of-00002.safetensors": {n: TENSORS[n] for n in names[6:]},
    }


# -- the malformed corpus ---------------------------------------------------------------------------------------------


def valid(root: Path) -> Path:
    return write_repo(root, split_two(), index=True)


def truncated(root: Path) -> Path:
    write_repo(root)
    f = root / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2 + 40])
    return root


def header_past_eof(root: Path) -> Path:
    write_repo(root, {})
    write_raw(root / "model.safetensors", b'{"__metadata__":{}}', 0, claimed_len=4096)
    return root


def huge_header_claim(root: Path) -> Path:
    write_repo(root, {})
    write_raw(root / "model.safetensors", b"{}", 0, claimed_len=100 * 1024 * 1024 + 1)
    return root


def overlapping_offsets(root: Path) -> Path:
    header = header_dict(TENSORS)
    first, second = "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight"
    # Move the second tensor into the first one's bytes and close the gap at the end.
    b = header[second]["data_offsets"]  # type: ignore[index]
    header[second]["data_offsets"] = [0, b[1] - b[0]]  # type: ignore[index]
    write_repo(root, {})
    write_safetensors(root / "model.safetensors", header, data_len(header))
    assert first in header
    return root


def offsets_past_eof(root: Path) -> Path:
    header = header_dict(TENSORS)
    end = data_len(header)
    last = header["lm_head.weight"]["data_offsets"]  # type: ignore[index]
    n = last[1] - last[0]
    header["lm_head.weight"]["data_offsets"] = [end + 4096, end + 4096 + n]  # type: ignore[index]
    write_repo(root, {})
    write_safetensors(root / "model.safetensors", header, end)
    return root


def unknown_dtype(root: Path) -> Path:
    header = header_dict(TENSORS)
    header["model.norm.weight"]["dtype"] = "F12"  # type: ignore[index]
    write_repo(root, {})
    write_safetensors(root / "model.safetensors", header, data_len(header_dict(TENSORS)))
    return root


def non_json_header(root: Path) -> Path:
    write_repo(root, {})
    write_raw(root / "model.safetensors", b"{'this is': not json}    ", 64)
    return root


def size_mismatch(root: Path) -> Path:
    header = header_dict(TENSORS)
    header["model.norm.weight"]["shape"] = [9]  # type: ignore[index]
    write_repo(root, {})
    write_safetensors(root / "model.safetensors", header)
    return root


def path_traversal(root: Path) -> Path:
    shards = split_two()
    write_repo(root, shards)
    index = make_index(shards)
    index["weight_map"]["lm_head.weight"] = "../outside.safetensors"  # type: ignore[index]
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


def absolute_path(root: Path) -> Path:
    shards = split_two()
    write_repo(root, shards)
    index = make_index(shards)
    index["weight_map"]["lm_head.weight"] = "/etc/passwd.safetensors"  # type: ignore[index]
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


PICKLE_MARKER = "ONBOARD_PICKLE_EXECUTED"


def pickle_only(root: Path) -> Path:
    """A pytorch_model.bin whose unpickling would create a marker file: proves we never unpickle."""
    write_repo(root, {})
    marker = root.parent / (root.name + "." + PICKLE_MARKER)
    # Protocol-0 pickle of os.system-free code: builtins.open(marker, 'w') runs on load.
    payload = f"c__builtin__\nopen\n(V{marker}\nVw\ntR.".encode()
    (root / "pytorch_model.bin").write_bytes(payload)
    return root


REMOTE_MARKER = "ONBOARD_REMOTE_CODE_EXECUTED"


def remote_code(root: Path) -> Path:
    """auto_map + a modeling file that creates a marker file if anyone imports it; model_type unknown to transformers."""
    write_repo(root)
    config = dict(CONFIG, model_type="onboard_custom_lm", architectures=["CustomLM"])
    config["auto_map"] = {"AutoConfig": "configuration_custom.CustomConfig",
                          "AutoModelForCausalLM": "modeling_custom.CustomLM"}  # fmt: skip
    (root / "config.json").write_text(json.dumps(config))
    marker = root.parent / (root.name + "." + REMOTE_MARKER)
    (root / "modeling_custom.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n\n\n"
        "class CustomLM:\n    pass\n\n\nclass CustomAttention:\n    pass\n"
    )
    (root / "configuration_custom.py").write_text(
        f"import os\nos.makedirs({str(marker) + '.dir'!r}, exist_ok=True)\n\n\nclass CustomConfig:\n    model_type = 'x'\n"
    )
    return root


def missing_shard(root: Path) -> Path:
    shards = split_two()
    write_repo(root, shards, index=True)
    (root / "model-00002-of-00002.safetensors").unlink()
    return root


def duplicate_tensor(root: Path) -> Path:
    shards = split_two()
    shards["model-00002-of-00002.safetensors"]["model.embed_tokens.weight"] = TENSORS["model.embed_tokens.weight"]
    write_repo(root, shards, index=True)
    return root


def symlink_outside(root: Path) -> Path:
    write_repo(root)
    secret = root.parent / (root.name + "-secret.json")
    secret.write_text("{}")
    (root / "tokenizer_config.json").symlink_to(secret)
    return root


# name -> (builder, finding code the checkpoint must produce)
CORPUS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated": (truncated, "truncated"),
    "header_past_eof": (header_past_eof, "header-past-eof"),
    "huge_header_claim": (huge_header_claim, "header-length-invalid"),
    "overlapping_offsets": (overlapping_offsets, "offsets-overlap"),
    "offsets_past_eof": (offsets_past_eof, "offsets-past-eof"),
    "unknown_dtype": (unknown_dtype, "unknown-dtype"),
    "non_json_header": (non_json_header, "header-not-json"),
    "size_mismatch": (size_mismatch, "size-mismatch"),
    "path_traversal": (path_traversal, "path-traversal"),
    "absolute_path": (absolute_path, "path-traversal"),
    "pickle_only": (pickle_only, "pickle-only"),
    "missing_shard": (missing_shard, "missing-shard"),
    "duplicate_tensor": (duplicate_tensor, "duplicate-tensor"),
    "symlink_outside": (symlink_outside, "symlink-outside"),
}

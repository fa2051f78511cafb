"""A synthetic trillion-parameter sharded checkpoint for the benchmarks: real headers, sparse (empty) data.

The layout follows Kimi-K2 / DeepSeek-V3 (model_type `deepseek_v3`: MLA attention, 384 routed experts + 1 shared,
first layer dense, fp8 weights with per-block `weight_scale_inv`): ~1.03T parameters and ~140k tensors over 128
shards. The data region of every shard is a hole made with `truncate`, so 1 TB of "weights" costs no disk space.
`quick=True` builds a 4-layer, 16-expert version for smoke tests.
"""

from __future__ import annotations

import json
import shutil
import struct
from math import ceil, prod
from pathlib import Path

from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES

VERSION = "5"  # bump when the layout changes: cached builds are rebuilt

CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 64, "num_key_value_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 1, "topk_group": 1,
    "routed_scaling_factor": 2.827, "norm_topk_prob": True, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 163840, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 50000.0,
    "rope_scaling": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "beta_fast": 1.0,
                     "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "bfloat16",
    "bos_token_id": 163584, "eos_token_id": 163585, "num_nextn_predict_layers": 0,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}  # fmt: skip

QUICK = {"num_hidden_layers": 4, "n_routed_experts": 16, "vocab_size": 4096, "bos_token_id": 0, "eos_token_id": 1}


def config(quick: bool, experts: int | None = None) -> dict:
    cfg = {**CONFIG, **(QUICK if quick else {})}
    if experts:  # 256: DeepSeek-V3's expert count (~91k tensors, 671B-scale)
        cfg["n_routed_experts"] = experts
    return cfg


def tensors(cfg: dict) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every tensor, in checkpoint order."""
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    heads, nope, rope, vdim = (
        cfg["num_attention_heads"],
        cfg["qk_nope_head_dim"],
        cfg["qk_rope_head_dim"],
        cfg["v_head_dim"],
    )
    qr, kvr = cfg["q_lora_rank"], cfg["kv_lora_rank"]
    out: list[tuple[str, str, list[int]]] = [("model.embed_tokens.weight", "BF16", [v, h])]

    def fp8(name: str, rows: int, cols: int) -> None:
        out.append((name + ".weight", "F8_E4M3", [rows, cols]))
        out.append((name + ".weight_scale_inv", "F32", [ceil(rows / 128), ceil(cols / 128)]))

    def mlp(prefix: str, inter: int) -> None:
        fp8(prefix + ".gate_proj", inter, h)
        fp8(prefix + ".up_proj", inter, h)
        fp8(prefix + ".down_proj", h, inter)

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out.append((p + ".input_layernorm.weight", "BF16", [h]))
        fp8(p + ".self_attn.q_a_proj", qr, h)
        out.append((p + ".self_attn.q_a_layernorm.weight", "BF16", [qr]))
        fp8(p + ".self_attn.q_b_proj", heads * (nope + rope), qr)
        fp8(p + ".self_attn.kv_a_proj_with_mqa", kvr + rope, h)
        out.append((p + ".self_attn.kv_a_layernorm.weight", "BF16", [kvr]))
        fp8(p + ".self_attn.kv_b_proj", heads * (nope + vdim), kvr)
        fp8(p + ".self_attn.o_proj", h, heads * vdim)
        out.append((p + ".post_attention_layernorm.weight", "BF16", [h]))
        if i < cfg["first_k_dense_replace"]:
            mlp(p + ".mlp", cfg["intermediate_size"])
            continue
        out.append((p + ".mlp.gate.weight", "BF16", [cfg["n_routed_experts"], h]))
        out.append((p + ".mlp.gate.e_score_correction_bias", "F32", [cfg["n_routed_experts"]]))
        for e in range(cfg["n_routed_experts"]):
            mlp(f"{p}.mlp.experts.{e}", cfg["moe_intermediate_size"])
        mlp(p + ".mlp.shared_experts", cfg["moe_intermediate_size"] * cfg["n_shared_experts"])
    out.append(("model.norm.weight", "BF16", [h]))
    out.append(("lm_head.weight", "BF16", [v, h]))
    return out


def build(root: Path, quick: bool = False, shards: int | None = None, experts: int | None = None) -> Path:
    """Write config.json, the index and the sparse shards under root (reused when already built)."""
    n_shards = shards or (8 if quick else 128)
    stamp = root / ".built"
    key = f"{VERSION}:{quick}:{n_shards}:{experts}"
    if stamp.is_file() and stamp.read_text() == key:
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cfg = config(quick, experts)
    (root / "config.json").write_text(json.dumps(cfg, indent=2))
    all_tensors = tensors(cfg)
    per = ceil(len(all_tensors) / n_shards)
    weight_map: dict[str, str] = {}
    total = 0
    for k in range(n_shards):
        name = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        header: dict[str, object] = {"__metadata__": {"format": "pt"}}
        pos = 0
        # Laid out as safetensors writes a shard: the widest dtype first, by name within a dtype (so a shard mixing
        # fp8 weights and fp32 scales lists its names in another order than the index, which sorts them by name).
        in_shard = sorted(all_tensors[k * per : (k + 1) * per], key=lambda t: (-DTYPE_BYTES[t[1]], t[1], t[0]))
        for t, dtype, shape in in_shard:
            nbytes = int(prod(shape) * DTYPE_BYTES[dtype])
            header[t] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + nbytes]}
            weight_map[t] = name
            pos += nbytes
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        with open(root / name, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            f.truncate(8 + len(raw) + pos)  # the data: a sparse hole
        total += pos
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    text = json.dumps(index, indent=2, sort_keys=True)  # as save_pretrained writes it: tensor names sorted
    (root / "model.safetensors.index.json").write_text(text)
    stamp.write_text(key)
    return root


def shard_paths(root: Path) -> list[Path]:
    return sorted(root.glob("*.safetensors"))

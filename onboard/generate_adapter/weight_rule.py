"""`WeightRule`: one entry of an adapter's weight map. Plain data, no torch: composition builds rules without
importing the loader that applies them (loader.py)."""

from __future__ import annotations

from dataclasses import dataclass

# How the sources of one rule become the runtime tensor (loader._combine applies them).
OPS = {
    "copy": "one source, as stored",
    "cat": "the sources' rows concatenated (fused qkv, gate_up)",
    "stack": "per expert `{e}`, the sources' rows concatenated, the experts stacked along a new dim 0",
    "transpose": "one source, its last two dims swapped (GPT-2 Conv1D weights, experts stored [E, in, out])",
    "deinterleave_heads": "rows grouped per KV head, [q heads of the group; k; v] (GPT-NeoX, Falcon, Bloom), "
    "reordered to [all q; all k; all v] by the owning attention's head counts",
    "squeeze": "one source, its leading size-1 dims dropped (ERNIE MoE's correction bias [1, E])",
    "zeros_if_absent": "a bias only some layers store: copied where stored, zeros (no bias) elsewhere",
    "grouped_rows": "the target part's rows of a source grouped per head (Qwen3-Next's in_proj_qkvz / in_proj_ba), "
    "as the owning module's grouped_rows(part) lists them",
    "codegen_qkv": "CodeGen's fused qkv, 4 row blocks of [q; v; k], reordered to [all q; all k; all v]",
    "cat_present": "cat of the sources stored and not dropped, the first required (Gemma 4's layers without v or k)",
    "fused_rows": "the target part's rows of a source holding the parts in turn (Lara-mini's in_proj [q|k|v|z|b|a]), "
    "as the owning module's fused_rows(part) lists them",
    "expert_rows": "2-D sources of every expert's rows in turn ([E x I, H], DBRX's w1 / v1), joined per expert",
    "expert_rows_transposed": "one such source of each expert's [I, H] down projection (DBRX's w2): [E, H, I]",
}


@dataclass(frozen=True)
class WeightRule:
    """`target` (runtime name) <- `sources` (checkpoint names, `{i}` the layer, `{e}` the expert) combined by `op`."""

    target: str
    sources: tuple[str, ...]
    op: str = "copy"

"""`WeightRule`: one entry of an adapter's weight map (data, no torch: the planner and the composer build them
without importing the loader that applies them, loader.py)."""

from __future__ import annotations

from dataclasses import dataclass

# How the source tensors of one rule become the runtime tensor.
OPS = ("copy", "cat", "stack", "transpose", "deinterleave_heads", "squeeze", "zeros_if_absent", "grouped_rows",
       "codegen_qkv", "cat_present", "fused_rows", "expert_rows", "expert_rows_transposed")  # fmt: skip


@dataclass(frozen=True)
class WeightRule:
    """`target` (runtime name) <- `sources` (checkpoint names) combined by `op`:
    copy (one source), cat (row-wise concatenation: fused qkv / gate_up), stack (one tensor per expert `{e}`,
    each the row-wise concatenation of the sources; stacked along a new dim 0), transpose (one source, last two dims
    swapped: GPT-2 Conv1D weights, experts stored [E, in, out]), deinterleave_heads (one fused qkv source whose rows
    are grouped per KV head, [q heads of the group; k; v] as GPT-NeoX / Falcon / Bloom store `query_key_value`,
    reordered to [all q; all k; all v]; the head counts come from the attention module owning the target), squeeze
    (one source, its leading size-1 dims dropped: ERNIE MoE stores the correction bias [1, E] for the block's [E]),
    zeros_if_absent (a bias some layers store and others do not: copied where stored, zeros elsewhere, which is no
    bias at all), grouped_rows (one source whose rows hold several parts grouped per head, as Qwen3-Next's
    in_proj_qkvz / in_proj_ba: the rows of the target's part, as the owning module's `grouped_rows(part)` lists them),
    codegen_qkv (one fused qkv source in CodeGen's layout: 4 row blocks (its mp_num), each [q; v; k] for a quarter of
    the heads, reordered to [all q; all k; all v]), cat_present (cat of the sources the checkpoint stores and does not
    drop, the first one required: layers whose attention has no value rows or no key and value rows at all, as Gemma
    4's; the
    runtime tensor's shape, set by the layer's own attention, still has to match what is stored), fused_rows (one
    source holding several parts in turn, as Lara-mini's in_proj [q | k | v | z | b | a]: the rows of the target's
    part, as the owning module's `fused_rows(part)` lists them), expert_rows (2-D sources holding every expert's rows
    in turn, [E x I, H] as DBRX stores w1 / v1: each split into the target's E experts and concatenated per expert,
    [E, I + I, H]), expert_rows_transposed (one such source holding each expert's [I, H] down projection transposed,
    DBRX's w2: [E, H, I])."""

    target: str
    sources: tuple[str, ...]
    op: str = "copy"

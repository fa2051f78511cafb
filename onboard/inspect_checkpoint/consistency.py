"""Header shapes and dtypes against config.json (head_dim ≠ hidden/heads, padded vocab, wrong dtype): each check
names the tensor and the config field, since on day zero the config is as likely wrong as the loader.
"""

from __future__ import annotations

from collections import Counter

from onboard.findings import Finding, error, warning
from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.tensor_index import TensorIndex
from onboard.profile import Dims

_FLOAT_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
_TORCH_DTYPE_NAMES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
                      "bfloat16": "bfloat16", "float64": "float64"}  # fmt: skip


def _projected_embedding_width(index: TensorIndex, dims: Dims) -> int | None:
    """The token embeddings' width where a `project_in` [hidden_size, width] widens them (OPT-350m); else None."""
    for g in index.groups:
        short = tn.strip_lm_prefix(g.template)
        if short.endswith("project_in.weight") and "{}" not in short and len(g.first_shape) == 2:
            rows, width = g.first_shape
            return width if rows == dims.hidden_size else None
    return None


def check_shapes(index: TensorIndex, dims: Dims, mla: bool) -> list[Finding]:
    """The first tensor of each group (layer 0 for per-layer groups) against the config."""
    findings: list[Finding] = []
    gated_query = _gated_query(index, dims)
    projected = _projected_embedding_width(index, dims)
    for g in index.groups:
        if tn.tower_of(g.template):
            continue
        name = g.first_name
        t = TensorInfo(name, g.dtype, g.first_shape, (0, 0), g.first_file)
        short = tn.strip_lm_prefix(name)
        if short.endswith(("embed_tokens.weight", "wte.weight", "word_embeddings.weight")) and len(t.shape) == 2:
            if dims.hidden_size and t.shape[1] not in (dims.hidden_size, projected):
                findings.append(
                    error(
                        "shape-mismatch",
                        f"{name} has {t.shape[1]} columns but hidden_size is {dims.hidden_size}",
                        "check hidden_size in config.json",
                        file=t.file,
                        tensor=name,
                    )
                )
        if mla or tn.layer_index(short) != 0 or len(t.shape) != 2:
            continue
        expected = None
        if short.endswith("self_attn.q_proj.weight"):
            expected = dims.num_attention_heads * dims.head_dim * (2 if gated_query else 1)
            field = "num_attention_heads × head_dim" + (" × 2 (query and output gate)" if gated_query else "")
        elif short.endswith("self_attn.k_proj.weight"):
            expected = dims.num_kv_heads * dims.head_dim
            field = "num_key_value_heads × head_dim"
        elif short.endswith("self_attn.v_proj.weight"):
            expected = dims.num_kv_heads * (dims.v_head_dim or dims.head_dim)
            field = "num_key_value_heads × " + ("v_head_dim" if dims.v_head_dim else "head_dim")
        if expected is not None and t.shape[0] != expected:
            findings.append(
                error(
                    "shape-mismatch",
                    f"{name} has {t.shape[0]} output rows but config gives {field} = {expected}",
                    "check head_dim / num_key_value_heads in config.json "
                    "(head_dim need not be hidden_size / num_attention_heads)",
                    file=t.file,
                    tensor=name,
                )
            )
    return findings


# A depthwise convolution over one projection's output (Gated DeltaNet's q / k / v convs) has a channel per row.
_CONV_OF_PROJ = (("q_conv1d", "q_proj"), ("k_conv1d", "k_proj"), ("v_conv1d", "v_proj"))


def check_conv_channels(index: TensorIndex) -> list[Finding]:
    """Each `X_conv1d` against its `X_proj` (transformers 5.25 saves OLMo-hybrid's fused conv1d cut in equal thirds)."""
    by_template = {g.template: g for g in index.groups}
    findings: list[Finding] = []
    for template, conv in by_template.items():
        for conv_name, proj_name in _CONV_OF_PROJ:
            if not template.endswith(f".{conv_name}.weight"):
                continue
            proj = by_template.get(template[: -len(f"{conv_name}.weight")] + f"{proj_name}.weight")
            if proj is None or not conv.first_shape or not proj.first_shape:
                continue
            if conv.first_shape[0] != proj.first_shape[0]:
                findings.append(
                    error(
                        "shape-mismatch",
                        f"{conv.first_name} has {conv.first_shape[0]} channels but {proj.first_name} has "
                        f"{proj.first_shape[0]} rows: the convolution runs over that projection's output, one channel "
                        "per row",
                        "the q / k / v convolutions were split at the wrong channels (transformers 5's save of "
                        "OLMo-hybrid cuts the fused conv1d into equal thirds): concatenate them and split at the q, k "
                        "and v projections' row counts, or re-export from the original weights",
                        file=conv.first_file,
                        tensor=conv.first_name,
                    )
                )
    return findings


def _gated_query(index: TensorIndex, dims: Dims) -> bool:
    """Layer 0's q_proj holds the query and a per-channel output gate (Qwen3-Next): twice o_proj's input width."""
    heads = dims.num_attention_heads * dims.head_dim
    shapes = {}
    for g in index.groups:
        short = tn.strip_lm_prefix(g.first_name)
        if tn.layer_index(short) == 0 and len(g.first_shape) == 2:
            for leaf in ("self_attn.q_proj.weight", "self_attn.o_proj.weight"):
                if short.endswith(leaf):
                    shapes[leaf] = g.first_shape
    q, o = shapes.get("self_attn.q_proj.weight"), shapes.get("self_attn.o_proj.weight")
    return bool(heads) and q is not None and o is not None and q[0] == 2 * heads and o[1] == heads


def check_vocab(index: TensorIndex, config_vocab: int | None, rows: int) -> list[Finding]:
    """config.json's vocab_size against the token embedding's rows (`rows`, from the stored embedding)."""
    embed = next(
        (
            g
            for g in index.groups
            if tn.component_of_template(g.template) == "embedding"
            and len(g.first_shape) == 2
            and not tn.tower_of(g.template)
            and not g.template.endswith(tn.LEARNED_POSITIONS)
        ),
        None,
    )
    if embed is None or not config_vocab or not rows or config_vocab == rows:
        return []
    return [
        error(
            "vocab-mismatch",
            f"config.json vocab_size is {config_vocab} but the embedding has {rows} rows",
            "fix vocab_size in config.json; ids ≥ the row count would index past the table",
            file=embed.first_file,
            tensor=embed.first_name,
        )
    ]


def check_dtype(index: TensorIndex, config_dtype: str | None) -> list[Finding]:
    counts: Counter[str] = Counter()
    for g in index.groups:
        if g.dtype in _FLOAT_DTYPES:
            counts[_FLOAT_DTYPES[g.dtype]] += g.numel
    if not counts or not config_dtype:
        return []
    stored = counts.most_common(1)[0][0]
    declared = _TORCH_DTYPE_NAMES.get(config_dtype.replace("torch.", ""), config_dtype)
    if stored != declared:
        return [
            warning(
                "dtype-mismatch",
                f"config.json declares dtype {config_dtype} but most weights are stored as {stored}",
                "serve in the stored dtype or fix torch_dtype/dtype in config.json",
                file="config.json",
            )
        ]
    return []

"""Known families and the novelty report: the closest known family and what differs from it, in plain words.

The catalog (`onboard/data/families.json`, built by `scripts/build_family_catalog.py` from transformers' causal-LM
config classes) is checked-in data, so inspect needs no transformers import.
"""

from __future__ import annotations

import json
from functools import cache

import msgspec

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.profile import LayerInfo
from onboard.resources import package_data

# Features that follow from sizes rather than design; they do not make a model novel.
_NEUTRAL = {"gqa", "mqa", "tied_embeddings", "dense_first_layers", "interleaved_attention"}


class Family(msgspec.Struct, frozen=True):
    model_type: str
    architectures: tuple[str, ...]
    features: frozenset[str]
    tensor_templates: frozenset[str]
    config_keys: frozenset[str]


@cache
def catalog() -> dict[str, Family]:
    raw = _raw_catalog()
    return {
        mt: Family(
            mt,
            tuple(f["architectures"]),
            frozenset(f["features"]),
            frozenset(f["tensor_templates"]),
            # Legacy spellings the config class still maps are its keys too: not novel.
            frozenset(f["config_keys"]) | frozenset(f.get("mapped_keys", ())),
        )
        for mt, f in raw["families"].items()
    }


@cache
def _raw_catalog() -> dict:
    path = package_data("families.json")
    return json.loads(path.read_text()) if path.is_file() else {"families": {}}


def family_buffers(model_type: str) -> tuple[str, ...] | None:
    """What the family stores as buffers, not parameters: leaf names, plus full templates for buffers checkpoints
    name differently (Inkling-2's `e_score_correction_bias` saved as `mlp.gate.bias`). None for an unknown family."""
    family = _raw_catalog()["families"].get(model_type)
    if family is None:
        return None
    return tuple(family.get("buffers", ())) + tuple(family.get("buffer_templates", ()))


def known_model_types() -> set[str]:
    return set(catalog())


def _jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _strip_layer_prefix(templates: set[str] | frozenset[str]) -> set[str]:
    """The language model's templates without prefixes or towers, and experts as one group (stored per expert or
    stacked, by writer version)."""
    out = set()
    for t in templates:
        if tn.tower_of(t) is not None:
            continue
        t = tn.strip_lm_prefix(t)
        if ".experts." in t or t.endswith(".experts"):
            t = t[: t.index(".experts")] + ".experts.*"
        for prefix in ("model.", "transformer.", "gpt_neox.", "backbone."):  # wrapper prefixes: strip_lm_prefix
            if t.startswith(prefix):
                t = t[len(prefix) :]
                break
        out.add(t)
    return out


def closest_family(
    model_type: str, features: set[str], templates: set[str], config_keys: set[str]
) -> tuple[Family | None, float]:
    fams = catalog()
    if model_type in fams:
        return fams[model_type], 1.0
    mine = _strip_layer_prefix(templates)
    best: tuple[Family | None, float] = (None, 0.0)
    for fam in fams.values():
        score = 0.2 * _jaccard(features - _NEUTRAL, set(fam.features) - _NEUTRAL)
        score += 0.3 * _jaccard(config_keys, fam.config_keys)
        score += 0.5 * (_jaccard(mine, _strip_layer_prefix(fam.tensor_templates)) if mine else 0.0)
        if score > best[1]:
            best = (fam, score)
    return best


def describe_layers(layers: tuple[LayerInfo, ...]) -> list[str]:
    """'sliding window on 3 of 4 layers' style phrases for mixed layer plans."""
    n = len(layers)
    counts: dict[str, int] = {}
    for layer in layers:
        counts[layer.attention] = counts.get(layer.attention, 0) + 1
    if len(counts) <= 1:
        return []
    names = {
        "sliding": "sliding window",
        "full": "full attention",
        "linear": "linear attention",
        "ssm": "SSM",
        "mla": "MLA",
        "chunked": "chunked attention",
        "conv": "short conv",
        "none": "no mixer",
    }
    return [f"{names.get(k, k)} on {c} of {n} layers" for k, c in sorted(counts.items(), key=lambda kv: -kv[1])]


def novelty(
    model_type: str,
    features: tuple[str, ...],
    layers: tuple[LayerInfo, ...],
    templates: set[str],
    config_keys: set[str],
) -> tuple[str | None, tuple[str, ...]]:
    """(closest family, differences in plain words). The first line sums it up, e.g. 'qwen3 + attention_sinks'."""
    feats = set(features)
    fam, score = closest_family(model_type, feats, templates, config_keys)
    if fam is None:
        return None, ("no known family to compare with (family catalog missing)",)
    added = sorted(f for f in feats - fam.features - _NEUTRAL if not f.startswith("quantized:"))
    removed = sorted(f for f in fam.features - feats - _NEUTRAL if not f.startswith("rope:"))
    layer_words = describe_layers(layers)
    summary = fam.model_type + "".join(f" + {f}" for f in added) + "".join(f" − {f}" for f in removed)
    if layer_words and ("sliding_window" in added or "interleaved_attention" in feats):
        summary += f" ({'; '.join(layer_words)})"
    lines = [summary]
    if model_type != fam.model_type:
        lines.append(
            f"model_type {model_type!r} is not a known family; closest is {fam.model_type!r} (similarity {score:.2f})"
        )
    new_tensors = sorted(_strip_layer_prefix(templates) - _strip_layer_prefix(fam.tensor_templates))
    if new_tensors and templates:
        shown = ", ".join(new_tensors[:8]) + (" …" if len(new_tensors) > 8 else "")
        lines.append(f"tensors not in {fam.model_type}: {shown}")
    towers = sorted({tower for t in templates if (tower := tn.tower_of(t)) is not None})
    if towers:
        lines.append(
            f"{' and '.join(towers)} tower(s) beside the language model (not compared: adapters serve the "
            "language model)"
        )
    new_keys = sorted(config_keys - fam.config_keys)
    if new_keys:
        lines.append(
            f"config keys not in {fam.model_type}: {', '.join(new_keys[:12])}" + (" …" if len(new_keys) > 12 else "")
        )
    return fam.model_type, tuple(lines)

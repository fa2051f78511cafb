"""Legacy repository code: tiny checkpoints whose modeling code is a real file from a public release.

transformers 4.30.2's files (Apache-2.0, fetched from PyPI by scripts/install_legacy_modeling.sh, the
`legacy-modeling` piece of tests/ci.py; never committed) re-shipped under a new model_type with an auto_map:

- `legacy_llama`: its Llama files, the way InternLM's first releases shipped code derived from them. The rotary
  embedding stores `inv_freq` in the checkpoint and computes `cos_cached`/`sin_cached` buffers in `__init__`.
- `legacy_gpt_neox`: its GPT-NeoX files, the shape of early GPT-NeoX-derived releases (Pythia, StableLM-alpha):
  fused `query_key_value` grouped per head, parallel residual, LayerNorm with bias, rotary on `rotary_pct` of each
  head with base `rotary_emb_base`. Its rotary embedding stores `inv_freq` and keeps `cos_cached`/`sin_cached` as
  plain attributes computed in `__init__`; its attention stores a causal mask `bias` and `masked_bias`.

Under today's transformers, from_pretrained inits on the meta device and leaves what `__init__` computed
uninitialised (or on meta), so the repository's own code is a broken reference until repaired.

Weights: today's native model's tensors at the dayzero fixtures' trained-like magnitudes (wide init, random norm
weights) under 4.30.2's names, plus the persistent buffers 4.30.2's code saves (`rotary_emb.inv_freq`, and
GPT-NeoX's `attention.bias` / `attention.masked_bias`), as checkpoints saved by that release hold them. Every built
folder gets a PROVENANCE.md.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.ci import legacy_modeling_dir, need
from tests.dayzero.builder import FAMILIES, QWEN3_TOKENIZER, Family, native_config, native_state_dict

SOURCE = "transformers 4.30.2 (wheel transformers-4.30.2-py3-none-any.whl from PyPI)"
PROVENANCE = """# Provenance

- Source: {source}.
- Files: `transformers/models/{family}/configuration_{family}.py` -> `configuration_{mt}.py`,
  `transformers/models/{family}/modeling_{family}.py` -> `modeling_{mt}.py`.
- Licence: Apache-2.0 (the transformers project, Copyright The HuggingFace Inc. team and EleutherAI).
- Changes: the relative imports of transformers' internals made absolute (`from ...x import` ->
  `from transformers.x import`), `.configuration_{family}` -> `.configuration_{mt}`, and the config class's
  `model_type = "{family}"` -> `model_type = "{mt}"`. Nothing else.
- Weights: random (tests/dayzero/legacy.py), trained-like magnitudes; {stored}.
"""
COMMON_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "hidden_act", "max_position_embeddings", "initializer_range", "tie_word_embeddings", "bos_token_id",
               "eos_token_id", "pad_token_id")  # fmt: skip


def inv_freq(dim: int, base: float = 10000.0) -> Any:
    """The rotary frequencies 4.30.2's rotary embeddings (Llama's, GPT-NeoX's) compute and register (persistent)."""
    import torch

    return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))


def _llama_buffers(config: Any) -> dict[str, Any]:
    return {
        f"model.layers.{i}.self_attn.rotary_emb.inv_freq": inv_freq(config.head_dim)
        for i in range(config.num_hidden_layers)
    }


def _gpt_neox_buffers(config: Any) -> dict[str, Any]:
    """GPTNeoXAttention's persistent buffers: the causal mask, masked_bias and the rotary frequencies over
    int(head_size * rotary_pct) dims (norm_factor is non-persistent)."""
    import torch

    positions = config.max_position_embeddings
    head = config.hidden_size // config.num_attention_heads
    rotary = int(head * GPT_NEOX_ROTARY["rotary_pct"])
    state = {}
    for i in range(config.num_hidden_layers):
        prefix = f"gpt_neox.layers.{i}.attention."
        state[prefix + "bias"] = torch.tril(torch.ones((positions, positions), dtype=torch.bool)).view(
            1, 1, positions, positions
        )
        state[prefix + "masked_bias"] = torch.tensor(-1e9)
        state[prefix + "rotary_emb.inv_freq"] = inv_freq(rotary, GPT_NEOX_ROTARY["rotary_emb_base"])
    return state


@dataclass(frozen=True)
class Legacy:
    """A 4.30.2 family re-shipped as repository code: where its files are, and how its checkpoint differs from
    today's native model's."""

    family: str
    """4.30.2's folder and file stem (`gpt_neox`)."""
    native: Family
    """Today's family whose native model gives the tensors."""
    shape: dict[str, Any]
    classes: tuple[str, str]
    """The config class and the causal LM class (auto_map)."""
    keys: tuple[str, ...]
    """The native config's keys config.json takes, besides COMMON_KEYS."""
    buffers: Callable[[Any], dict[str, Any]]
    """The persistent buffers 4.30.2's code saves, by the native config."""
    stored: str
    """What PROVENANCE says the weights store besides the native tensors."""
    extra: dict[str, Any] = field(default_factory=dict)
    """config.json keys spelled as 4.30.2 reads them (today's config class keeps them elsewhere)."""
    renames: dict[str, str] = field(default_factory=dict)
    """Today's tensor name -> 4.30.2's."""

    @property
    def model_type(self) -> str:
        return "legacy_" + self.family

    def rewrite(self, text: str) -> str:
        """A 4.30.2 file as repository code under model_type (the only edits PROVENANCE lists)."""
        own, mt = self.family, self.model_type
        text = re.sub(rf"from \.configuration_{own} import", f"from .configuration_{mt} import", text)
        text = re.sub(r"from \.\.\.(\w)", r"from transformers.\1", text)
        text = text.replace(f'model_type = "{own}"', f'model_type = "{mt}"')
        if re.search(r"^\s*from \.\.", text, re.M):
            raise ValueError("an import from transformers' package is left relative after the rewrite")
        return text


# 4.30's Llama has no GQA and head_dim = hidden_size / heads: 2 heads of 32 in the dayzero hidden size of 64.
LLAMA = Legacy(
    "llama",
    FAMILIES["llama"],
    dict(num_attention_heads=2, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False),
    ("LlamaConfig", "LlamaForCausalLM"),
    ("rms_norm_eps",),
    _llama_buffers,
    "each layer stores `rotary_emb.inv_freq`",
)
# Rotary on half of each head (StableLM-alpha's rope_pct 0.25, Pythia's rotary_pct 0.25), at a base not the default.
GPT_NEOX_ROTARY = dict(rotary_pct=0.5, rotary_emb_base=20000)
GPT_NEOX = Legacy(
    "gpt_neox",
    Family("gpt_neox", "GPTNeoX", "parallel"),
    # head_size = hidden_size / heads in 4.30's GPT-NeoX: 2 heads of 32; no GQA (its query_key_value is 3 x hidden)
    dict(
        num_attention_heads=2,
        num_key_value_heads=None,
        head_dim=None,
        tie_word_embeddings=False,
        use_parallel_residual=True,
        **GPT_NEOX_ROTARY,
    ),  # fmt: skip
    ("GPTNeoXConfig", "GPTNeoXForCausalLM"),
    ("layer_norm_eps", "use_parallel_residual"),
    _gpt_neox_buffers,
    "each layer stores `attention.bias`, `attention.masked_bias` and `attention.rotary_emb.inv_freq` (the persistent "
    "buffers 4.30.2's GPTNeoXAttention saves); the output head is `embed_out`, 4.30.2's name",
    extra=GPT_NEOX_ROTARY,
    renames={"lm_head.weight": "embed_out.weight"},
)


def build_legacy(legacy: Legacy, out: Path, seed: int = 0) -> Path:
    """Write `legacy`'s checkpoint into `out` (needs the legacy-modeling piece); returns `out`."""
    from safetensors.torch import save_file

    need("legacy-modeling")
    src = legacy_modeling_dir() / "transformers" / "models" / legacy.family
    config = native_config(legacy.native, legacy.shape)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for kind in ("configuration", "modeling"):
        text = (src / f"{kind}_{legacy.family}.py").read_text(encoding="utf-8")
        (tmp / f"{kind}_{legacy.model_type}.py").write_text(legacy.rewrite(text), encoding="utf-8")
    state = {legacy.renames.get(k, k): v for k, v in native_state_dict(config, seed).items()}
    state.update(legacy.buffers(config))
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    doc = {k: getattr(config, k) for k in COMMON_KEYS + legacy.keys}
    conf, causal = legacy.classes
    doc.update(
        legacy.extra,
        model_type=legacy.model_type,
        architectures=[causal],
        torch_dtype="float32",
        auto_map={
            "AutoConfig": f"configuration_{legacy.model_type}.{conf}",
            "AutoModelForCausalLM": f"modeling_{legacy.model_type}.{causal}",
        },
    )
    (tmp / "config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    provenance = PROVENANCE.format(source=SOURCE, family=legacy.family, mt=legacy.model_type, stored=legacy.stored)
    (tmp / "PROVENANCE.md").write_text(provenance)
    for f in QWEN3_TOKENIZER.iterdir():
        if f.name != "PROVENANCE.md":
            shutil.copy2(f, tmp / f.name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def build_legacy_llama(out: Path, seed: int = 0) -> Path:
    """The legacy_llama checkpoint (4.30.2's Llama files) in `out`."""
    return build_legacy(LLAMA, out, seed)


def build_legacy_gpt_neox(out: Path, seed: int = 0) -> Path:
    """The legacy_gpt_neox checkpoint (4.30.2's GPT-NeoX files) in `out`."""
    return build_legacy(GPT_NEOX, out, seed)

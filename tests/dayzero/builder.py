"""Day-zero fixtures: real transformers architectures re-shipped as repository code under a new `model_type`.

How DeepSeek-V3, Kimi-K2 or MiniMax shipped: `config.json` names a `model_type` no transformers release knows and an
`auto_map` pointing at `configuration_*.py` / `modeling_*.py` in the repo. Here the installed transformers' own files
for a family are copied into the checkpoint folder with their relative imports made absolute (`from ...x` ->
`from transformers.x`), the classes renamed (`Llama*` -> `DayzeroLlama*`) and `model_type` set to `dayzero_<family>`,
so nothing but the repo's code can build the model.

Every copied file starts with a canary that appends the module name to a file (CANARY_ENV, else the path baked in
at build time) when the module is imported: a test that finds the canary file untouched proves nothing ran.

Weights: the native model's own state dict (in-memory names, so the copied code loads them without transformers'
per-model_type key conversions), wider init than transformers' default and random norm weights, so the logits
are as peaked as a trained model's and a wrong block shows (see tests/validate/tiny_models.py).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.validate.tiny_models import COMMON as TINY_COMMON
from tests.validate.tiny_models import QWEN3_TOKENIZER, QWEN3_VOCAB

TOKEN_IDS = dict(bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
CANARY_ENV = "ONBOARD_DAYZERO_CANARY"
PREFIX = "dayzero_"

# The validate tests' tiny sizes (head_dim 32: the smallest vLLM's CPU build serves; initializer_range 0.25: peaked
# next-token distributions), with GQA, a tied head and the real Qwen3 vocabulary so the real tokenizer fits.
COMMON: dict[str, Any] = {
    **TINY_COMMON,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
    "vocab_size": QWEN3_VOCAB,
    **TOKEN_IDS,
}
WINDOW = 16


GEMMA2 = dict(
    sliding_window=WINDOW,
    layer_types=["sliding_attention", "full_attention"],
    query_pre_attn_scalar=32,
    final_logit_softcapping=3.0,  # 30.0 in Gemma-2: small, so a dropped cap shows on a tiny model
    attn_logit_softcapping=2.0,  # 50.0
    hidden_activation="gelu_pytorch_tanh",
)


@dataclass(frozen=True)
class Family:
    """A transformers family to re-ship: its model_type, its class-name prefix and the tiny config knobs."""

    model_type: str
    prefix: str
    """CamelCase prefix of the family's classes (`Qwen3Moe` for Qwen3MoeForCausalLM)."""
    kind: str
    """What the fixture stands for: dense, sliding, moe, qk_norm (the acceptance list), or what only its code says."""
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def new_model_type(self) -> str:
        return PREFIX + self.model_type

    @property
    def new_prefix(self) -> str:
        return "Dayzero" + self.prefix


FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        Family("llama", "Llama", "dense"),
        Family("mistral", "Mistral", "sliding", dict(sliding_window=WINDOW)),  # every layer sliding (Mistral-7B)
        # Experts stored fused 3-D; 48 keeps every expert matrix non-square, so its layout follows from the shape.
        Family("qwen3_moe", "Qwen3Moe", "moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48)),
        Family("olmo2", "Olmo2", "qk_norm", dict(head_dim=None)),  # QK-norm over all heads, post-norms
        Family("qwen3", "Qwen3", "qk_norm"),  # per-head QK-norm
        Family("gemma2", "Gemma2", "norm_offset", GEMMA2),
        Family("mixtral", "Mixtral", "moe", dict(num_local_experts=4, num_experts_per_tok=2)),
        # Interleaved rotary (rotate_every_two): nothing in config.json or the tensors says so, only the code.
        # Helium's o_proj reads hidden_size: heads x head_dim must equal it.
        Family("helium", "Helium", "interleaved", dict(num_attention_heads=2, num_key_value_heads=1)),
        Family("glm", "Glm", "interleaved", dict(partial_rotary_factor=0.5)),  # interleaved over half of each head
        # More families only code tells apart, for the re-shipped parity rate (test_reshipped_families.py). Where
        # the family's code derives head_dim from hidden_size / heads, the config must not state another.
        Family("glm4", "Glm4", "interleaved"),  # sandwich norms, interleaved rotary over half of each head
        Family("ernie4_5", "Ernie4_5", "interleaved"),
        Family("cohere", "Cohere", "parallel", dict(head_dim=None)),  # one norm, parallel blocks, interleaved rotary
        Family("stablelm", "StableLm", "partial_rotary", dict(head_dim=None)),  # LayerNorm, rotary on a quarter
        Family("olmoe", "Olmoe", "moe", dict(num_experts=4, num_experts_per_tok=2, head_dim=None)),  # no renorm
        Family("qwen2_moe", "Qwen2Moe", "moe", dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
                                                    shared_expert_intermediate_size=64)),  # gated shared expert
        Family("granitemoe", "GraniteMoe", "moe", dict(num_local_experts=4, num_experts_per_tok=2)),
        Family("granite", "Granite", "dense"),  # embedding, residual, attention and logit multipliers
        Family("starcoder2", "Starcoder2", "dense"),  # LayerNorm with bias, plain GELU MLP
        Family("phi3", "Phi3", "dense"),  # fused qkv and gate_up
        Family("smollm3", "SmolLM3", "dense"),  # rotary skipped on every fourth layer
        Family("exaone4", "Exaone4", "qk_norm"),  # post-norms, QK-norm, hybrid sliding window
    )
}
ACCEPTANCE = ("llama", "mistral", "qwen3_moe", "olmo2")
"""One fixture per acceptance kind: dense, sliding, MoE, QK-norm."""


def canary_lines(default_path: Path) -> str:
    """Python prepended to every copied file: record the import, never fail it (the sandbox may forbid writes)."""
    return (
        "import os as _dayzero_os  # onboard test canary: records that this repository code was imported\n"
        f"_dayzero_path = _dayzero_os.environ.get({CANARY_ENV!r}) or {str(default_path)!r}\n"
        "try:\n"
        "    with open(_dayzero_path, 'a', encoding='utf-8') as _dayzero_f:\n"
        "        _dayzero_f.write(__name__ + '\\n')\n"
        "except OSError:\n"
        "    pass\n"
    )


def rewrite_source(text: str, family: Family, canary: Path) -> str:
    """A transformers model file as repository code: absolute imports, renamed classes and model_type, canary."""
    own = family.model_type
    text = re.sub(rf"from \.(configuration|modeling)_{own} import", rf"from .\1_{family.new_model_type} import", text)
    text = re.sub(r"from \.\.\. import ", "from transformers import ", text)
    text = re.sub(r"from \.\.\.(\w)", r"from transformers.\1", text)
    text = re.sub(r"from \.\.(\w)", r"from transformers.models.\1", text)
    text = re.sub(rf"\b{family.prefix}(?=[A-Z]\w*)", family.new_prefix, text)
    text = re.sub(rf'model_type = "{own}"', f'model_type = "{family.new_model_type}"', text)
    if re.search(r"^\s*from \.\.", text, re.M):
        raise ValueError(f"{own}: an import from transformers' package is left relative after the rewrite")
    return canary_lines(canary) + text


def copy_code(family: Family, out: Path, canary: Path) -> list[str]:
    """Copy the family's configuration + modeling files into `out` as repository code; returns the file names."""
    import transformers

    src = Path(transformers.__file__).parent / "models" / family.model_type
    names = []
    for kind in ("configuration", "modeling"):
        text = (src / f"{kind}_{family.model_type}.py").read_text(encoding="utf-8")
        name = f"{kind}_{family.new_model_type}.py"
        (out / name).write_text(rewrite_source(text, family, canary), encoding="utf-8")
        names.append(name)
    return names


def native_config(family: Family, overrides: dict[str, Any] | None = None) -> Any:
    from transformers import AutoConfig

    kwargs = {**COMMON, **family.config, **(overrides or {})}
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return AutoConfig.for_model(family.model_type, **kwargs)


def native_state_dict(config: Any, seed: int) -> dict[str, Any]:
    """The native model's tensors under their in-memory names, with random norm weights (trained-like)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        for name, param in model.named_parameters():
            if "norm" in name:  # ones (or zeros for (1+w) norms) would hide a lost weight or offset
                param.data.uniform_(0.5, 1.5) if param.data.mean() > 0.5 else param.data.uniform_(-0.5, 0.5)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied: stored once, as the embedding
    return state


def build_dayzero(
    family_name: str,
    out: Path,
    *,
    canary: Path,
    seed: int = 0,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Write the day-zero checkpoint of `family_name` (a FAMILIES key) into `out`; returns `out`.

    Args:
        canary: the file the copied code appends to when imported (unless CANARY_ENV names another).
        overrides: config knobs over the family's tiny config.
    """
    from safetensors.torch import save_file

    family = FAMILIES[family_name]
    config = native_config(family, overrides)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(native_state_dict(config, seed), tmp / "model.safetensors", metadata={"format": "pt"})
    conf, modeling = (n[: -len(".py")] for n in copy_code(family, tmp, canary))
    doc = config.to_dict()
    doc.update(
        model_type=family.new_model_type,
        architectures=[f"{family.new_prefix}ForCausalLM"],
        auto_map={
            "AutoConfig": f"{conf}.{family.new_prefix}Config",
            "AutoModelForCausalLM": f"{modeling}.{family.new_prefix}ForCausalLM",
        },
    )
    (tmp / "config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    for f in QWEN3_TOKENIZER.iterdir():
        if f.name != "PROVENANCE.md":
            shutil.copy2(f, tmp / f.name)
    gen = {"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643, "do_sample": False}
    (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


LAYER_1_ATTENTION_X105 = (
    "attn_output = self.o_proj(attn_output)",
    "attn_output = self.o_proj(attn_output) * (1.05 if self.layer_idx == 1 else 1.0)",
)
"""seed_defect's (find, replace) for the acceptance's code-only defect: layer 1's attention output x1.05."""


def seed_defect(checkpoint: Path, find: str, replace: str) -> Path:
    """Edit the repo's modeling file in place (a modeling-code-only defect); `find` must occur exactly once."""
    (path,) = checkpoint.glob(f"modeling_{PREFIX}*.py")
    text = path.read_text(encoding="utf-8")
    if text.count(find) != 1:
        raise ValueError(f"{path.name}: {find!r} occurs {text.count(find)} times, expected once")
    path.write_text(text.replace(find, replace), encoding="utf-8")
    return checkpoint


def ship_tokenizer_as_code(checkpoint: Path, canary: Path) -> Path:
    """Make the checkpoint's tokenizer repository code too (how Kimi-K2 ships its tokenizer): a subclass of Qwen2's
    tokenizer under a class name transformers does not know, named by tokenizer_config.json's auto_map."""
    name = "tokenization_dayzero.py"
    source = "from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer\n\n\n" \
             "class DayzeroTokenizer(Qwen2Tokenizer):\n    pass\n"  # fmt: skip
    (checkpoint / name).write_text(canary_lines(canary) + source, encoding="utf-8")
    path = checkpoint / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(
        tokenizer_class="DayzeroTokenizer", auto_map={"AutoTokenizer": [None, "tokenization_dayzero.DayzeroTokenizer"]}
    )
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return checkpoint

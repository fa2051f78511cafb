"""The tensor roles (onboard/names/tensors.py) against gguf-py's TensorNameMap, llama.cpp's table of the names
checkpoints give each tensor: where both name a decoder tensor, they agree. gguf's tensor types are finer in places
(a mixer's parts: SSM_IN, SSM_A, ...; MLA's projections) where our role is the mixer, and coarser where our role
says what a norm feeds (`post_attention_layernorm`: before the MLP in a pre-norm layer, on the attention output in a
post-norm one), so each gguf type maps to the set of our roles that name the same tensor. The disagreements left are
deliberate, each with its reason (DELIBERATE)."""

from __future__ import annotations

import pytest

gguf = pytest.importorskip("gguf")

from onboard.inspect_checkpoint.tensor_names import strip_lm_prefix  # noqa: E402
from onboard.names.tensors import classify  # noqa: E402

_MIXERS = {"mamba", "deltanet"}
# gguf tensor type (the decoder's; encoders, vision and audio towers and RWKV's time mixing are left out) -> our roles
# that name the same tensor.
GGUF_ROLES: dict[str, set[str]] = {
    "TOKEN_EMBD": {"embed"}, "POS_EMBD": {"positions"}, "TOKEN_EMBD_NORM": {"embed_norm", "embedding_norm"},
    "OUTPUT": {"head"}, "OUTPUT_NORM": {"final_norm"}, "ROPE_FREQS": {"drop"}, "ATTN_ROT_EMBD": {"drop"},
    "ATTN_NORM": {"norm.input"}, "ATTN_NORM_2": {"norm.post_attention"},
    "ATTN_Q": {"attn.q"}, "ATTN_K": {"attn.k"}, "ATTN_V": {"attn.v"},
    "ATTN_QKV": {"attn.qkv", "attn.qkv_grouped", "deltanet"}, "ATTN_OUT": {"attn.o"},
    "ATTN_Q_NORM": {"attn.q_norm"}, "ATTN_K_NORM": {"attn.k_norm"}, "ATTN_SINKS": {"attn.sinks"},
    "ATTN_GATE": {"attn.gate", "attn.g_gate", "deltanet"},
    "ATTN_OUT_NORM": {"norm.post_attn_out"}, "ATTN_POST_NORM": {"norm.post_attn_out", "norm.post_attention"},
    **dict.fromkeys(("ATTN_Q_A", "ATTN_Q_B", "ATTN_KV_A_MQA", "ATTN_KV_B", "ATTN_Q_A_NORM", "ATTN_KV_A_NORM"), {"mla"}),
    **dict.fromkeys(("INDEXER_ATTN_K", "INDEXER_ATTN_Q_B", "INDEXER_K_NORM", "INDEXER_PROJ"), {"mla.indexer"}),
    "FFN_NORM": {"norm.pre_mlp", "norm.post_attention"}, "FFN_PRE_NORM": {"norm.pre_mlp"},
    "FFN_POST_NORM": {"norm.post_mlp"}, "FFN_NORM_EXP": {"norm.post_attention"},
    "FFN_GATE": {"mlp.gate"}, "FFN_UP": {"mlp.up", "mlp.gate_up"}, "FFN_DOWN": {"mlp.down"},
    "FFN_GATE_INP": {"moe.router", "moe_beside"},
    "FFN_GATE_EXP": {"moe.expert.gate", "moe.experts_rows"}, "FFN_UP_EXP": {"moe.expert.up", "moe.experts_rows"},
    "FFN_DOWN_EXP": {"moe.expert.down", "moe.experts.down", "moe.experts_rows", "moe_beside"},
    "FFN_GATE_UP_EXP": {"moe.experts.gate_up", "moe_beside"},
    "FFN_GATE_SHEXP": {"moe.shared.gate"}, "FFN_UP_SHEXP": {"moe.shared.up"}, "FFN_DOWN_SHEXP": {"moe.shared.down"},
    "FFN_GATE_INP_SHEXP": {"moe.shared_gate"}, "FFN_EXP_PROBS_B": {"moe.router_bias"},
    **dict.fromkeys(("FFN_POST_NORM_1", "FFN_POST_NORM_2", "FFN_PRE_NORM_2"), {"moe_beside"}),
    **dict.fromkeys(("SSM_IN", "SSM_CONV1D", "SSM_X", "SSM_DT", "SSM_A", "SSM_D", "SSM_NORM", "SSM_OUT",
                     "SSM_DT_NORM", "SSM_B_NORM", "SSM_C_NORM", "SSM_ALPHA", "SSM_BETA", "SSM_BETA_ALPHA"), _MIXERS),
    **dict.fromkeys(("SHORTCONV_CONV", "SHORTCONV_INPROJ", "SHORTCONV_OUTPROJ"), {"conv"}),
    "LAYER_OUT_SCALE": {"layer_scalar"},
    **dict.fromkeys(("PER_LAYER_TOKEN_EMBD", "PER_LAYER_MODEL_PROJ", "PER_LAYER_PROJ_NORM"), {"ple"}),
    **dict.fromkeys(("PER_LAYER_INP_GATE", "PER_LAYER_PROJ", "PER_LAYER_POST_NORM"), {"ple.layer"}),
    **dict.fromkeys(("NEXTN_EH_PROJ", "NEXTN_EMBED_TOKENS", "NEXTN_ENORM", "NEXTN_HNORM", "NEXTN_SHARED_HEAD_HEAD",
                     "NEXTN_SHARED_HEAD_NORM"), {"drop"}),
}  # fmt: skip

# gguf name -> (gguf's type, our role, why we differ).
DELIBERATE: dict[str, tuple[str, str, str]] = {
    "transformer.norm": ("TOKEN_EMBD_NORM", "final_norm", "a bare `norm` outside the layers is the final norm in "
                         "every transformers decoder; gguf files it for a family whose code applies it first"),
    "backbone.norm": ("TOKEN_EMBD_NORM", "final_norm", "as transformer.norm"),
    "transformer.h.{bid}.ln_mlp": ("ATTN_NORM", "norm.pre_mlp", "Falcon-40B: ln_mlp feeds the MLP; our norm roles "
                                   "say what a norm feeds, gguf's slots are its own numbering of the two norms"),
    "transformer.h.{bid}.ln_attn": ("ATTN_NORM_2", "norm.input", "Falcon-40B: ln_attn feeds attention (as ln_mlp)"),
    "transformer.blocks.{bid}.norm_attn_norm.norm_2": ("ATTN_OUT_NORM", "norm.pre_mlp", "DBRX: norm_2 is the "
                                                       "pre-norm before the FFN, not a norm on attention's output"),
    "transformer.h.{bid}.mixer.out_proj": ("ATTN_OUT", "mamba", "phi-msft's legacy `mixer` naming of attention "
                                           "(not a transformers layout); a `mixer.out_proj` is Mamba's (Nemotron-H)"),
    "encoder.layers.{bid}.mixer.out_proj": ("ATTN_OUT", "mamba", "an encoder's (Nomic BERT): the same `mixer` name"),
    "transformer.h.{bid}.mlp.w1": ("FFN_UP", "mlp.gate", "Qwen-1 (remote code) swaps w1 / w2 against Llama's and "
                                   "Mixtral's convention (w1 the gate, w2 down, w3 up), which the roles follow"),
    "transformer.h.{bid}.mlp.w2": ("FFN_GATE", "mlp.down", "Qwen-1's w2, as its w1"),
    "model.layers.{bid}.feed_forward.up_proj": ("FFN_POST_NORM", "mlp.up", "gguf files it as a norm for one "
                                                "family; in transformers' decoders it is the MLP's up projection"),
    "model.layers.{bid}.feed_forward.down_proj": ("FFN_UP_SHEXP", "mlp.down", "gguf files it as a shared expert "
                                                  "for one family; in transformers' decoders it is the MLP's down"),
}  # fmt: skip


def _named_by_both() -> list[tuple[str, str, str]]:
    """(gguf type, gguf's name, our role) for every decoder name gguf maps that a role pattern knows."""
    from gguf import TensorNameMap

    tables = [
        TensorNameMap.mappings_cfg,
        TensorNameMap.block_mappings_cfg,
        *TensorNameMap.arch_block_mappings_cfg.values(),
    ]
    out = set()
    for table in tables:
        for tensor, names in table.items():
            if tensor.name not in GGUF_ROLES:
                continue
            for name in names:
                template = strip_lm_prefix(name.replace("{bid}", "{}").replace("{xid}", "{}"))
                role = classify(f"{template}.weight")[0] or classify(template)[0]
                if role is not None:
                    out.add((tensor.name, name, role))
    return sorted(out)


def test_roles_agree_with_gguf_where_both_name_a_tensor() -> None:
    pairs = _named_by_both()
    assert len(pairs) > 150, "gguf's table was not read"
    disagree = {name: (kind, role) for kind, name, role in pairs if role not in GGUF_ROLES[kind]}
    unexplained = {name: found for name, found in disagree.items() if DELIBERATE.get(name, ())[:2] != found}
    assert not unexplained, (
        f"roles disagree with gguf-py's TensorNameMap: {unexplained}; fix the pattern in onboard/names/tensors.py, "
        "or list the name in DELIBERATE with the reason"
    )
    stale = sorted(DELIBERATE.keys() - disagree.keys())
    assert not stale, f"DELIBERATE lists names that agree now (or that gguf no longer maps): {stale}"

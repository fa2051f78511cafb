"""Tiny configs of the remaining decoder-only families of the installed transformers (see tests/tiny/configs.py).

With DENSE, MOE and HYBRID this covers every causal-LM model_type whose model is a decoder of text; left out (and
why) in EXCLUDED.
"""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import (
    DEEPSEEK_MOE,
    DROP,
    IDS,
    LLAMA,
    MLA,
    NO_HEAD_DIM,
    QWEN_MOE,
    SLIDING_FULL,
    THREE,
    WINDOW,
    derive,
)

MORE: dict[str, dict[str, Any]] = {
    "axk1": derive(LLAMA, head_dim=DROP, **THREE, **MLA, **derive(DEEPSEEK_MOE, first_k_dense_replace=DROP),
                   mlp_layer_types=["dense", "sparse", "sparse"]),
    "mellum": derive(LLAMA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, sliding_window=WINDOW,
                     layer_types=SLIDING_FULL),
    # Laguna's own mechanisms made to act: more query heads on layer 1, a router soft-cap that binds on the tiny
    # logits, and routed experts scaled (my values, not a released model's)
    "laguna": derive(LLAMA, sliding_window=WINDOW, layer_types=SLIDING_FULL, shared_expert_intermediate_size=32,
                     num_attention_heads_per_layer=[4, 8], moe_router_logit_softcapping=0.5,
                     moe_routed_scaling_factor=2.0, **QWEN_MOE),
    "zaya": derive(LLAMA, num_experts=4, num_experts_per_tok=1,  # top-1 only, as ZAYA-1 routes
                   moe_intermediate_size=32, router_hidden_size=16,
                   intermediate_size=DROP),
    "modernbert-decoder": derive(NO_HEAD_DIM, num_key_value_heads=DROP, local_attention=2 * WINDOW),  # window = half
    "cohere_compass_text": derive(
        NO_HEAD_DIM,
        sliding_window=WINDOW,
        layer_types=SLIDING_FULL,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}, "full_attention": None},
    ),  # global layers without RoPE
    "cpmant": dict(hidden_size=64, num_attention_heads=4, dim_head=16, dim_ff=128, num_hidden_layers=2,
                   vocab_size=1000, position_bias_num_buckets=32, position_bias_max_distance=128, prompt_length=8),
    "zamba": derive(NO_HEAD_DIM, num_hidden_layers=4, layers_block_type=["mamba", "hybrid", "mamba", "hybrid"],
                    mamba_d_state=8, n_mamba_heads=2, use_mamba_kernels=False),  # 2 hybrid layers share attention
    "xlstm": dict(hidden_size=64, num_hidden_layers=2, num_heads=4, qk_dim_factor=1.0, vocab_size=1000, **IDS),
    "hrm_text": derive(LLAMA, num_key_value_heads=DROP, H_cycles=1, L_cycles=1),
    "longcat_flash": dict(hidden_size=64, num_layers=2, num_attention_heads=4, vocab_size=1000, ffn_hidden_size=128,
                          q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, head_dim=8,
                          v_head_dim=16, n_routed_experts=4, moe_topk=2, zero_expert_num=2,
                          expert_ffn_hidden_size=32, max_position_embeddings=256, **IDS),
    "hy_v4": derive(LLAMA, **MLA, head_dim=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
                    n_shared_experts=1, index_n_heads=2, index_head_dim=16, index_topk=4, hc_mult=2),
    "axk2": derive(LLAMA, **MLA, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                   index_n_heads=2, index_head_dim=16, index_topk=4, gated_norm_rank=4),
    "dots3_note_text": derive(LLAMA, **MLA, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                              shared_experts_intermediate_size=32, index_n_heads=2, index_head_dim=16, index_topk=4,
                              n_group=1, topk_group=1),
    "minimax_m3_vl_text": derive(LLAMA, num_local_experts=4, num_experts_per_tok=2, dense_intermediate_size=128,
                                 shared_intermediate_size=32, rotary_dim=8, index_n_heads=2, index_head_dim=16,
                                 index_block_size=4, index_topk_blocks=2),
    # Every Gemma 4 mechanism on: full-attention layers with their own head size and one KV head whose keys are
    # its values (k_eq_v), the last two layers reusing the KV of the last earlier layer of their type, with a
    # double-wide MLP there.
    "gemma4_unified_text": derive(LLAMA, num_hidden_layers=4, layer_types=SLIDING_FULL * 2, sliding_window=WINDOW,
                                  global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
                                  num_kv_shared_layers=2, use_double_wide_mlp=True),
    "inkling_text": derive(LLAMA, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
                           sliding_window_size=WINDOW, d_rel=4, rel_extent=32, n_routed_experts=4,
                           num_experts_per_tok=2, moe_intermediate_size=24, n_shared_experts=1),
    "inkling2_text": derive(LLAMA, unpadded_vocab_size=1000, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
                            sliding_window_size=WINDOW, d_rel=4, rel_extent=32, n_routed_experts=4,
                            num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=DROP),
    "inkling2_loop_text": derive(LLAMA, num_hidden_layers=4, unpadded_vocab_size=1000, n_layers_per_attn_res_block=1, swa_num_attention_heads=4, swa_num_key_value_heads=2,
                                 swa_head_dim=16, sliding_window_size=WINDOW, d_rel=4, rel_extent=32,
                                 n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                 intermediate_size=DROP, loop_layer_index_start=1, loop_layer_index_end=3,
                                 loop_gate_rank=4),
    "qwen4_exp_text": derive(LLAMA, num_hidden_layers=4, linear_key_head_dim=16, linear_value_head_dim=16,
                             linear_num_key_heads=2, linear_num_value_heads=4, shared_expert_intermediate_size=32,
                             intermediate_size=DROP, hc_lowrank=8, ngram_vocab_size_base=1000, indexer_n_heads=2,
                             indexer_kv_heads=1, indexer_head_dim=16, indexer_budget=8, indexer_compress_ratio=4,
                             **QWEN_MOE),
}  # fmt: skip

_ENCODER = "an encoder (or encoder-decoder) family whose causal-LM head is a fine-tuning add-on, not a decoder LM"
_COMPOSITE = ("a multimodal wrapper: its text decoder is covered by its own model_type (the wrappers built whole are "
              "in tiny_wrappers.py)")
# Causal-LM model types of transformers 5.24 left out, and why. A test keeps TINY + EXCLUDED equal to the installed
# transformers' causal-LM mapping, so a new decoder family fails it until it gets a tiny config (or a reason here).
EXCLUDED: dict[str, str] = {
    **dict.fromkeys(
        ["bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "blenderbot", "blenderbot-small",
         "camembert", "data2vec-text", "electra", "ernie", "marian", "mbart", "megatron-bert", "mvp", "pegasus",
         "plbart", "prophetnet", "rembert", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "trocr",
         "whisper", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod", "reformer"],
        _ENCODER,
    ),
    **dict.fromkeys(
        ["gemma4_unified", "qwen4_exp", "dots3_note",
         "mllama", "emu3", "fuyu", "git", "phi4_multimodal", "moshi", "moss_transcribe_diarize",
         "musicgen", "musicgen_melody"],
        _COMPOSITE,
    ),
    "dory": "the two-probe cache measurement cannot attribute its caches to decoder layers (its recurrent block "
    "loops, with a cache per loop, and layer_types lists attention and MLP as separate entries)",
    "deepseek_v4": "the two-probe cache measurement cannot decompose its cache (sliding raw KV plus compressed KV "
    "per compress_rates)",
    "gemma3n": "needs the timm package for its vision tower (not installed); gemma3n_text is covered",
    "gemma4_assistant": "a speculative-decoding drafter: its forward needs the backbone's hidden and KV states",
    "gemma4_unified_assistant": "a speculative-decoding drafter: its forward needs the backbone's shared KV states",
    "blt": "byte latent transformer (patcher, local encoder/decoder, global model): not built by from_config alone "
    "in transformers 5.24 (../shared/notes/ENVIRONMENT.md)",
}  # fmt: skip

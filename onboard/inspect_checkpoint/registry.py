"""Which architectures `onboard inspect` is proven on (VERIFIED: checked against transformers on a tiny checkpoint in
tests/inspect/test_tiny_architectures.py), and where it is known to fall short (KNOWN_GAPS). Tests keep both honest.
"""

from __future__ import annotations

# Families where some facts are known to be wrong: the check's name in test_tiny_architectures.py and why.
KNOWN_GAPS: dict[str, dict[str, str]] = {
    "hrm_text": {
        "layer_kinds": "two stacks (H and L levels) name their layers with the same indices; inspect merges them",
        "windows": "see layer_kinds",
        "kv_bytes_per_token": "the L stack's attention layers are not seen as attention (see layer_kinds)",
        "kv_bytes_per_sequence": "see kv_bytes_per_token",
    },
    "qwen4_exp_text": {
        "kv_bytes_per_token": "transformers also caches the indexer's position ids (int64, 24 B per token); an engine "
        "would not, so the plan leaves them out",
    },
    "xlstm": {
        "kv_bytes_per_token": "xLSTM returns no cache object to weigh: the measurement sees nothing",
        "kv_bytes_per_sequence": "see kv_bytes_per_token",
        "state_bytes_per_sequence": "the mLSTM matrix state is not modelled, and not measured (see above)",
    },
}

VERIFIED: frozenset[str] = frozenset({
    'afmoe', 'apertus', 'apertus1p5_text', 'arcee', 'aria_text', 'bailing_hybrid', 'bamba', 'beam', 'biogpt',
    'bitnet', 'bloom', 'codegen', 'cohere', 'cohere2', 'cohere2_moe', 'ctrl', 'cwm', 'dbrx', 'deepseek_v2',
    'deepseek_v3', 'deepseek_v32', 'diffllama', 'doge', 'dots1', 'ernie4_5', 'ernie4_5_moe', 'exaone', 'exaone4',
    'exaone_moe', 'falcon', 'falcon_h1', 'falcon_mamba', 'flex_olmo', 'flint', 'gemma', 'gemma2', 'gemma3_text',
    'gemma3n_text', 'gemma4_text', 'glm', 'glm4', 'glm4_moe', 'glm4_moe_lite', 'glm_moe_dsa', 'gpt-sw3', 'gpt2',
    'gpt_bigcode', 'gpt_neo', 'gpt_neox', 'gpt_neox_japanese', 'gpt_oss', 'gptj', 'granite', 'granite_swa',
    'granitemoe', 'granitemoe_swa', 'granitemoehybrid', 'granitemoeshared', 'helium', 'hunyuan_v1_dense',
    'hunyuan_v1_moe', 'hy_v3', 'hyperclovax', 'internlm3', 'iquestcoder', 'jais2', 'jamba', 'jetmoe', 'kimi_linear',
    'kolibri1', 'lara_mini', 'lfm2', 'lfm2_moe', 'lfm3', 'llama', 'llama4_text', 'mamba', 'mamba2', 'mimo_v2_flash',
    'minicpm3', 'minimax', 'minimax_m2', 'ministral', 'ministral3', 'mistral', 'mixtral', 'mpt', 'nanochat',
    'nemotron', 'nemotron_h', 'olmo', 'olmo2', 'olmo3', 'olmo_hybrid', 'olmoe', 'openai-gpt', 'opt', 'persimmon',
    'phi', 'phi3', 'phimoe', 'qwen2', 'qwen2_moe', 'qwen3', 'qwen3_5_moe_text', 'qwen3_5_text', 'qwen3_moe',
    'qwen3_next', 'recurrent_gemma', 'rwkv', 'sarvam_mla', 'sarvam_moe', 'seed_oss', 'smollm3', 'solar_open',
    'stablelm', 'starcoder2', 'vaultgemma', 'xglm', 'youtu', 'zamba2',
    # the remaining decoders of transformers 5.24 (tests/tiny/tiny_more.py)
    'axk1', 'axk2', 'cohere_compass_text', 'cpmant', 'dots3_note_text', 'gemma4_unified_text', 'hy_v4',
    'inkling_text', 'inkling2_text', 'inkling2_loop_text', 'laguna', 'longcat_flash', 'mellum', 'minimax_m3_vl_text',
    'modernbert-decoder', 'zamba', 'zaya',
    # new in transformers 5.25 (tests/tiny/tiny_moe.py)
    'ergo', 'kolibri1_1', 'minicpm5_moe', 'param2moe',
})  # fmt: skip

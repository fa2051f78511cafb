"""WRAPPERS: multimodal model types -> tiny configs of the wrapper (its language model from TINY, a one-layer tower).

A wrapper (Gemma 3 / 4, Llama 4, Mistral 3, LLaVA, Qwen2.5-VL, Qwen3-VL, Qwen3.5, Kimi K2.5) stores its language model under a prefix
(`language_model.model.…`, `model.language_model.…`, or at the top beside `visual.…`) and a vision tower beside it.
Generated adapters serve the language model on text; these checkpoints check that they read it from the wrapper as
transformers' wrapper runs it on text, and leave the tower out. Tower sizes are the smallest each config accepts
(one layer, 32 wide, 28-pixel images of 14-pixel patches); the towers are never run.
"""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import DROP, derive
from tests.tiny.tiny_dense import DENSE
from tests.tiny.tiny_hybrid import HYBRID
from tests.tiny.tiny_moe import MOE

_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
               patch_size=14)  # fmt: skip  # SigLIP / CLIP / Pixtral: 1152 wide, 27 layers in Gemma 3
_QWEN_VISION = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14)
# Text-only positions are the same on the three M-RoPE axes, so the sections (16/24/24 in Qwen2.5-VL-7B) must not
# matter: they sum to head_dim / 2 = 8 here.
_MROPE = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
_QWEN35_ROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0]}
# Qwen2-/3-VL text configs have no sliding-window fields (Qwen3VLTextConfig rejects them; Qwen2.5-VL's are unused).
_NO_WINDOW = dict(use_sliding_window=DROP, sliding_window=DROP, max_window_layers=DROP)

WRAPPERS: dict[str, dict[str, Any]] = {
    # language_model.model.* + language_model.lm_head (tied here: the wrapper's own flag is true by default)
    "gemma3": dict(text_config=dict(DENSE["gemma3_text"], model_type="gemma3_text"), vision_config=_VISION),
    # Mistral3Config ties by default while its text config does not: the wrapper's flag wins (transformers ties the
    # outer model's head), so no lm_head is saved
    "mistral3": dict(text_config=dict(DENSE["mistral"], model_type="mistral"), vision_config=dict(_VISION, head_dim=16),
                     vision_feature_layer=-1),
    "llava": dict(text_config=dict(DENSE["llama"], model_type="llama"), vision_config=_VISION),
    "qwen2_5_vl": dict(
        text_config=derive(DENSE["qwen2"], rope_parameters=_MROPE, **_NO_WINDOW),
        vision_config=dict(_QWEN_VISION, fullatt_block_indexes=[0], window_size=28),
    ),
    "qwen3_vl": dict(
        text_config=derive(DENSE["qwen3"], rope_parameters=_MROPE, bos_token_id=DROP, eos_token_id=DROP, **_NO_WINDOW),
        vision_config=dict(_QWEN_VISION, deepstack_visual_indexes=[0], num_position_embeddings=16),
    ),
    "llama4": dict(
        text_config=dict(MOE["llama4_text"], model_type="llama4_text"),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=14, vision_output_dim=64, projector_input_dim=64,
                           projector_output_dim=64, pixel_shuffle_ratio=0.5),
    ),  # fmt: skip
    # Qwen3.5 is released as the wrapper: Gated DeltaNet and full-attention layers, partial M-RoPE (4 rotary dims
    # here: sections 1 + 1 + 0)
    "qwen3_5": dict(
        text_config=dict(HYBRID["qwen3_5_text"], rope_parameters=_QWEN35_ROPE),
        vision_config=dict(_QWEN_VISION, num_position_embeddings=16),
    ),
    "qwen3_5_moe": dict(
        text_config=dict(HYBRID["qwen3_5_moe_text"], rope_parameters=_QWEN35_ROPE),
        vision_config=dict(_QWEN_VISION, num_position_embeddings=16),
    ),
    # Kimi K2.5: DeepSeek-V3's language model (MLA, routed + shared experts) beside MoonViT
    "kimi_k25": dict(
        text_config=dict(MOE["deepseek_v3"], model_type="deepseek_v3"),
        vision_config=dict(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                           patch_size=14, pos_emb_height=4, pos_emb_width=4),
    ),  # fmt: skip
    # Gemma 4 E2B's layout: per-layer embeddings and KV-shared layers in the text model, a vision tower beside it
    "gemma4": dict(
        text_config=dict(DENSE["gemma4_text"], model_type="gemma4_text"),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           num_key_value_heads=2, head_dim=16, position_embedding_size=64),
        audio_config=None,
    ),  # fmt: skip
}

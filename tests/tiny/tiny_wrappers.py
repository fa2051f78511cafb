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

# Every size knob of a vision config, as the shrunk towers below set it (the rest keep their defaults).
_TOWER_SIZES = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "depth": 1, "num_attention_heads": 2,
                "num_heads": 2, "num_key_value_heads": 2, "head_dim": 16, "out_hidden_size": 64, "projection_dim": 32,
                "vision_output_dim": 64, "projector_input_dim": 64, "projector_output_dim": 64}  # fmt: skip


def _shrunk(model_type: str, text_type: str, base: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A wrapper whose tower is its config class's default vision config with every size knob shrunk (28-pixel
    images of 14-pixel patches), around the TINY language model of `text_type`."""
    from transformers import AutoConfig

    vision = AutoConfig.for_model(model_type).vision_config.to_dict()
    tower = {k: v for k, v in _TOWER_SIZES.items() if isinstance(vision.get(k), int) and not isinstance(vision[k], bool)}
    if isinstance(vision.get("image_size"), int):
        tower["image_size"] = 28 if vision.get("patch_size", 14) == 14 else 32
    if isinstance(vision.get("patch_size"), int) and vision["patch_size"] not in (14, 16):
        tower["patch_size"] = 14
    return {"text_config": dict(base[text_type], model_type=text_type),
            "vision_config": {**tower, "model_type": vision["model_type"]}}  # fmt: skip


# Wrappers built from their classes' defaults, towers shrunk (_shrunk): model_type -> the TINY language model it wraps.
SHRUNK: dict[str, str] = {
    "aria": "aria_text", "aya_vision": "cohere2", "blip-2": "opt", "cohere2_vision": "cohere2", "deepseek_vl": "llama",
    "exaone4_5": "exaone4", "got_ocr2": "qwen2", "hyperclovax_vision_v2": "hyperclovax", "idefics2": "mistral",
    "idefics3": "llama", "internvl": "qwen2", "lfm2_vl": "lfm2", "lfm3_vl": "lfm3", "lighton_ocr": "qwen3",
    "llava_next": "llama", "llava_next_video": "llama", "llava_onevision": "qwen2", "llava_onevision1_5": "qwen3",
    "minicpmv4_6": "qwen3_5_text", "ovis2": "qwen2", "ovis2_5": "qwen3", "qianfan_ocr": "qwen3", "smolvlm": "llama",
    "video_llama_3": "qwen2", "video_llava": "llama", "vipllava": "llama",
}  # fmt: skip

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


def wrapper_config(model_type: str) -> dict[str, Any]:
    """The tiny config keywords of wrapper `model_type` (WRAPPERS, or SHRUNK built from the class defaults)."""
    from tests.tiny.configs import TINY

    return WRAPPERS[model_type] if model_type in WRAPPERS else _shrunk(model_type, SHRUNK[model_type], TINY)


ALL_WRAPPERS: tuple[str, ...] = tuple(sorted({*WRAPPERS, *SHRUNK}))

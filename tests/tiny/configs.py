"""TINY: transformers `model_type` -> config overrides that shrink a real architecture to a test-sized model.

Sizes follow ../shared/notes/ENVIRONMENT.md ("Tiny checkpoints"): hidden 64, 2-4 layers, 4 heads / 2 KV heads,
head_dim 16, vocab 1000, intermediate 128, 4 experts top-2, MoE intermediate 32. Comments give the real value
(`hidden_size=64,  # 4096 in Llama-3-8B`). Each entry keeps what makes its family interesting: sliding layers next
to full ones, a dense-first layer before MoE layers, both layer kinds in hybrids.

Every key must be a field of the family's config class (or a legacy keyword it consumes): `make_tiny_checkpoint`
rejects keys that would end up as stray, unused config attributes.
"""

from __future__ import annotations

from typing import Any

from tests.tiny.knobs import DROP, WINDOW, derive
from tests.tiny.tiny_dense import DENSE
from tests.tiny.tiny_hybrid import HYBRID
from tests.tiny.tiny_moe import MOE
from tests.tiny.tiny_more import MORE

__all__ = ["DROP", "TINY", "WINDOW", "derive"]

TINY: dict[str, dict[str, Any]] = {**DENSE, **MOE, **HYBRID, **MORE}
assert len(TINY) == len(DENSE) + len(MOE) + len(HYBRID) + len(MORE), "a model type is listed in two tables"

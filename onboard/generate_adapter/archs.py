"""The registry of supported families: model_type -> ArchSpec (dense and MoE tables), as data the adapter template
renders. See arch_parts.py for the ArchSpec fields; the parity harness proves each entry against transformers."""

from __future__ import annotations

from onboard.generate_adapter.arch_parts import BASE_FIELDS, ArchSpec
from onboard.generate_adapter.archs_dense import DENSE_ARCHS
from onboard.generate_adapter.archs_moe import MOE_ARCHS

__all__ = ["ARCHS", "BASE_FIELDS", "ArchSpec"]

ARCHS: dict[str, ArchSpec] = dict(sorted({**DENSE_ARCHS, **MOE_ARCHS}.items()))

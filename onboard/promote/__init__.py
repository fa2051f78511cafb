"""Promotion: the day-zero checklist, sign-offs, the promotion registry and the onboarding report.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

from onboard.promote.checklist import load_checklist, load_signoffs, record_signoff
from onboard.promote.promote import PromotionRefused, evaluate_revision, promote
from onboard.promote.registry import (
    AlreadyPromoted,
    PromotionConflict,
    Registry,
    already_promoted,
    default_registry_path,
)
from onboard.promote.stage_results import load_stage_results, resolve_revision

__all__ = [
    "AlreadyPromoted",
    "PromotionConflict",
    "PromotionRefused",
    "Registry",
    "already_promoted",
    "default_registry_path",
    "evaluate_revision",
    "load_checklist",
    "load_signoffs",
    "load_stage_results",
    "promote",
    "record_signoff",
    "resolve_revision",
]

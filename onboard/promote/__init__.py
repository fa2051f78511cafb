"""Promotion: the day-zero checklist, sign-offs, the promotion registry and the onboarding report.

Entry points for the pipeline (`onboard new-model`) and the CLI:
    evaluate_revision(slug, workspace, revision=None, registry=None) -> Evaluation   (writes checklist.json + .md)
    promote(slug, workspace, revision=None, registry=None, by=None) -> PromotionOutcome
    record_signoff(rev_dir, item, by, note) -> Signoff
    render_report(slug, workspace, revision=None) -> ReportPaths                     (report.md + report.html)
    Registry(path): add / latest / show / list / already_promoted;  already_promoted(repo, revision, path)
Nothing here imports torch or transformers.
"""

from __future__ import annotations

from onboard.promote.checklist import Checklist, ChecklistState, ItemStatus, evaluate, load_checklist
from onboard.promote.promote import (
    Evaluation,
    PromotionBusy,
    PromotionOutcome,
    PromotionRefused,
    evaluate_revision,
    promote,
)
from onboard.promote.record import PromotionRecord, PromotionSummary
from onboard.promote.registry import (
    AlreadyPromoted,
    PromotionConflict,
    Registry,
    RegistryError,
    already_promoted,
    default_registry_path,
)
from onboard.promote.signoff import Signoff, load_signoffs, record_signoff
from onboard.promote.stage_results import StageResults, load_stage_results
from onboard.promote.workspace import model_id, resolve_revision, slug_for

__all__ = [
    "AlreadyPromoted",
    "Checklist",
    "ChecklistState",
    "Evaluation",
    "ItemStatus",
    "PromotionBusy",
    "PromotionConflict",
    "PromotionOutcome",
    "PromotionRecord",
    "PromotionRefused",
    "PromotionSummary",
    "Registry",
    "RegistryError",
    "Signoff",
    "StageResults",
    "already_promoted",
    "default_registry_path",
    "evaluate",
    "evaluate_revision",
    "load_checklist",
    "load_signoffs",
    "load_stage_results",
    "model_id",
    "promote",
    "record_signoff",
    "resolve_revision",
    "slug_for",
]

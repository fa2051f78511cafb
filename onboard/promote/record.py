"""The promotion record: everything needed to say later exactly what was promoted, on what evidence, by whom."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from onboard import serde
from onboard.checks import Check
from onboard.promote.checklist import Signoff


@dataclass(frozen=True)
class FileEntry:
    path: str
    sha256: str | None
    """None when the file was not available to hash (a hub checkpoint without recorded hashes)."""
    size: int | None = None


@dataclass(frozen=True)
class PromotionRecord:
    model: str
    """Hub repo id (org/name), or the slug for a local folder."""
    slug: str
    revision: str
    promoted_by: str
    promoted_at: str
    attempt: str
    """Random id of the promote run that wrote it: lets a rerun finish a run killed after its commit."""
    source: str
    files: tuple[FileEntry, ...]
    profile_sha256: str | None
    tokenizer_sha256: str | None
    golden_sha256: str | None
    golden_dir: str | None
    checks: tuple[Check, ...]
    """Every stage's checks at promotion time, each with its stage."""
    checklist: dict[str, str]
    """item id -> status at promotion time."""
    signoffs: tuple[Signoff, ...]
    versions: dict[str, str]
    hardware: dict[str, Any]
    """`validated_on` (from validate.json) and `promoted_on` (this host)."""
    supersedes: int | None = None
    """Id of the model's previous promotion, whose goldens this revision was compared against."""
    notes: tuple[str, ...] = ()
    id: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return serde.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromotionRecord:
        return serde.from_dict(cls, data)

    def with_id(self, record_id: int) -> PromotionRecord:
        return replace(self, id=record_id)


@dataclass(frozen=True)
class PromotionSummary:
    id: int
    model: str
    revision: str
    promoted_by: str
    promoted_at: str
    checks_passed: int
    checks_total: int

"""What the ledger gives back: an annotation, a claim, an issued plan, and the decision words.

Plain frozen records, built from rows by the modules that read them (``annotations``,
``claims``, ``plans``); nothing here touches SQLite.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DECISIONS", "Annotation", "Claim", "IssuedPlan", "display_path"]

DECISIONS = ("keep", "delete", "unsure")


def display_path(raw: bytes) -> str:
    """The text form of a path, as snapshots show it (invalid UTF-8 bytes escaped)."""
    return raw.decode("utf-8", "backslashreplace")


@dataclass(frozen=True, slots=True)  # a report holds 100,000 of them: no dict each
class Annotation:
    """A decision and/or note on one path."""

    path: str
    path_raw: bytes
    decision: str | None
    note: str | None
    by: str
    rule: str | None
    at: str
    snapshot_id: str | None = None  # the snapshot the decision was made on
    digest: str | None = None  # the entry's digest in that snapshot (hygiene_nb.scan.digests)

    @property
    def is_reviewed(self) -> bool:
        """Only keep, delete and unsure count as reviewed (a note alone does not)."""
        return self.decision in DECISIONS


@dataclass(frozen=True)
class Claim:
    """A judgement by an agent or rule; kept apart from human decisions, never overriding them."""

    path: str
    risk: str
    claim: str
    confidence: float
    by: str
    at: str


@dataclass(frozen=True)
class IssuedPlan:
    """A plan this store issued, with the digest recorded at issue."""

    plan_id: str
    plan_digest: str
    root: str
    scan_id: str
    path: str
    created_at: str
    expires_at: str
    candidates: int
    reclaim_bytes: int
    state: str

"""Typed results that cross stage boundaries and reach the CLI, widgets and notebooks."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Cleanliness", "GroupStats", "RiskStats", "SizedEntry", "StaleBucket", "Summary"]


@dataclass(frozen=True)
class SizedEntry:
    """One entry in a ranking: its path, kind, bytes (recursive for a directory) and verdict."""

    path: str
    kind: str
    bytes: int
    alloc: int
    files: int | None = None
    partial: bool = False
    error: str | None = None
    nlink: int = 1
    risk: str | None = None
    rule: str | None = None
    claim: str | None = None
    confidence: float | None = None
    path_b64: str | None = None  # the exact bytes, where ``path`` (text) cannot give them back
    holds: str | None = None  # a directory: what it holds (a risk, or "mixed"; classify.content)


@dataclass(frozen=True)
class RiskStats:
    """Bytes (apparent and allocated, hard links once) and entries at one risk level."""

    bytes: int
    alloc: int
    entries: int


@dataclass(frozen=True)
class GroupStats:
    """One pattern group: its outermost entries (nested ones removed) and their sums."""

    group: str
    count: int
    bytes: int
    files: int
    entries: list[SizedEntry] = field(default_factory=list)


@dataclass(frozen=True)
class StaleBucket:
    """Bytes of files by age (since last modification) and risk."""

    bucket: str
    min_days: int
    bytes: dict[str, int]


@dataclass(frozen=True)
class Cleanliness:
    """Seed 004's 0-100 score and what went into it."""

    score: int
    counted: int
    cleanable: int
    intermediate: int
    pending: int
    valuable: int
    estimate: bool
    # why there is no score (``score`` is then meaningless): nothing to count
    no_score: str | None = None


@dataclass(frozen=True)
class Summary:
    """What a snapshot says about a root: totals, risk mix, groups, staleness, score, largest."""

    root: str
    scan_id: str
    scanned_at: str
    tree_bytes: int | None
    tree_alloc: int | None
    tree_files: int | None
    entries: int
    dirs: int
    files: int
    symlinks: int
    others: int
    errors: int
    excluded: int
    partial: bool
    fs_free: int
    fs_total: int
    risk: dict[str, RiskStats] = field(default_factory=dict)
    reclaimable: dict[str, RiskStats] = field(default_factory=dict)
    groups: list[GroupStats] = field(default_factory=list)
    stale: list[StaleBucket] = field(default_factory=list)
    stale_bytes: int = 0
    cleanliness: Cleanliness | None = None
    largest: list[SizedEntry] = field(default_factory=list)
    largest_files: list[SizedEntry] = field(default_factory=list)
    largest_dirs: list[SizedEntry] = field(default_factory=list)
    children: list[SizedEntry] = field(default_factory=list)

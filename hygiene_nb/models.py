"""Typed results that cross stage boundaries and reach the CLI, widgets and notebooks."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SizedEntry", "Summary"]


@dataclass(frozen=True)
class SizedEntry:
    """One entry in a ranking: its path, kind and bytes (recursive for a directory)."""

    path: str
    kind: str
    bytes: int
    alloc: int
    files: int | None = None
    partial: bool = False
    error: str | None = None
    nlink: int = 1


@dataclass(frozen=True)
class Summary:
    """What a snapshot says about a root: totals and the largest entries."""

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
    largest: list[SizedEntry] = field(default_factory=list)
    largest_files: list[SizedEntry] = field(default_factory=list)
    largest_dirs: list[SizedEntry] = field(default_factory=list)
    children: list[SizedEntry] = field(default_factory=list)

"""Results → what a person reads on a terminal, or the single ``--json`` object."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from hygiene_nb.models import SizedEntry, Summary
from hygiene_nb.snapshot import ScanInfo

__all__ = [
    "emit_json",
    "human_bytes",
    "render_prune",
    "render_scan",
    "render_snapshots",
    "render_summary",
    "scan_json",
    "summary_json",
]


def human_bytes(n: int | None) -> str:
    """1536 → '1.5 KiB'; None (unknown) → 'unknown'."""
    if n is None:
        return "unknown"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def emit_json(obj: dict[str, Any]) -> None:
    """Print one JSON object on stdout (and nothing else)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")


def scan_json(info: ScanInfo) -> dict[str, Any]:
    """The ``scan`` object of CONTRACT §7."""
    return {
        "status": "done",
        "scan_id": info.scan_id,
        "root": info.root,
        "entries": info.entries,
        "tree_bytes": info.tree_bytes,
        "tree_alloc": info.tree_alloc,
        "tree_files": info.tree_files,
        "partial": info.partial,
        "errors": info.errors,
        "snapshot_path": info.path,
        "seconds": info.options.get("seconds"),
        "walker": info.walker,
    }


def render_scan(info: ScanInfo) -> str:
    """A few lines on what a scan found and where it went."""
    lines = [
        f"scanned {info.root}: {info.entries:,} entries in {info.options.get('seconds', 0):.1f} s"
        f" ({info.walker} walker)",
        f"  {human_bytes(info.tree_bytes)} apparent, {human_bytes(info.tree_alloc)} on disk,"
        f" {info.tree_files or 0:,} files",
        f"  snapshot {info.scan_id} → {info.path}",
    ]
    if info.errors:
        lines.append(
            f"  {info.errors:,} entries could not be read: their sizes are unknown, not zero"
            " (see `hygiene-nb summary`)."
        )
    if info.partial:
        lines.append(
            "  partial: part of the tree was not read (budget or errors); totals are lower bounds."
        )
    return "\n".join(lines)


def render_snapshots(scans: list[ScanInfo]) -> str:
    """A table of scans, oldest first."""
    if not scans:
        return "no snapshots yet: run `hygiene-nb scan ROOT`."
    lines = [f"{'scan id':<27} {'started (UTC)':<20} {'entries':>10} {'apparent':>10}  root"]
    for s in scans:
        flag = " (partial)" if s.partial else ""
        lines.append(
            f"{s.scan_id:<27} {s.started_at[:19]:<20} {s.entries:>10,} "
            f"{human_bytes(s.tree_bytes):>10}  {s.root}{flag}"
        )
    return "\n".join(lines)


def render_prune(removed: list[ScanInfo], *, dry_run: bool) -> str:
    """What pruning removed (or would remove)."""
    verb = "would remove" if dry_run else "removed"
    if not removed:
        return "nothing to prune (the latest snapshot of every root always stays)."
    lines = [f"{verb} {len(removed)} snapshot(s):"]
    lines += [f"  {s.scan_id}  {s.started_at[:19]}  {s.root}" for s in removed]
    return "\n".join(lines)


def _entry_line(e: SizedEntry) -> str:
    note = ""
    if e.error:
        note = f"  [{e.error}: unknown]"
    elif e.partial:
        note = "  [partial]"
    elif e.nlink > 1 and e.kind == "file":
        note = f"  [{e.nlink} hard links]"
    return f"  {human_bytes(e.bytes):>10}  {e.kind:<7} {e.path}{note}"


def render_summary(s: Summary) -> str:
    """The human summary: totals, largest children, largest files and directories."""
    lines = [
        f"{s.root} — snapshot {s.scan_id} ({s.scanned_at[:19]} UTC)",
        f"  {human_bytes(s.tree_bytes)} apparent, {human_bytes(s.tree_alloc)} allocated on disk"
        f" (hard links counted once)",
        f"  {s.entries:,} entries: {s.files:,} files, {s.dirs:,} directories,"
        f" {s.symlinks:,} symlinks, {s.others:,} other",
        f"  filesystem: {human_bytes(s.fs_free)} free of {human_bytes(s.fs_total)}",
    ]
    if s.errors:
        lines.append(f"  {s.errors:,} entries unreadable: their subtrees are unknown, not empty")
    if s.excluded:
        lines.append(f"  {s.excluded:,} entries excluded (not descended, not counted)")
    if s.partial:
        lines.append("  PARTIAL: totals are lower bounds (budget or unreadable entries)")
    for title, rows in (
        ("largest direct children", s.children),
        ("largest directories", s.largest_dirs),
        ("largest files", s.largest_files),
    ):
        if rows:
            lines.append(f"\n{title}:")
            lines += [_entry_line(e) for e in rows]
    return "\n".join(lines)


def summary_json(s: Summary) -> dict[str, Any]:
    """The ``summary`` object of CONTRACT §7 (risk, groups and score join with classification)."""
    data = asdict(s)
    data["status"] = "done"
    return data

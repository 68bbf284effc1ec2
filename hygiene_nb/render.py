"""Results → what a person reads on a terminal, or the single ``--json`` object."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from hygiene_nb.models import SizedEntry, Summary
from hygiene_nb.pathnames import shown
from hygiene_nb.snapshot import ScanInfo

__all__ = [
    "counted",
    "emit_json",
    "human_bytes",
    "noun_for",
    "render_prune",
    "render_scan",
    "render_snapshots",
    "render_summary",
    "scan_json",
    "shown",
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
    r"""Print one JSON object on stdout (and nothing else), always valid UTF-8.

    A path argument that is not valid UTF-8 reaches Python as lone surrogates; written as they
    are, they would put raw bytes like 0xff on stdout. JSON's own escape (``\udcff``) keeps
    them, and ``json.loads`` gives the same string back.
    """
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")


def scan_json(info: ScanInfo) -> dict[str, Any]:
    """The ``scan`` JSON object (``scan --json``; its keys are listed in docs/commands.md)."""
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


def noun_for(n: int, noun: str, plural: str = "") -> str:
    """The noun for ``n`` things: ``noun`` for one, else ``plural`` (default: ``noun`` + s)."""
    return noun if n == 1 else plural or noun + "s"


def counted(n: int, noun: str, plural: str = "") -> str:
    """``n`` with its noun in the right number: ``1 file``, ``2 files``, ``1 entry``."""
    return f"{n:,} {noun_for(n, noun, plural)}"


def _entries(n: int) -> str:
    return counted(n, "entry", "entries")


def render_scan(info: ScanInfo) -> str:
    """A few lines on what a scan found and where it went."""
    lines = [
        f"scanned {shown(info.root)}: {_entries(info.entries)} in"
        f" {info.options.get('seconds', 0):.1f} s ({info.walker} walker)",
        f"  {human_bytes(info.tree_bytes)} apparent, {human_bytes(info.tree_alloc)} on disk,"
        f" {counted(info.tree_files or 0, 'file')}",
        f"  snapshot {info.scan_id} → {shown(info.path)}",
    ]
    if info.errors:
        lines.append(
            f"  {_entries(info.errors)} could not be read: sizes unknown, not zero"
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
            f"{human_bytes(s.tree_bytes):>10}  {shown(s.root)}{flag}"
        )
    return "\n".join(lines)


def render_prune(removed: list[ScanInfo], *, dry_run: bool) -> str:
    """What pruning removed (or would remove)."""
    verb = "would remove" if dry_run else "removed"
    if not removed:
        return "nothing to prune (the latest snapshot of every root always stays)."
    lines = [f"{verb} {counted(len(removed), 'snapshot')}:"]
    lines += [f"  {s.scan_id}  {s.started_at[:19]}  {shown(s.root)}" for s in removed]
    return "\n".join(lines)


def _entry_line(e: SizedEntry) -> str:
    note = ""
    if e.error:
        note = f"  [{e.error}: unknown]"
    elif e.partial:
        note = "  [partial]"
    elif e.nlink > 1 and e.kind == "file":
        note = f"  [{e.nlink} hard links]"
    risk = f"{e.risk:<8} " if e.risk else ""
    return f"  {human_bytes(e.bytes):>10}  {risk}{e.kind:<7} {shown(e.path)}{note}"


def _risk_lines(s: Summary) -> list[str]:
    lines = ["\nrisk mix (own bytes, hard links once):"]
    for level, stats in s.risk.items():
        count = f"{stats.entries:>9,} {noun_for(stats.entries, 'entry', 'entries')}"
        lines.append(f"  {level:<9} {human_bytes(stats.bytes):>10}  {count}")
    safe, caution = s.reclaimable.get("safe"), s.reclaimable.get("caution")
    if safe and caution:
        lines.append(
            f"  freed by deleting every safe entry: {human_bytes(safe.bytes)}"
            f" ({human_bytes(safe.alloc)} on disk); with caution entries too:"
            f" {human_bytes(caution.bytes)}"
        )
    if s.cleanliness:
        c = s.cleanliness
        est = " (estimate: the scan was partial)" if c.estimate else ""
        lines.append(
            f"  cleanliness {c.score}/100{est}: {c.cleanable:,} cleanable, {c.intermediate:,}"
            f" intermediate, {c.pending:,} pending of {counted(c.counted, 'file')} counted"
        )
    lines.append(f"  not modified for a year or more: {human_bytes(s.stale_bytes)}")
    if s.groups:
        lines.append("\npattern groups (outermost matches; nested ones counted once):")
        for g in s.groups:
            word = noun_for(g.count, "entry", "entries") + ","
            lines.append(f"  {g.group:<15} {g.count:>7,} {word:<8} {human_bytes(g.bytes):>10}")
    return lines


def render_summary(s: Summary) -> str:
    """The human summary: totals, risk mix, groups, score, largest entries."""
    lines = [
        f"{shown(s.root)} — snapshot {s.scan_id} ({s.scanned_at[:19]} UTC)",
        f"  {human_bytes(s.tree_bytes)} apparent, {human_bytes(s.tree_alloc)} allocated on disk"
        f" (hard links counted once)",
        f"  {_entries(s.entries)}: {counted(s.files, 'file')},"
        f" {counted(s.dirs, 'directory', 'directories')}, {counted(s.symlinks, 'symlink')},"
        f" {s.others:,} other",
        f"  filesystem: {human_bytes(s.fs_free)} free of {human_bytes(s.fs_total)}",
    ]
    if s.errors:
        lines.append(f"  {_entries(s.errors)} unreadable: subtrees unknown, not empty")
    if s.excluded:
        lines.append(f"  {_entries(s.excluded)} excluded (not descended, not counted)")
    if s.partial:
        lines.append("  PARTIAL: totals are lower bounds (budget or unreadable entries)")
    lines += _risk_lines(s)
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
    """The ``summary`` JSON object (``summary --json``; its keys are listed in docs/commands.md)."""
    data = asdict(s)
    data["status"] = "done"
    data["cleanliness_detail"] = data["cleanliness"]
    data["cleanliness"] = s.cleanliness.score if s.cleanliness else None
    data["largest"] = [
        {"path": e.path, "bytes": e.bytes, "kind": e.kind, "risk": e.risk, "rule": e.rule,
         "claim": e.claim, "confidence": e.confidence, "path_b64": e.path_b64}
        for e in s.largest
    ]  # fmt: skip
    for group in data["groups"]:
        group["entries"] = [
            {"path": e["path"], "bytes": e["bytes"], "risk": e["risk"], "claim": e["claim"],
             "path_b64": e["path_b64"]}
            for e in group["entries"]
        ]  # fmt: skip
    listed = [e for k in ("largest", "largest_files", "largest_dirs", "children") for e in data[k]]
    listed += [e for group in data["groups"] for e in group["entries"]]
    for entry in listed:
        if entry["path_b64"] is None:  # only where a name is not valid UTF-8, as in a plan
            del entry["path_b64"]
    return data


def verification_line(verification: dict[str, Any], status: str) -> str:
    """One line on project verification around an execution (or what it will be)."""
    if verification.get("mode") != "commands":
        return "verification: static-only (no verify command configured for this root)"
    commands = "; ".join(" ".join(c) for c in verification.get("commands", []))
    if status == "dry-run":
        return (
            f"verification: `{commands}` runs before (a failure refuses the plan) and after (a "
            "failure rolls everything back)"
        )
    if status == "rolled-back":
        back = verification.get("rollback", {})
        blocked = back.get("blocked", [])
        return (
            f"verification FAILED after the move: rolled back, "
            f"{counted(back.get('restored', 0), 'item')} restored"
            + (
                f", {len(blocked)} blocked (still in quarantine; see the receipt)"
                if blocked
                else ""
            )
        )
    return f"verification: `{commands}` passed before and after"

"""Bench section: classifying the scanned 1M-entry snapshot (target: under 2 s, pure step).

The pure step (``classify_table``) is timed apart from gathering its context at the edge
(``protect_context``: ``git ls-files`` in every work tree), which depends on how many git work
trees the tree holds, not on its size.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

__all__ = ["CLASSIFY_TARGET_S", "classify_section"]

CLASSIFY_TARGET_S = 2.0


def classify_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """Time classification of the shared snapshot; record median seconds and PASS/MISS."""
    from hygiene_nb import api
    from hygiene_nb.classify.classification import CLASSIFY_COLUMNS, classify_table
    from hygiene_nb.scan.index import find_scan
    from hygiene_nb.scan.snapshot import load_snapshot
    from hygiene_nb.store import resolve_store

    store = resolve_store(store_dir / "shared")
    if not store.root.exists():
        print("  skipped: the scan section left no shared store")
        return
    info = find_scan(store, root=str(tree_root))
    table = load_snapshot(store, scan_id=info.scan_id, columns=CLASSIFY_COLUMNS)
    started = time.perf_counter()
    ctx = api.protect_context(table, info, store)
    context_s = time.perf_counter() - started
    times = []
    for _ in range(max(3, report.rounds)):
        started = time.perf_counter()
        classify_table(table, ctx, now_ns=time.time_ns())
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    verdict = "PASS" if median <= CLASSIFY_TARGET_S else "MISS"
    print(
        f"  classify_table         {median:7.3f} s  ({table.num_rows:,} rows) "
        f"target <= {CLASSIFY_TARGET_S} s: {verdict}"
    )
    print(
        f"  protect_context (git)  {context_s:7.3f} s  "
        f"({len(ctx.git.worktrees)} work trees, {len(ctx.git.unreadable)} not listable)"
    )
    report.sections["classify"] = {
        "rows": table.num_rows,
        "classify_table_s": round(median, 4),
        "protect_context_s": round(context_s, 4),
        "worktrees": len(ctx.git.worktrees),
        "target_s": CLASSIFY_TARGET_S,
        "status": verdict,
    }

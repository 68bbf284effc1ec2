"""Bench section: building a plan of 100,000 candidates from the scanned 1M-entry snapshot.

Marks 100k files (not protected, not under a symlink) ``delete`` in the scratch store's ledger,
then times ``make_plan``: selection, the disk re-check of every candidate, and writing the file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

__all__ = ["PLAN_CANDIDATES", "plan_section"]

PLAN_CANDIDATES = int(os.environ.get("BENCH_PLAN_CANDIDATES", "100000"))


def plan_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """Time annotating 100k candidates and building their plan."""
    from hygiene_nb import api
    from hygiene_nb.scan.snapshot import entry_paths

    store = store_dir / "shared"
    if not store.exists():
        print("  skipped: the scan section left no shared store")
        return
    table = api.classify_snapshot(str(tree_root), store=store)
    files = table.filter(
        pc.and_(pc.equal(table.column("kind"), "file"), pc.invert(table.column("protected")))
    )
    chosen = entry_paths(files.slice(0, PLAN_CANDIDATES)).to_pylist()
    started = time.perf_counter()
    api.annotate(chosen, store=store, decision="delete", set_note=False)
    annotate_s = time.perf_counter() - started
    started = time.perf_counter()
    result = api.make_plan(tree_root, store=store)
    plan_s = time.perf_counter() - started
    print(f"  annotate {len(chosen):,} paths   {annotate_s:7.3f} s")
    print(
        f"  make_plan              {plan_s:7.3f} s  ({result.candidates:,} candidates, "
        f"{result.excluded:,} excluded)"
    )
    report.sections["plan"] = {
        "candidates": result.candidates,
        "excluded": result.excluded,
        "annotate_s": round(annotate_s, 3),
        "make_plan_s": round(plan_s, 3),
    }

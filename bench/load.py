"""Bench section: loading the scanned 1M-entry snapshot, whole and by columns, and summarizing.

Runs in-process against the shared store the scan section left (``store_dir / "shared"``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["load_section"]


def _median_seconds(func: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def load_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """Time ``load`` (all columns; a few columns; with ``path``) and ``summarize``."""
    from hygiene_nb import api

    store = store_dir / "shared"
    if not store.exists():
        print("  skipped: the scan section left no shared store")
        return
    root = str(tree_root)
    rounds = max(3, report.rounds)
    results = {
        "load_all_columns_s": _median_seconds(lambda: api.load(root, store=store), rounds),
        "load_size_kind_s": _median_seconds(
            lambda: api.load(root, store=store, columns=["size", "kind"]), rounds
        ),
        "load_path_size_s": _median_seconds(
            lambda: api.load(root, store=store, columns=["path", "size"]), rounds
        ),
        "load_to_pandas_s": _median_seconds(
            lambda: api.load(root, store=store, columns=["path", "size", "kind"]).to_pandas(),
            rounds,
        ),
        "summarize_s": _median_seconds(lambda: api.summarize(root, store=store), rounds),
    }
    rows = api.load(root, store=store, columns=["size"]).num_rows
    for key, value in results.items():
        print(f"  {key:<22} {value:7.3f} s  ({rows:,} rows, median of {rounds})")
    report.sections["load"] = {"rows": rows, **{k: round(v, 4) for k, v in results.items()}}

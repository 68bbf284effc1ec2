"""Bench section: execute, verify and restore a 100,000-item plan.

Runs on a tree of its own (100k small files in 1,000 directories under the scratch store
directory), never on the reusable 1M tree, so a failed run cannot damage it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["EXECUTOR_ITEMS", "executor_section"]

EXECUTOR_ITEMS = int(os.environ.get("BENCH_EXECUTOR_ITEMS", "100000"))


def _build(root: Path, items: int) -> list[bytes]:
    paths = []
    base = os.fsencode(root)
    per_dir = 100
    for d in range(max(1, items // per_dir)):
        directory = base + b"/d%04d" % d
        os.makedirs(directory)
        for f in range(per_dir):
            path = directory + b"/f%03d" % f
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"x" * (f % 7))
            os.close(fd)
            paths.append(path)
    return paths


def executor_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """Time execute, verify and restore of a 100k-item plan on a tree of its own."""
    from hygiene_nb import api
    from hygiene_nb.executor import Confirmation, execute_plan, restore_batch, verify_receipt
    from hygiene_nb.store import resolve_store

    root, store_path = store_dir / "exec-tree", store_dir / "exec-store"
    started = time.perf_counter()
    paths = _build(root, EXECUTOR_ITEMS)
    build_s = time.perf_counter() - started
    api.scan_root(root, store=store_path)
    api.annotate(paths, store=store_path, decision="delete", set_note=False)
    plan = api.make_plan(root, store=store_path)
    store = resolve_store(store_path)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    result = execute_plan(
        plan.plan_path,
        store=store,
        confirm=Confirmation(plan.plan_id, plan.plan_digest, "quarantine"),
    )
    timings["execute_s"] = time.perf_counter() - started
    started = time.perf_counter()
    checked = verify_receipt(str(result.receipt_path))
    timings["verify_s"] = time.perf_counter() - started
    started = time.perf_counter()
    restored = restore_batch(store, str(result.batch_id), execute=True)
    timings["restore_s"] = time.perf_counter() - started
    back = sum(os.path.exists(p) for p in paths)
    for key, value in timings.items():
        print(f"  {key:<10} {value:7.2f} s  ({len(paths):,} items)")
    print(
        f"  moved {len(result.moved):,}, verify {checked.status}, restored "
        f"{len(restored.restored):,}, back in place {back:,} (tree built in {build_s:.1f} s)"
    )
    report.sections["executor"] = {
        "items": len(paths),
        "moved": len(result.moved),
        "verify": checked.status,
        "restored": len(restored.restored),
        "back_in_place": back,
        **{k: round(v, 2) for k, v in timings.items()},
    }

"""The store and its snapshots: which store, list, load and prune snapshots, when one was taken.

Every other use case finds its store through ``existing_store`` (as given, nothing created) or
``open_store`` (created if missing). Finding the store and listing scans load no Parquet or
walker code (``hygiene-nb quarantine list`` and ``verify`` start in a fraction of the time);
``load`` and a root's check import theirs when called.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hygiene_nb.errors import UsageError
from hygiene_nb.scan.index import ScanInfo, list_scans, prune_scans
from hygiene_nb.store import Store, resolve_store

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "StoreArg",
    "existing_store",
    "list_snapshots",
    "load",
    "open_store",
    "prune_snapshots",
    "scan_time_ns",
    "store_path",
]

StoreArg = Store | str | os.PathLike[str] | None


def list_snapshots(*, store: StoreArg = None, root: str | None = None) -> list[ScanInfo]:
    """Every scan in the store, oldest first (only those of ``root`` if given)."""
    from hygiene_nb.scan.request import validate_root

    return list_scans(existing_store(store), root=validate_root(root) if root else None)


def load(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Load the latest snapshot of ``root`` (or ``scan_id``) as an Arrow table.

    Use ``.to_pandas()`` on the result for a DataFrame. Ask for ``columns`` to read less.

    Raises:
        SnapshotNotFound: no snapshot matches.
    """
    from hygiene_nb.scan.snapshot import load_snapshot

    return load_snapshot(
        existing_store(store),
        root=os.path.abspath(root) if root else None,
        scan_id=scan_id,
        columns=columns,
    )


def scan_time_ns(info: ScanInfo) -> int:
    """When a scan finished (started, if it never finished), in nanoseconds since the epoch."""
    when = datetime.fromisoformat(info.finished_at or info.started_at)
    return int(when.timestamp()) * 10**9 + when.microsecond * 1000


def prune_snapshots(
    *,
    store: StoreArg = None,
    keep: int | None = None,
    older_than_days: float | None = None,
    dry_run: bool = False,
) -> list[ScanInfo]:
    """Remove old snapshots (the store's own files), never the latest scan of any root.

    Raises:
        UsageError: neither ``keep`` nor ``older_than_days`` was given.
    """
    if keep is None and older_than_days is None:
        raise UsageError("say what to prune: --keep N or --older-than DAYS.")
    if keep is not None and keep < 1:
        raise UsageError("--keep must be at least 1 (the latest snapshot always stays).")
    return prune_scans(
        existing_store(store),
        keep=keep,
        older_than_days=older_than_days,
        now=time.time(),
        dry_run=dry_run,
    )


def open_store(store: StoreArg = None) -> Store:
    """The store (created if missing), for the CLI's executor commands."""
    return existing_store(store).ensure()


def existing_store(store: StoreArg = None) -> Store:
    """The store, as it is: nothing is created (a dry run or a listing creates nothing)."""
    return store if isinstance(store, Store) else resolve_store(store)


def store_path(store: StoreArg = None) -> Path:
    """The resolved store directory (for display)."""
    return existing_store(store).root

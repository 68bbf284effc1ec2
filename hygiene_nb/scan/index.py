"""The store's index of scans: what each scan was, and where its partition lives.

``index.jsonl`` holds one ``ScanInfo`` per line (the same record as the Parquet footer keeps);
the partition directories ``snapshots/host=…/root=…/scan=…/`` are derived from it, never
trusted from a recorded location. Pure Python: listing scans, finding one and pruning old ones
import no Parquet library (``hygiene_nb.scan.snapshot`` reads and writes the files).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hygiene_nb.errors import IndexCorrupt, SnapshotNotFound
from hygiene_nb.store import FILE_MODE, Store, remove_store_path, write_private_file

__all__ = [
    "ScanInfo",
    "append_scan",
    "classified_dir",
    "digest_dir",
    "find_scan",
    "list_scans",
    "partition_dir",
    "prune_scans",
    "root_slug",
]


@dataclass
class ScanInfo:
    """Scan-level metadata, kept in the Parquet footer and in the store's index."""

    scan_id: str
    root: str
    host: str
    started_at: str
    finished_at: str = ""
    entries: int = 0
    errors: int = 0
    partial: bool = False
    tree_bytes: int | None = None
    tree_alloc: int | None = None
    tree_files: int | None = None
    fs_free: int = 0
    fs_total: int = 0
    root_dev: int = 0
    root_inode: int = 0
    walker: str = ""
    tool_version: str = ""
    format_version: int = 1  # a scan recorded without one predates format 2
    options: dict[str, Any] = field(default_factory=dict)
    # the valid CACHEDIR.TAG files the scan met: {"dir": path, "tool": name (when it says)};
    # a scan recorded without them has none (``hygiene_nb.scan.cachedir``)
    cache_tags: list[dict[str, str]] = field(default_factory=list)
    # the names of the rows' uids and gids in the password and group databases when the scan
    # ran, keyed by the decimal id ("1000": "ada"); an id with no account then is absent, and a
    # scan recorded without them has none (``hygiene_nb.scan.owners``)
    user_names: dict[str, str] = field(default_factory=dict)
    group_names: dict[str, str] = field(default_factory=dict)
    path: str = ""  # the snapshot's partition directory

    def to_json(self) -> str:
        """Serialize as one JSON line."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScanInfo:
        """Build from a parsed index line or footer (unknown keys are ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def _partition_value(text: str) -> str:
    """A Hive partition value that is never purely numeric and needs no escaping."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"
    return value if not value.isdigit() else f"h{value}"


def root_slug(root: str) -> str:
    """The ``root=`` partition value for a root path: readable, unique by a short hash."""
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    tail = _partition_value(root)[-40:].lstrip("-.") or "root"
    return f"{tail}-{digest}"


def partition_dir(store: Store, info: ScanInfo) -> Path:
    """Where a scan's Parquet file lives in ``store`` (derived, so a copied store works)."""
    return (
        store.snapshots
        / f"host={_partition_value(info.host)}"
        / f"root={root_slug(info.root)}"
        / f"scan={info.scan_id}"
    )


def classified_dir(store: Store, info: ScanInfo) -> Path:
    """Where a scan's kept classification lives (``hygiene_nb.classify.stored``)."""
    return store.root / "classified" / partition_dir(store, info).relative_to(store.snapshots)


def digest_dir(store: Store, info: ScanInfo) -> Path:
    """Where a scan's entry digests live (``hygiene_nb.scan.digests``): beside the dataset."""
    return store.root / "digests" / partition_dir(store, info).relative_to(store.snapshots)


@contextmanager
def _index_lock(store: Store) -> Iterator[None]:
    fd = os.open(store.root / "index.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_index(store: Store) -> list[ScanInfo]:
    if not store.index.exists():
        return []
    scans = []
    for number, line in enumerate(store.index.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            scan = ScanInfo.from_dict(json.loads(line))
            scan.path = str(partition_dir(store, scan))  # never trust a recorded location
            scans.append(scan)
        except (ValueError, TypeError) as exc:
            raise IndexCorrupt(
                f"{store.index} line {number} is not a scan record ({exc}); "
                "move the file aside and the next scan starts a fresh index."
            ) from exc
    return scans


def list_scans(store: Store, *, root: str | None = None) -> list[ScanInfo]:
    """Every scan in the store (for ``root`` only, if given), oldest first."""
    scans = [s for s in _read_index(store) if root is None or s.root == root]
    return sorted(scans, key=lambda s: (s.started_at, s.scan_id))


def find_scan(store: Store, *, root: str | None = None, scan_id: str | None = None) -> ScanInfo:
    """The scan with ``scan_id``, else the latest scan of ``root``.

    Raises:
        SnapshotNotFound: nothing matches.
    """
    scans = list_scans(store, root=root if scan_id is None else None)
    if scan_id is not None:
        for scan in scans:
            if scan.scan_id == scan_id:
                return scan
        raise SnapshotNotFound(
            f"no snapshot {scan_id} in {store.root}; `hygiene-nb snapshots` lists them."
        )
    if not scans:
        where = f"of {root} " if root else ""
        raise SnapshotNotFound(
            f"no snapshot {where}in {store.root}; run `hygiene-nb scan {root or 'ROOT'}` first."
        )
    return scans[-1]


def append_scan(store: Store, info: ScanInfo) -> None:
    """Add a finished scan to the index (under the index lock, one appended line)."""
    with (
        _index_lock(store),
        os.fdopen(
            os.open(store.index, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE), "a"
        ) as f,
    ):
        f.write(info.to_json() + "\n")


def prune_scans(
    store: Store,
    *,
    keep: int | None = None,
    older_than_days: float | None = None,
    now: float,
    dry_run: bool = False,
) -> list[ScanInfo]:
    """Remove old snapshots from the store, never the latest of any root.

    Args:
        store: the store.
        keep: keep this many newest scans per root.
        older_than_days: remove scans that started more than this many days before ``now``.
        now: the current time (seconds since the epoch).
        dry_run: only say what would be removed.

    Returns:
        The scans removed (or that would be).
    """
    from datetime import datetime

    with _index_lock(store):
        scans = _read_index(store)
        by_root: dict[str, list[ScanInfo]] = {}
        for scan in sorted(scans, key=lambda s: (s.started_at, s.scan_id)):
            by_root.setdefault(scan.root, []).append(scan)
        doomed: list[ScanInfo] = []
        for root_scans in by_root.values():
            older = root_scans[:-1]  # the latest of a root always stays
            if keep is not None:
                older = older[: max(0, len(root_scans) - max(keep, 1))]
            if older_than_days is not None:
                cutoff = now - older_than_days * 86400
                older = [
                    s for s in older if datetime.fromisoformat(s.started_at).timestamp() < cutoff
                ]
            doomed.extend(older)
        if dry_run or not doomed:
            return doomed
        gone = {s.scan_id for s in doomed}
        for scan in doomed:
            remove_store_path(store, Path(scan.path))
            for derived in (digest_dir(store, scan), classified_dir(store, scan)):
                if derived.exists():
                    remove_store_path(store, derived)
        kept = [s for s in scans if s.scan_id not in gone]
        write_private_file(store.index, "".join(s.to_json() + "\n" for s in kept).encode())
        return doomed

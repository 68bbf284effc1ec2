"""Scanning a root into a new snapshot, with a progress bar or callback.

A finished scan fills in the decisions of the remembered rules on the new snapshot.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import __version__
from hygiene_nb.api.bounds import MAX_ENTRIES, MAX_SECONDS, check_bounded
from hygiene_nb.api.remembered import apply_remembered_rules
from hygiene_nb.api.snapshots import StoreArg, open_store
from hygiene_nb.scan.arrays import int_scalar
from hygiene_nb.scan.cachedir import TagReader
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.owners import OwnerNames
from hygiene_nb.scan.progress import ScanProgress, batch_bytes, batch_directory, progress_bar
from hygiene_nb.scan.request import ScanRequest, validate_root, walk_options
from hygiene_nb.scan.snapshot import FORMAT_VERSION, SnapshotWriter
from hygiene_nb.scan.walk import WalkerName, open_walker
from hygiene_nb.store import utc_now

__all__ = ["Progress", "ScanProgress", "scan_root"]

# given a ScanProgress, which is the entry count itself: a callable taking an int still fits
Progress = Callable[[ScanProgress], None]


def _utcnow() -> str:
    return utc_now().isoformat(timespec="milliseconds")


def _new_scan_id() -> str:
    return f"s{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def scan_root(
    root: str | os.PathLike[str],
    *,
    store: StoreArg = None,
    excludes: tuple[str, ...] | list[str] = (),
    one_file_system: bool = False,
    max_entries: int = 0,
    max_seconds: float = 0.0,
    threads: int = 0,
    walker: WalkerName = "auto",
    progress: Progress | bool = False,
) -> ScanInfo:
    """Scan ``root`` (never following symlinks) into a new snapshot in the store.

    Args:
        root: the directory to scan.
        store: the store (path or ``Store``); default ``$HYGIENE_NB_STORE``, else
            ``${XDG_DATA_HOME:-~/.local/share}/hygiene-nb`` (docs/format.md).
        excludes: gitignore-style patterns to skip (recorded as excluded), added to the
            root's ``.hygieneignore``.
        one_file_system: do not descend into other filesystems (mount points are recorded).
        max_entries: stop after this many entries (0: no limit); shared fairly by the root's
            direct children. What is cut is marked partial.
        max_seconds: stop listing new directories after this long (0: no limit).
        threads: walker threads (0: the walker's default).
        walker: ``auto`` (the C core if built), ``c`` or ``python``.
        progress: ``True`` for a live progress line on stderr (entries, bytes so far and the
            directory being read; a tqdm widget in a notebook), or a callable given a
            ``ScanProgress`` after each walk batch: the number of entries seen so far (it is
            an ``int``), with ``.bytes`` and ``.directory`` (hygiene_nb/scan/progress.py).

    Returns:
        The scan's metadata, including where its snapshot was written.

    Raises:
        RootInvalid: the root is not a directory.
        UsageError: ``max_entries`` or ``max_seconds`` is out of range (see ``MAX_ENTRIES``,
            ``MAX_SECONDS``).
        ExcludeInvalid: an exclude pattern cannot be used.
        StoreError: the store cannot be written.
    """
    path = validate_root(root)
    check_bounded(max_entries, "--max-entries", 0, MAX_ENTRIES)
    check_bounded(max_seconds, "--max-seconds", 0, MAX_SECONDS)
    store = open_store(store)
    request = ScanRequest(
        root=path,
        excludes=tuple(excludes),
        one_file_system=one_file_system,
        max_entries=max_entries,
        max_seconds=max_seconds,
        threads=threads,
        walker=walker,
        skip_dirs=(store.root, store.quarantine),
    )
    options = walk_options(request, path)
    st = os.lstat(path)
    fs = os.statvfs(path)
    info = ScanInfo(
        scan_id=_new_scan_id(),
        root=path,
        host=socket.gethostname(),
        started_at=_utcnow(),
        fs_free=fs.f_bavail * fs.f_frsize,
        fs_total=fs.f_blocks * fs.f_frsize,
        root_dev=st.st_dev,
        root_inode=st.st_ino,
        tool_version=__version__,
        format_version=FORMAT_VERSION,
        options={
            "excludes": list(excludes),
            "ignore_rules": len(options.excludes),
            "one_file_system": one_file_system,
            "max_entries": max_entries,
            "max_seconds": max_seconds,
        },
    )
    started = time.monotonic()
    report, close_bar = _progress(progress, path)
    writer = SnapshotWriter(store, info)
    tags = TagReader(options.root)
    owners = OwnerNames()
    seen_bytes = 0
    try:
        walk = open_walker(options, walker=walker)
        info.walker = walk.name
        for batch in walk.batches():
            writer.write(batch)
            tags.note(batch)
            owners.note(batch)
            _take_root_totals(batch, info)
            if report is not None:
                seen_bytes += batch_bytes(batch)
                report(ScanProgress(walk.stats.entries, seen_bytes, batch_directory(batch)))
        info.entries = walk.stats.entries
        info.errors = walk.stats.errors
    except BaseException:
        # A failed or interrupted scan leaves no half snapshot and no index line behind.
        writer.abort()
        raise
    finally:
        close_bar()
        tags.close()
    info.cache_tags = tags.tags
    if tags.dropped:
        info.options["cache_tags_dropped"] = tags.dropped
    # looked up now, before the footer is written: the accounts may be gone when it is read
    info.user_names, info.group_names = owners.names()
    if owners.dropped:
        info.options["owner_ids_dropped"] = owners.dropped
    info.finished_at = _utcnow()
    info.options["seconds"] = round(time.monotonic() - started, 3)
    info = writer.close()
    apply_remembered_rules(store=store, scan_id=info.scan_id)
    return info


def _progress(progress: Progress | bool, root: str) -> tuple[Progress | None, Callable[[], None]]:
    """Turn ``progress=True`` into the terminal line (a tqdm widget in a notebook)."""
    if progress is True:
        return progress_bar(root)
    return (progress or None), lambda: None


_ROOT_DEPTH = int_scalar(0, pa.int32())  # not a Python 0: see scan.arrays


def _take_root_totals(rows: pa.RecordBatch, info: ScanInfo) -> None:
    """Copy the root row's totals into ``info`` when this walk batch holds it (it comes last)."""
    found = rows.filter(pc.equal(rows.column("depth"), _ROOT_DEPTH))
    if found.num_rows:
        root = found.to_pylist()[0]
        info.tree_bytes = root["tree_bytes"]
        info.tree_alloc = root["tree_alloc"]
        info.tree_files = root["tree_files"]
        info.partial = bool(root["partial"])

"""The safe use cases, each one call: scan a root, list and prune snapshots, summarize.

The CLI, the widgets and the notebooks call these; they compose the stages and hold no logic of
their own.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import __version__
from hygiene_nb.classify import CLASSIFY_COLUMNS, classify_table
from hygiene_nb.models import Summary
from hygiene_nb.protect import ProtectContext, find_git_tracked
from hygiene_nb.rules import UserRule, load_user_rules
from hygiene_nb.scan import ScanRequest, validate_root, walk_options
from hygiene_nb.snapshot import (
    ScanInfo,
    SnapshotWriter,
    find_scan,
    list_scans,
    load_snapshot,
    prune_scans,
)
from hygiene_nb.store import Store, resolve_store
from hygiene_nb.summary import summarize_table
from hygiene_nb.walk import WalkerName, open_walker

__all__ = [
    "classify",
    "list_snapshots",
    "load",
    "protect_context",
    "prune_snapshots",
    "scan_root",
    "summarize",
]

StoreArg = Store | str | os.PathLike[str] | None
Progress = Callable[[int], None]


def _store(store: StoreArg) -> Store:
    return store if isinstance(store, Store) else resolve_store(store)


def _utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


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
        store: the store (path or ``Store``); default per CONTRACT §2.
        excludes: gitignore-style patterns to skip (recorded as excluded), added to the
            root's ``.hygieneignore``.
        one_file_system: do not descend into other filesystems (mount points are recorded).
        max_entries: stop after this many entries (0: no limit); shared fairly by the root's
            direct children. What is cut is marked partial.
        max_seconds: stop listing new directories after this long (0: no limit).
        threads: walker threads (0: the walker's default).
        walker: ``auto`` (the C core if built), ``c`` or ``python``.
        progress: ``True`` for a tqdm progress bar (a widget in a notebook, a line on a
            terminal), or a callable given the number of entries seen so far after each batch.

    Returns:
        The scan's metadata, including where its snapshot was written.

    Raises:
        RootInvalid: the root is not a directory.
        ExcludeInvalid: an exclude pattern cannot be used.
        StoreError: the store cannot be written.
    """
    path = validate_root(root)
    store = _store(store).ensure()
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
        options={
            "excludes": list(excludes),
            "ignore_rules": len(options.excludes),
            "one_file_system": one_file_system,
            "max_entries": max_entries,
            "max_seconds": max_seconds,
        },
    )
    started = time.monotonic()
    report, close_bar = _progress(progress)
    writer = SnapshotWriter(store, info)
    try:
        walk = open_walker(options, walker=walker)
        info.walker = walk.name
        for batch in walk.batches():
            rows = writer.write(batch)
            _take_root_totals(rows, info)
            if report is not None:
                report(walk.stats.entries)
        info.entries = walk.stats.entries
        info.errors = walk.stats.errors
    except BaseException:
        # A failed or interrupted scan leaves no half snapshot and no index line behind.
        writer.abort()
        raise
    finally:
        close_bar()
    info.finished_at = _utcnow()
    info.options["seconds"] = round(time.monotonic() - started, 3)
    return writer.close()


def _progress(progress: Progress | bool) -> tuple[Progress | None, Callable[[], None]]:
    """Turn ``progress=True`` into a tqdm bar (tqdm.auto picks notebook or terminal)."""
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(unit=" entries", unit_scale=True, desc="scanning", leave=False)

        def update(entries: int) -> None:
            bar.update(entries - bar.n)

        return update, bar.close
    return (progress or None), lambda: None


def _take_root_totals(rows: pa.RecordBatch, info: ScanInfo) -> None:
    """Copy the root row's totals into ``info`` when this batch holds it (it comes last)."""
    found = rows.filter(pc.equal(rows.column("depth"), 0))
    if found.num_rows:
        root = found.to_pylist()[0]
        info.tree_bytes = root["tree_bytes"]
        info.tree_alloc = root["tree_alloc"]
        info.tree_files = root["tree_files"]
        info.partial = bool(root["partial"])


def list_snapshots(*, store: StoreArg = None, root: str | None = None) -> list[ScanInfo]:
    """Every scan in the store, oldest first (only those of ``root`` if given)."""
    return list_scans(_store(store), root=validate_root(root) if root else None)


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
    return load_snapshot(
        _store(store),
        root=os.path.abspath(root) if root else None,
        scan_id=scan_id,
        columns=columns,
    )


def protect_context(table: pa.Table, info: ScanInfo, store: Store) -> ProtectContext:
    """Gather what protection needs from outside the snapshot: home, store, git-tracked files.

    Runs ``git ls-files`` (read-only) in every git work tree the snapshot holds.
    """
    git_names = table.filter(pc.equal(table.column("name"), ".git"))
    worktrees = [p for p in git_names.column("parent").to_pylist() if p is not None]
    return ProtectContext(
        root=info.root,
        home=os.path.expanduser("~"),
        store=str(store.root),
        git=find_git_tracked(worktrees),
    )


def _user_rules(store: Store, rules: str | os.PathLike[str] | None) -> tuple[UserRule, ...]:
    found = load_user_rules(store.rules)
    if rules is not None:
        found += load_user_rules(Path(rules))
    return found


def classify(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    rules: str | os.PathLike[str] | None = None,
) -> pa.Table:
    """Classify the latest snapshot of ``root`` (or ``scan_id``): risk, rule, claim, confidence.

    Computed from the snapshot (no rescan), with the store's ``rules.toml`` and ``rules``.

    Raises:
        SnapshotNotFound: no snapshot matches.
        RuleInvalid: a rules file is malformed.
    """
    st = _store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    user_rules = _user_rules(st, rules)
    table = load_snapshot(st, scan_id=info.scan_id, columns=CLASSIFY_COLUMNS)
    ctx = protect_context(table, info, st)
    return classify_table(table, ctx, user_rules=user_rules, now_ns=time.time_ns())


def summarize(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    top: int = 20,
    rules: str | os.PathLike[str] | None = None,
) -> Summary:
    """Summarize the latest snapshot of ``root`` (or ``scan_id``).

    Totals, risk mix, pattern groups, staleness, cleanliness score and the largest entries.

    Raises:
        SnapshotNotFound: no snapshot matches.
        RuleInvalid: a rules file is malformed.
    """
    st = _store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    table = classify(store=st, scan_id=info.scan_id, rules=rules)
    return summarize_table(table, info, top=top, now_ns=time.time_ns())


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
    from hygiene_nb.errors import UsageError

    if keep is None and older_than_days is None:
        raise UsageError("say what to prune: --keep N or --older-than DAYS.")
    if keep is not None and keep < 1:
        raise UsageError("--keep must be at least 1 (the latest snapshot always stays).")
    return prune_scans(
        _store(store),
        keep=keep,
        older_than_days=older_than_days,
        now=time.time(),
        dry_run=dry_run,
    )


def store_path(store: StoreArg = None) -> Path:
    """The resolved store directory (for display)."""
    return _store(store).root

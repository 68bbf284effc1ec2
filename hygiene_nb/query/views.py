"""What the notebooks and the report show: history, change, risk over time, review state.

Every view is one call that returns a pandas DataFrame (or a small dataclass) ready to display;
the notebooks hold no logic. Queries over snapshots run in DuckDB, in the SQL subset DuckDB and
Spark share (the store is for both to read as it is: docs/format.md). Nothing here writes
anything but the ledger, through ``api``.

Byte sums follow the summary's rule: each entry adds its own bytes (a directory its own size, a
file its size), so nested entries count once, and a hard-linked inode counts once (at its first
name in path order).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import api
from hygiene_nb.classify.rules import rules_table_markdown
from hygiene_nb.classify.summary import cleanliness, kept_bytes, risk_mix
from hygiene_nb.errors import SnapshotNotFound, UsageError
from hygiene_nb.ledger import DECISIONS, Ledger
from hygiene_nb.models import GroupStats, SizedEntry, Summary
from hygiene_nb.receipts import read_receipt
from hygiene_nb.scan.snapshot import ScanInfo, entry_paths, find_scan, list_scans

__all__ = [
    "DIFF_BY",
    "Coverage",
    "browse_frame",
    "changed_entries",
    "child_growth",
    "classified_as_of_scan",
    "decided_rows",
    "diff",
    "entries_frame",
    "executions",
    "groups_frame",
    "history",
    "human_decisions",
    "ledger_state",
    "pending_counts",
    "pending_decisions",
    "plan_preview",
    "plans",
    "provenance",
    "resolve_scan",
    "review_coverage",
    "risk_frame",
    "risk_history",
    "rules_digest",
    "totals_frame",
    "treemap_nodes",
    "treemap_of",
]

DiffBy = Literal["dir", "group", "risk"]
DIFF_BY: tuple[DiffBy, ...] = ("dir", "group", "risk")
_DIFF_COLUMNS = ["parent", "name", "kind", "depth", "size", "alloc", "dev", "inode", "nlink"]


def resolve_scan(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> ScanInfo:
    """The scan a view is about: ``scan_id``, else the latest of ``root``, else the latest.

    Raises:
        SnapshotNotFound: no snapshot matches.
    """
    st = api.open_store(store)
    return find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)


def classified_as_of_scan(
    info: ScanInfo, *, store: api.StoreArg = None, rules: str | None = None
) -> pa.Table:
    """A snapshot classified with ages measured when it was taken (what reports show).

    Rerunning a report later then says the same; the widget, which is about acting now,
    classifies as of now instead.
    """
    return api.classify_snapshot(
        store=store, scan_id=info.scan_id, rules=rules, now_ns=api.scan_time_ns(info)
    )


def _scans_of(root: str | None, store: api.StoreArg, until: str | None = None) -> list[ScanInfo]:
    """The scans of ``root`` (or of ``until``'s root), oldest first, up to ``until`` if given.

    A report on an older snapshot shows the history as it stood then, not scans made later.
    """
    info = resolve_scan(root, store=store, scan_id=until)
    scans = list_scans(api.open_store(store), root=info.root)
    if until is None:
        return scans
    return [s for s in scans if (s.started_at, s.scan_id) <= (info.started_at, info.scan_id)]


def history(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> pd.DataFrame:
    """One row per scan of ``root``, oldest first: totals and the filesystem's free space.

    With ``scan_id``, only the scans up to that one.

    Columns: ``scan_id``, ``scanned_at`` (finish time, UTC), ``bytes``, ``alloc``, ``files``,
    ``entries``, ``errors``, ``partial``, ``fs_free``, ``fs_total``. A partial scan's totals are
    lower bounds (something could not be read), never zeros.
    """
    rows = [
        {
            "scan_id": s.scan_id,
            "scanned_at": pd.Timestamp(s.finished_at or s.started_at),
            "bytes": s.tree_bytes,
            "alloc": s.tree_alloc,
            "files": s.tree_files,
            "entries": s.entries,
            "errors": s.errors,
            "partial": s.partial,
            "fs_free": s.fs_free,
            "fs_total": s.fs_total,
        }
        for s in _scans_of(root, store, scan_id)
    ]
    frame = pd.DataFrame(rows)
    for column in ("bytes", "alloc", "files"):
        frame[column] = frame[column].astype("Int64")  # None stays missing, never 0
    return frame


def _part_file(info: ScanInfo) -> str:
    return str(Path(info.path) / "part-0.parquet")


def _file_list(scans: list[ScanInfo]) -> str:
    """A SQL list literal of the scans' Parquet files (quotes doubled)."""
    return "[" + ", ".join("'" + _part_file(s).replace("'", "''") + "'" for s in scans) + "]"


def child_growth(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    top: int = 10,
    scan_id: str | None = None,
) -> pd.DataFrame:
    """Recursive bytes of each direct child of ``root`` in every scan (long format).

    With ``scan_id``, only the scans up to that one. A child whose size is unknown (an
    unreadable directory) adds nothing to a sum: its bytes are a lower bound there.

    The ``top`` children largest in the latest scan are named; the rest are summed as
    ``(other)``. Columns: ``scan_id``, ``scanned_at``, ``child``, ``bytes``, ``unknown`` (how
    many of the children summed there could not be read: then ``bytes`` is a lower bound).
    """
    scans = _scans_of(root, store, scan_id)
    query = f"""
        WITH kids AS (
            SELECT filename AS scan, name AS child,
                   CAST(CASE WHEN kind = 'dir' THEN tree_bytes ELSE size END AS BIGINT) AS bytes
            FROM read_parquet({_file_list(scans)}, filename = true, union_by_name = true)
            WHERE depth = 1
        ),
        ranked AS (
            SELECT child, row_number() OVER (ORDER BY bytes DESC, child) AS rank
            FROM kids WHERE scan = ?
        )
        SELECT k.scan AS scan_id,
               CASE WHEN r.rank <= ? THEN k.child ELSE '(other)' END AS child,
               CAST(sum(k.bytes) AS BIGINT) AS bytes,
               CAST(sum(CASE WHEN k.bytes IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS unknown
        FROM kids k LEFT JOIN ranked r ON k.child = r.child
        GROUP BY 1, 2
    """
    with duckdb.connect() as con:
        frame = con.execute(query, [_part_file(scans[-1]), top]).df()
    ids = {_part_file(s): s.scan_id for s in scans}
    when = {s.scan_id: pd.Timestamp(s.finished_at or s.started_at) for s in scans}
    frame["scan_id"] = frame["scan_id"].map(ids)
    frame["scanned_at"] = frame["scan_id"].map(when)
    frame["bytes"] = frame["bytes"].astype("Int64")
    order = frame.groupby("child")["bytes"].max().sort_values(ascending=False).index
    frame["child"] = pd.Categorical(frame["child"], categories=list(order), ordered=True)
    frame = frame.sort_values(["scanned_at", "child"]).reset_index(drop=True)
    frame["child"] = frame["child"].astype(str)
    return frame[["scan_id", "scanned_at", "child", "bytes", "unknown"]]


def _side(store: api.StoreArg, info: ScanInfo, classified: bool, rules: str | None) -> pa.Table:
    """One snapshot's rows for a diff: the diff columns, plus risk and group if classified."""
    if not classified:
        return api.load(store=store, scan_id=info.scan_id, columns=_DIFF_COLUMNS)
    return classified_as_of_scan(info, store=store, rules=rules).select(
        [*_DIFF_COLUMNS, "risk", "group"]
    )


def _pair(
    root: str | None, store: api.StoreArg, old: str | None, new: str | None
) -> tuple[ScanInfo, ScanInfo]:
    """The two scans to compare: by default the latest of ``root`` and the one before it."""
    st = api.open_store(store)
    new_info = resolve_scan(root, store=st, scan_id=new)
    scans = list_scans(st, root=new_info.root)
    if old is None:
        earlier = [s for s in scans if s.started_at < new_info.started_at]
        if not earlier:
            raise SnapshotNotFound(
                f"{new_info.root} has only one snapshot before {new_info.scan_id}; "
                f"scan it again later to see what changed."
            )
        return earlier[-1], new_info
    old_info = find_scan(st, scan_id=old)
    if old_info.root != new_info.root:
        raise UsageError(
            f"snapshots {old_info.scan_id} and {new_info.scan_id} are of different roots "
            f"({old_info.root}, {new_info.root}); compare two scans of one root."
        )
    return old_info, new_info


_ENTRY_DIFF = """
    WITH j0 AS (
        SELECT coalesce(n.parent, o.parent) AS parent,
               coalesce(n.name, o.name) AS name,
               coalesce(n.depth, o.depth) AS depth,
               coalesce(n.kind, o.kind) AS kind,
               {extra}
               o.name IS NOT NULL AS in_old,
               n.name IS NOT NULL AS in_new,
               o.size AS o_size, n.size AS n_size,
               o.kind <> 'dir' AND o.nlink > 1 AS o_linked,
               n.kind <> 'dir' AND n.nlink > 1 AS n_linked,
               o.dev AS o_dev, o.inode AS o_inode, n.dev AS n_dev, n.inode AS n_inode
        FROM old_rows o FULL OUTER JOIN new_rows n
          ON o.parent IS NOT DISTINCT FROM n.parent AND o.name = n.name),
    j1 AS (
        SELECT *,
               CASE WHEN o_linked THEN row_number() OVER (
                   PARTITION BY o_linked, o_dev, o_inode ORDER BY in_new DESC, parent, name)
                   ELSE 1 END AS o_nth,
               CASE WHEN n_linked THEN row_number() OVER (
                   PARTITION BY n_linked, n_dev, n_inode ORDER BY in_old DESC, parent, name)
                   ELSE 1 END AS n_nth
        FROM j0),
    j2 AS (
        SELECT parent, name, depth, kind, {extra_out} in_old, in_new,
               CAST(CASE WHEN in_old AND o_nth = 1 THEN o_size ELSE 0 END AS BIGINT) AS old_bytes,
               CAST(CASE WHEN in_new AND n_nth = 1 THEN n_size ELSE 0 END AS BIGINT) AS new_bytes
        FROM j1)
    SELECT *,
           CASE WHEN NOT in_old THEN 'new'
                WHEN NOT in_new THEN 'gone'
                WHEN new_bytes > old_bytes THEN 'grew'
                WHEN new_bytes < old_bytes THEN 'shrank'
                ELSE 'same' END AS change,
           CASE WHEN depth = 0 THEN '.'
                WHEN depth = 1 THEN name
                ELSE split_part(substr(parent, {start}), '/', 1) END AS top
    FROM j2
"""


def _entry_diff(
    old_rows: pa.Table, new_rows: pa.Table, root: str, classified: bool
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding view ``j``: one row per path in either scan, with its change.

    Every entry adds its own bytes. A hard-linked inode adds them once per scan, at one name,
    preferring a name present in both scans: a new link to an old file adds nothing. ``top``
    is the entry's direct child of the root (``.`` for the root itself).
    """
    extra = 'coalesce(n.risk, o.risk) AS risk, coalesce(n."group", o."group") AS grp,'
    query = _ENTRY_DIFF.format(
        extra=extra if classified else "",
        extra_out="risk, grp," if classified else "",
        start=len(root) + (1 if root.endswith("/") else 2),
    )
    con = duckdb.connect()
    con.register("old_rows", old_rows)
    con.register("new_rows", new_rows)
    con.execute("CREATE TEMP VIEW j AS " + query)
    return con


def diff(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    old: str | None = None,
    new: str | None = None,
    by: DiffBy = "dir",
    rules: str | None = None,
) -> pd.DataFrame:
    """What changed between two scans of one root, by direct child, pattern group or risk.

    Args:
        root: the scanned root (default: the root of the latest scan in the store).
        store: the store.
        old: the earlier scan id (default: the scan before ``new``).
        new: the later scan id (default: the latest scan of ``root``).
        by: ``dir`` (direct children of the root; ``.`` is the root's own entry), ``group``
            (pattern group, ``(none)`` outside every group) or ``risk`` (classified as of each
            scan's time; an entry present in both takes its verdict in the newer scan).
        rules: an extra rules file for ``group``/``risk``.

    Returns:
        One row per key, largest absolute change first: ``old_bytes``, ``new_bytes``, ``delta``,
        and for each of ``new``, ``gone``, ``grew``, ``shrank`` the entries and the bytes that
        change added or removed (``new_bytes``/``gone_bytes`` are the entries' sizes;
        ``grew_bytes``/``shrank_bytes`` the differences).

    Raises:
        SnapshotNotFound: there is no earlier scan to compare with.
        UsageError: ``by`` is unknown, or the scans are of different roots.
    """
    if by not in DIFF_BY:
        raise UsageError(f"by must be one of {', '.join(DIFF_BY)}, not {by!r}.")
    old_info, new_info = _pair(root, store, old, new)
    classified = by != "dir"
    old_rows = _side(store, old_info, classified, rules)
    new_rows = _side(store, new_info, classified, rules)
    key = {"dir": "top", "group": "coalesce(grp, '(none)')", "risk": "risk"}[by]
    with _entry_diff(old_rows, new_rows, old_info.root, classified) as con:
        frame = con.execute(
            f"""
            SELECT {key} AS {by},
                   CAST(sum(old_bytes) AS BIGINT) AS old_bytes,
                   CAST(sum(new_bytes) AS BIGINT) AS new_bytes,
                   CAST(sum(new_bytes) - sum(old_bytes) AS BIGINT) AS delta,
                   CAST(sum(CASE WHEN change = 'new' THEN 1 ELSE 0 END) AS BIGINT) AS new_entries,
                   CAST(sum(CASE WHEN change = 'new' THEN new_bytes ELSE 0 END) AS BIGINT)
                       AS new_entry_bytes,
                   CAST(sum(CASE WHEN change = 'gone' THEN 1 ELSE 0 END) AS BIGINT) AS gone_entries,
                   CAST(sum(CASE WHEN change = 'gone' THEN old_bytes ELSE 0 END) AS BIGINT)
                       AS gone_entry_bytes,
                   CAST(sum(CASE WHEN change = 'grew' THEN 1 ELSE 0 END) AS BIGINT) AS grew_entries,
                   CAST(sum(CASE WHEN change = 'grew' THEN new_bytes - old_bytes ELSE 0 END)
                        AS BIGINT) AS grew_bytes,
                   CAST(sum(CASE WHEN change = 'shrank' THEN 1 ELSE 0 END) AS BIGINT)
                       AS shrank_entries,
                   CAST(sum(CASE WHEN change = 'shrank' THEN old_bytes - new_bytes ELSE 0 END)
                        AS BIGINT) AS shrank_bytes
            FROM j GROUP BY 1
            ORDER BY abs(sum(new_bytes) - sum(old_bytes)) DESC, 1
            """
        ).df()
    frame.attrs.update(old=old_info.scan_id, new=new_info.scan_id, root=old_info.root)
    return frame


def changed_entries(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    old: str | None = None,
    new: str | None = None,
    limit: int = 50,
    relative: bool = False,
) -> pd.DataFrame:
    """The ``limit`` non-directory entries whose bytes changed most between two scans.

    Columns: ``path`` (relative to the root with ``relative``), ``change`` (new, gone, grew,
    shrank), ``old_bytes``, ``new_bytes``, ``delta``. Hard-linked names count once.
    """
    old_info, new_info = _pair(root, store, old, new)
    old_rows = _side(store, old_info, False, None)
    new_rows = _side(store, new_info, False, None)
    with _entry_diff(old_rows, new_rows, old_info.root, False) as con:
        frame = con.execute(
            """
            SELECT CASE WHEN parent IS NULL THEN name
                        WHEN parent = '/' THEN concat_ws('', parent, name)
                        ELSE concat_ws('/', parent, name) END AS path,
                   change, old_bytes, new_bytes,
                   CAST(new_bytes - old_bytes AS BIGINT) AS delta
            FROM j WHERE change <> 'same' AND kind <> 'dir'
            ORDER BY abs(new_bytes - old_bytes) DESC, path LIMIT ?
            """,
            [limit],
        ).df()
    if relative:
        prefix = old_info.root.rstrip("/") + "/"
        frame["path"] = frame["path"].str.removeprefix(prefix)
    frame.attrs.update(old=old_info.scan_id, new=new_info.scan_id, root=old_info.root)
    return frame


def risk_history(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    rules: str | None = None,
    scan_id: str | None = None,
) -> pd.DataFrame:
    """Bytes and entries per risk level in every scan of ``root``, and the cleanliness score.

    Each scan is classified as of its own time, with today's rules. Long format, one row per
    scan and risk: ``scan_id``, ``scanned_at``, ``risk``, ``bytes``, ``alloc``, ``entries``,
    ``score`` (the scan's cleanliness score, repeated on its rows).
    """
    rows = []
    for info in _scans_of(root, store, scan_id):
        table = classified_as_of_scan(info, store=store, rules=rules)
        score = cleanliness(table, partial=info.partial).score
        for level, stats in risk_mix(table).items():
            rows.append(
                {
                    "scan_id": info.scan_id,
                    "scanned_at": pd.Timestamp(info.finished_at),
                    "risk": level,
                    "bytes": stats.bytes,
                    "alloc": stats.alloc,
                    "entries": stats.entries,
                    "score": score,
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Coverage:
    """How much of a snapshot a person has decided on (a decision covers its whole subtree)."""

    scan_id: str
    entries: int
    bytes: int
    reviewed_entries: int
    reviewed_bytes: int
    by_decision: dict[str, tuple[int, int]]  # decision → (entries, bytes)

    @property
    def share_entries(self) -> float:
        """Share of entries covered by a human decision (0 when the snapshot is empty)."""
        return self.reviewed_entries / self.entries if self.entries else 0.0

    @property
    def share_bytes(self) -> float:
        """Share of bytes covered by a human decision (0 when there are no bytes)."""
        return self.reviewed_bytes / self.bytes if self.bytes else 0.0


def decided_rows(paths: pa.ChunkedArray | pa.Array, decided: dict[str, str]) -> np.ndarray:
    """For each path, the decision that covers it (its own, else its nearest decided ancestor).

    Returns an object array holding a decision or ``None``. Sorting once makes every decided
    subtree a contiguous range, so this costs one sort plus four binary searches per decision;
    only the decisions whose ranges hold a path are then applied one by one (a treemap's 2,000
    nodes against a ledger of 100,000 decisions touch a few of them).
    """
    text = np.asarray(paths.to_numpy(zero_copy_only=False), dtype=object)
    out = np.full(text.shape, None, dtype=object)
    if not decided or not text.size:
        return out
    # Arrow sorts UTF-8 bytes, which is code point order: the order numpy compares str in
    order = pc.sort_indices(paths).to_numpy()
    ordered = text[order]
    keys = sorted(decided, key=len)  # ancestors first, so nearer decisions win
    bases = [k.rstrip("/") + "/" for k in keys]
    ends = [b[:-1] + "0" for b in bases]  # '0' sorts right after '/'
    found = [
        np.searchsorted(ordered, np.array(keys, dtype=object), side="left"),
        np.searchsorted(ordered, np.array(keys, dtype=object), side="right"),
        np.searchsorted(ordered, np.array(bases, dtype=object), side="left"),
        np.searchsorted(ordered, np.array(ends, dtype=object), side="left"),
    ]
    own_lo, own_hi, lo, hi = found
    touching = np.flatnonzero((own_hi > own_lo) | (hi > lo))  # still ancestors first
    for k in touching.tolist():
        out[order[own_lo[k] : own_hi[k]]] = decided[keys[k]]
        out[order[lo[k] : hi[k]]] = decided[keys[k]]
    return out


def human_decisions(store: api.StoreArg, root: str) -> dict[str, str]:
    """Path → decision of every keep/delete/unsure a person made at or under ``root``."""
    with Ledger.open(api.open_store(store)) as ledger:
        return {
            a.path: str(a.decision)
            for a in ledger.annotations(under=root)
            if a.is_reviewed and a.by == "human"
        }


def review_coverage(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> Coverage:
    """Share of a snapshot's entries and bytes that carry a human decision (keep/delete/unsure).

    Decisions a remembered rule filled in (``by: rule``) do not count as reviewed.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    wanted = ["path", "kind", "size", "alloc", "dev", "inode", "nlink"]
    table = api.load(store=store, scan_id=info.scan_id, columns=wanted)
    covering = decided_rows(table.column("path"), human_decisions(store, info.root))
    reviewed = np.array([c is not None for c in covering], dtype=bool)
    everything = np.ones(table.num_rows, dtype=bool)
    by_decision = {}
    for decision in DECISIONS:
        mask = covering == decision
        by_decision[decision] = (int(mask.sum()), _bytes(table, mask))
    return Coverage(
        scan_id=info.scan_id,
        entries=table.num_rows,
        bytes=_bytes(table, everything),
        reviewed_entries=int(reviewed.sum()),
        reviewed_bytes=_bytes(table, reviewed),
        by_decision=by_decision,
    )


def _bytes(table: pa.Table, mask: np.ndarray) -> int:
    """Apparent bytes of the masked rows, each hard-linked inode once."""
    return kept_bytes(table, mask.astype(bool))


def pending_decisions(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> pd.DataFrame:
    """Human decisions still waiting: every ``unsure``, and every ``delete`` still on disk.

    "On disk" means present in the snapshot (the latest of ``root`` by default). Columns:
    ``path``, ``decision``, ``note``, ``at``, ``bytes`` (recursive for a directory; missing
    when the path is not in the snapshot).
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    with Ledger.open(api.open_store(store)) as ledger:
        waiting = [
            a for a in ledger.annotations(under=info.root)
            if a.decision in ("unsure", "delete") and a.by == "human"
        ]  # fmt: skip
    table = api.load(
        store=store, scan_id=info.scan_id, columns=["path", "kind", "size", "tree_bytes"]
    )
    wanted = pa.array([a.path for a in waiting], pa.string())
    rows = table.filter(pc.is_in(table.column("path"), value_set=wanted)).to_pylist()
    size = {r["path"]: r["tree_bytes"] if r["kind"] == "dir" else r["size"] for r in rows}
    frame = pd.DataFrame(
        [
            {
                "path": a.path,
                "decision": a.decision,
                "note": a.note or "",
                "at": a.at,
                "bytes": size.get(a.path),
            }
            for a in waiting
            if a.decision == "unsure" or a.path in size
        ],
        columns=["path", "decision", "note", "at", "bytes"],
    )
    frame["bytes"] = frame["bytes"].astype("Int64")
    return frame.sort_values(
        ["decision", "bytes", "path"], ascending=[True, False, True], ignore_index=True
    )


def executions(
    *, store: api.StoreArg = None, limit: int = 20, redact: bool = False
) -> pd.DataFrame:
    """The latest executions (newest first) and whether each batch is still in quarantine.

    With ``redact`` the receipt's path is left out.

    ``in_quarantine`` is True while a batch directory the receipt names exists, False once it
    was purged, and missing when the receipt names none (nothing moved) or cannot be read.
    """
    with Ledger.open(api.open_store(store)) as ledger:
        rows = ledger.executions()
    frame = pd.DataFrame(
        rows,
        columns=["plan_id", "plan_digest", "authorization_id", "authorized_at", "finished_at",
                 "batch_id", "receipt_path", "moved", "skipped", "moved_bytes", "status"],
    )  # fmt: skip
    frame["in_quarantine"] = [_batch_present(p) for p in frame["receipt_path"]]
    if redact:
        frame = frame.drop(columns=["receipt_path"])
    return frame.iloc[::-1].head(limit).reset_index(drop=True)


def _batch_present(receipt_path: str) -> bool | None:
    """Whether a quarantine batch of a receipt still exists (read-only: ``lstat`` only)."""
    try:
        receipt = read_receipt(Path(receipt_path))
    except UsageError:  # gone or unreadable: nothing to say about its batch
        return None
    batches = [b for b in receipt.get("batches") or [] if isinstance(b, dict)]
    where = [str(b["batch_path"]) for b in batches if isinstance(b.get("batch_path"), str)]
    if not where:
        return None
    return any(os.path.lexists(w) for w in where)


def plan_preview(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> dict[str, int]:
    """What ``make_plan`` would put in a plan now (counts and reclaimable bytes), without the disk.

    The same selection as the plan (nested deletes folded, keeps and protected entries left
    out), so its ``reclaim_bytes`` never double counts. Exporting re-checks the disk.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    return api.preview_plan(info.root, store=store, scan_id=info.scan_id)


# -- browsing a classified snapshot (the explore notebook and the annotation widget) -----------

BROWSE_COLUMNS = [
    "path",
    "parent",
    "name",
    "kind",
    "bytes",
    "alloc",
    "files",
    "latest_mtime_ns",
    "risk",
    "rule",
    "group",
    "claim",
    "confidence",
    "error",
    "partial",
]


def browse_frame(table: pa.Table) -> pd.DataFrame:
    """A classified snapshot as the frame the browser and the treemap read.

    ``bytes``/``alloc``/``files`` are recursive for a directory (missing where its subtree could
    not be read: unknown, never zero) and the entry's own for anything else;
    ``latest_mtime_ns`` is the newest modification inside a directory, else the entry's own.
    """
    is_dir = pc.equal(table.column("kind").cast(pa.string()), "dir")
    frame = pd.DataFrame(
        {
            "path": entry_paths(table).to_pandas(),
            "parent": table.column("parent").cast(pa.string()).to_pandas(),
            "name": table.column("name").to_pandas(),
            "kind": table.column("kind").cast(pa.string()).to_pandas(),
            "bytes": pc.if_else(is_dir, table.column("tree_bytes"), table.column("size"))
            .to_pandas()
            .astype("Int64"),
            "alloc": pc.if_else(is_dir, table.column("tree_alloc"), table.column("alloc"))
            .to_pandas()
            .astype("Int64"),
            "files": pc.if_else(is_dir, table.column("tree_files"), pa.scalar(1, pa.int64()))
            .to_pandas()
            .astype("Int64"),
            "latest_mtime_ns": pc.if_else(
                is_dir, table.column("tree_latest_mtime_ns"), table.column("mtime_ns")
            ).to_pandas(),
        }
    )
    for column in ("risk", "rule", "group", "claim", "confidence", "error", "partial"):
        values = table.column(column)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        frame[column] = values.to_pandas()
    return frame[BROWSE_COLUMNS]


def _other_id(parent: str) -> str:
    return parent.rstrip("/") + "/(other)"


def treemap_nodes(
    frame: pd.DataFrame,
    under: str,
    *,
    decisions: dict[str, str] | None = None,
    max_nodes: int = 2000,
    children: int = 50,
) -> pd.DataFrame:
    """Treemap nodes for the directory ``under``: its children and their children.

    At most ``children`` children are named (the largest), each directory child names at most
    as many of its own as keeps the view within ``max_nodes``; the rest of each level is one
    ``(other)`` node, so areas always add up. A node's bytes are recursive; a directory whose
    subtree could not be read has no bytes (shown as 0 area, risk ``unknown``).

    Returns:
        Columns ``id`` (the path; ``…/(other)`` for a bucket), ``label``, ``parent``, ``bytes``,
        ``risk`` (empty for buckets), ``decision`` (the covering human decision, or None).
    """
    decisions = decisions or {}
    per_child = max(1, (max_nodes - 2 - children) // max(1, children) - 1)
    rows: list[dict[str, object]] = []

    def level(parent: str, kids: pd.DataFrame, keep: int) -> list[str]:
        kids = kids.assign(b=kids["bytes"].fillna(0).astype("int64"))
        kids = kids.sort_values(["b", "name"], ascending=[False, True])
        named, rest = kids.head(keep), kids.iloc[keep:]
        columns = (named["path"], named["name"], named["b"].tolist(), named["risk"])
        for path, name, size, risk in zip(*columns, strict=True):
            rows.append({"id": path, "label": name, "parent": parent, "bytes": size, "risk": risk})
        if len(rest):
            rows.append(
                {
                    "id": _other_id(parent),
                    "label": f"({len(rest)} more)",
                    "parent": parent,
                    "bytes": int(rest["b"].sum()),
                    "risk": "",
                }
            )
        return [p for p, k in zip(named["path"], named["kind"], strict=True) if k == "dir"]

    me = frame[frame["path"] == under]
    top = level(under, frame[frame["parent"] == under], children)
    grand = frame[frame["parent"].isin(top)]
    for directory, kids in grand.groupby("parent", sort=False):
        level(str(directory), kids, per_child)
    nodes = pd.DataFrame(rows, columns=["id", "label", "parent", "bytes", "risk"])
    # a parent is at least the sum of what is drawn inside it (branchvalues="total")
    inner = nodes.groupby("parent")["bytes"].sum()
    nodes["bytes"] = [
        max(b, int(inner.get(i, 0))) for i, b in zip(nodes["id"], nodes["bytes"], strict=True)
    ]
    own = int(me["bytes"].fillna(0).iloc[0]) if len(me) else 0
    root = {
        "id": under,
        "label": under.rstrip("/").rsplit("/", 1)[-1] or "/",
        "parent": "",
        "bytes": max(own, int(nodes.loc[nodes["parent"] == under, "bytes"].sum())),
        "risk": str(me["risk"].iloc[0]) if len(me) else "",
    }
    nodes = pd.concat([pd.DataFrame([root]), nodes], ignore_index=True)
    covering = decided_rows(pa.array(nodes["id"], pa.string()), decisions)
    nodes["decision"] = [
        None if i.endswith("/(other)") else d for i, d in zip(nodes["id"], covering, strict=True)
    ]
    return nodes


# -- tables of a summary, for display ------------------------------------------------------


def totals_frame(summary: Summary, *, redact: bool = False) -> pd.DataFrame:
    """The summary's totals as a two-column table (``what``, ``value``); unknowns stay missing.

    With ``redact`` the root's path is left out.
    """
    score = summary.cleanliness
    rows: list[tuple[str, object]] = [
        *([] if redact else [("root", summary.root)]),
        ("snapshot", summary.scan_id),
        ("scanned at", summary.scanned_at),
        ("apparent bytes", summary.tree_bytes),
        ("allocated bytes", summary.tree_alloc),
        ("files", summary.files),
        ("directories", summary.dirs),
        ("symlinks", summary.symlinks),
        ("unreadable entries", summary.errors),
        ("excluded entries", summary.excluded),
        ("partial scan (totals are lower bounds)", summary.partial),
        ("filesystem free bytes", summary.fs_free),
        ("cleanliness score (0-100)", score.score if score else None),
    ]
    return pd.DataFrame(rows, columns=["what", "value"]).astype({"value": object})


def entries_frame(entries: Sequence[SizedEntry]) -> pd.DataFrame:
    """Ranked entries (largest first) as a table: path, kind, bytes, files, risk, rule, claim."""
    return pd.DataFrame(
        [
            {
                "path": e.path,
                "kind": e.kind,
                "bytes": e.bytes,
                "files": e.files,
                "risk": e.risk,
                "rule": e.rule,
                "claim": e.claim,
            }
            for e in entries
        ],
        columns=["path", "kind", "bytes", "files", "risk", "rule", "claim"],
    ).astype({"files": "Int64"})


def groups_frame(groups: Sequence[GroupStats], *, redact: bool = False) -> pd.DataFrame:
    """Pattern groups: places found (outermost only), bytes, files, largest place.

    With ``redact`` the largest place (a path) is left out.
    """
    frame = pd.DataFrame(
        [
            {
                "group": g.group,
                "places": g.count,
                "bytes": g.bytes,
                "files": g.files,
                "largest": g.entries[0].path if g.entries else None,
            }
            for g in sorted(groups, key=lambda g: (-g.bytes, g.group))
        ],
        columns=["group", "places", "bytes", "files", "largest"],
    )
    return frame.drop(columns=["largest"]) if redact else frame


def risk_frame(summary: Summary) -> pd.DataFrame:
    """Bytes and entries per risk level, with what deleting safe (then + caution) would free."""
    rows = []
    for level, stats in summary.risk.items():
        freed = summary.reclaimable.get(level)
        rows.append(
            {
                "risk": level,
                "bytes": stats.bytes,
                "alloc": stats.alloc,
                "entries": stats.entries,
                "reclaimable_cumulative": freed.bytes if freed else None,
            }
        )
    return pd.DataFrame(rows).astype({"reclaimable_cumulative": "Int64"})


def ledger_state(*, store: api.StoreArg = None, root: str) -> dict[str, object]:
    """A fingerprint of the ledger's decisions under ``root``: counts and a digest of every row."""
    with Ledger.open(api.open_store(store)) as ledger:
        found = ledger.annotations(under=root)
    digest = hashlib.sha256()
    for a in found:
        digest.update(repr((a.path_raw, a.decision, a.note, a.by, a.at)).encode())
    return {
        "annotations": len(found),
        "decisions": {d: sum(a.decision == d for a in found) for d in DECISIONS},
        "digest": "sha256:" + digest.hexdigest(),
    }


def treemap_of(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    under: str | None = None,
) -> pd.DataFrame:
    """Treemap nodes of a snapshot (classified as of the scan), from ``under`` (default: root)."""
    info = resolve_scan(root, store=store, scan_id=scan_id)
    table = classified_as_of_scan(info, store=store)
    return treemap_nodes(
        browse_frame(table), under or info.root, decisions=human_decisions(store, info.root)
    )


def rules_digest(*, store: api.StoreArg = None, rules: str | None = None) -> str:
    """``sha256:`` of the rules in force: the built-in table and the user's rules files."""
    digest = hashlib.sha256(rules_table_markdown().encode())
    for path in (api.open_store(store).rules, Path(rules) if rules else None):
        if path is not None and path.is_file():
            digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()


def provenance(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    parameters: dict[str, object] | None = None,
    redact: bool = False,
) -> pd.DataFrame:
    """What a report was made from: snapshot, rules, ledger state, versions, parameters.

    With ``redact`` the root, the host and the parameters (which hold paths) are left out.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    ledger = ledger_state(store=store, root=info.root)
    versions = {name: _version(name) for name in _VERSIONED}
    rows: list[tuple[str, object]] = [
        ("snapshot", info.scan_id),
        *([] if redact else [("root", info.root), ("host", info.host)]),
        ("scanned", f"{info.started_at} → {info.finished_at}"),
        ("walker", info.walker),
        ("rules", rules_digest(store=store)),
        (
            "ledger",
            f"{ledger['annotations']} annotations {ledger['decisions']}, {ledger['digest']}",
        ),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items())),
    ]
    if not redact:
        rows.append(("parameters", json.dumps(parameters or {}, sort_keys=True, default=str)))
    return pd.DataFrame(rows, columns=["what", "value"])


_VERSIONED = ("hygiene-nb", "pyarrow", "duckdb", "pandas", "plotly", "papermill", "nbconvert")


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def pending_counts(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> pd.DataFrame:
    """How many pending decisions of each kind, and their bytes (no paths, no notes).

    ``unknown`` counts entries whose size is not known (not in the snapshot, or unreadable):
    where it is not 0, ``bytes`` is a lower bound.
    """
    pending = pending_decisions(root, store=store, scan_id=scan_id)
    pending = pending.assign(unknown=pending["bytes"].isna().astype("int64"))
    counts = pending.groupby("decision").agg(
        entries=("path", "size"), bytes=("bytes", "sum"), unknown=("unknown", "sum")
    )
    return counts.reindex(["delete", "unsure"], fill_value=0).rename_axis("decision").reset_index()


def plans(root: str | None = None, *, store: api.StoreArg = None) -> pd.DataFrame:
    """The plans issued for ``root``, newest first: id, created, expiry, candidates, state."""
    info = resolve_scan(root, store=store)
    with Ledger.open(api.open_store(store)) as ledger:
        issued = ledger.plans(root=info.root)
    rows = [
        (p.plan_id, p.created_at, p.expires_at, p.candidates, p.reclaim_bytes, p.state)
        for p in reversed(issued)
    ]
    columns = ["plan_id", "created_at", "expires_at", "candidates", "reclaim_bytes", "state"]
    return pd.DataFrame(rows, columns=columns)

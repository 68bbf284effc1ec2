"""A root over time: the scan a view is about, its scans, totals, child growth, risk mix.

Every scan's rows are read by DuckDB straight from the snapshots' Parquet files (in the SQL
subset DuckDB and Spark share: docs/format.md); a scan is classified as of its own time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa

from hygiene_nb import api
from hygiene_nb.classify.queries import cleanliness_of, risk_of, sql_literal
from hygiene_nb.scan.index import ScanInfo, find_scan, list_scans
from hygiene_nb.scan.snapshot import query_engine

__all__ = [
    "child_growth",
    "classified_as_of_scan",
    "history",
    "resolve_scan",
    "risk_history",
]


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
    return "[" + ", ".join(sql_literal(_part_file(s)) for s in scans) + "]"


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
    with query_engine() as con:
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
        with query_engine() as con:
            api.open_entries(con, info, store=store, rules=rules, now_ns=api.scan_time_ns(info))
            score = cleanliness_of(con, partial=info.partial).score
            mix = risk_of(con)
        for level, stats in mix.items():
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

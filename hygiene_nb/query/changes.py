"""What changed between two scans of one root: by child, pattern group or risk, and by entry.

Both scans' rows are joined in DuckDB on their exact bytes and folded into parts as they come
(``_PARTS``, ``_ENTRY_DIFF``: SQL that Spark also reads, but for the filter of a join made in
passes, which takes DuckDB's hash as unsigned). Every entry adds its own bytes and a
hard-linked inode counts once, so the deltas add up to the change in the root's total.
"""

from __future__ import annotations

from typing import Literal

import duckdb
import pandas as pd

from hygiene_nb import api
from hygiene_nb.classify.filetypes import EXTENSION_SQL, NO_EXTENSION, category_sql
from hygiene_nb.classify.queries import PATH_SQL
from hygiene_nb.errors import SnapshotNotFound, UsageError
from hygiene_nb.query.breakdowns import OwnerBy, age_bucket_sql, id_names, owner_label
from hygiene_nb.query.history import resolve_scan
from hygiene_nb.scan.index import ScanInfo, find_scan, list_scans
from hygiene_nb.scan.snapshot import query_engine

__all__ = ["DIFF_BY", "DiffBy", "changed_entries", "diff"]

DiffBy = Literal["dir", "group", "risk", "owner", "owner_group", "type", "category", "age"]
DIFF_BY: tuple[DiffBy, ...] = (
    "dir",
    "group",
    "risk",
    "owner",
    "owner_group",
    "type",
    "category",
    "age",
)
# The keys that count regular files only (a directory has no type, and the histogram of ages
# is one of files): their deltas add up to the change in the files' bytes.
_FILES_ONLY = ("type", "category", "age")
_DIFF_COLUMNS = ["parent", "name", "kind", "depth", "size", "alloc", "dev", "inode", "nlink"]


def _open_side(
    con: duckdb.DuckDBPyConnection,
    name: str,
    store: api.StoreArg,
    info: ScanInfo,
    classified: bool,
    rules: str | None,
) -> None:
    """One snapshot's rows as view ``name``, read from its file (verdicts as of its scan)."""
    api.open_entries(
        con,
        info,
        store=store,
        classified=classified,
        rules=rules,
        now_ns=api.scan_time_ns(info),
        name=name,
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


# The full outer join of both scans, read once: its rows are folded into ``parts`` as they come,
# so the join is never kept. Rows that share a key, a kind, a side and a change are one part
# with their count and byte sums; a row that ``{alone}`` holds (a hard-linked name, which must
# be ranked, and whatever else the caller lists row by row) is a part of its own and keeps its
# row numbers, its inode and its path. Paths are matched on their exact bytes: the raw columns,
# set only where a name is not valid UTF-8, tell a look-alike from a literal name. ``{share}``
# takes the rows of one pass (``join_passes``), or is empty for all of them.
_PARTS = """
    SELECT key, kind, in_old, in_new,
           CASE WHEN alone THEN NULL
                WHEN NOT in_old THEN 'new'
                WHEN NOT in_new THEN 'gone'
                WHEN n_size > o_size THEN 'grew'
                WHEN n_size < o_size THEN 'shrank'
                ELSE 'same' END AS change,
           CASE WHEN alone THEN o_row END AS o_row,
           CASE WHEN alone THEN n_row END AS n_row,
           o_linked, n_linked,
           CASE WHEN o_linked THEN o_dev END AS o_dev,
           CASE WHEN o_linked THEN o_inode END AS o_inode,
           CASE WHEN n_linked THEN n_dev END AS n_dev,
           CASE WHEN n_linked THEN n_inode END AS n_inode,
           CASE WHEN o_linked OR n_linked THEN parent END AS l_parent,
           CASE WHEN o_linked OR n_linked THEN name END AS l_name,
           CAST(count(*) AS BIGINT) AS entries,
           CAST(sum(CASE WHEN in_old THEN o_size ELSE 0 END) AS BIGINT) AS old_bytes,
           CAST(sum(CASE WHEN in_new THEN n_size ELSE 0 END) AS BIGINT) AS new_bytes
    FROM (
        SELECT {key} AS key, parent, name, kind, in_old, in_new, o_size, n_size, o_row, n_row,
               o_linked, o_dev, o_inode, n_linked, n_dev, n_inode,
               o_linked OR n_linked OR {alone} AS alone
        FROM (
            SELECT coalesce(n.parent, o.parent) AS parent,
                   coalesce(n.name, o.name) AS name,
                   coalesce(n.depth, o.depth) AS depth,
                   coalesce(n.kind, o.kind) AS kind,
                   {extra}
                   o.name IS NOT NULL AS in_old,
                   n.name IS NOT NULL AS in_new,
                   o.size AS o_size, n.size AS n_size,
                   o.row_no AS o_row, n.row_no AS n_row,
                   coalesce(o.kind <> 'dir' AND o.nlink > 1, false) AS o_linked,
                   o.dev AS o_dev, o.inode AS o_inode,
                   coalesce(n.kind <> 'dir' AND n.nlink > 1, false) AS n_linked,
                   n.dev AS n_dev, n.inode AS n_inode
            -- an excluded entry counts nowhere (it was never read), on either side
            FROM (SELECT * FROM old_rows WHERE NOT coalesce(excluded, false){share}) o
            FULL OUTER JOIN (SELECT * FROM new_rows WHERE NOT coalesce(excluded, false){share}) n
              ON o.parent IS NOT DISTINCT FROM n.parent AND o.name = n.name
             AND o.parent_raw IS NOT DISTINCT FROM n.parent_raw
             AND o.name_raw IS NOT DISTINCT FROM n.name_raw) r) a
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
"""

# Each scan's names of one hard-linked inode ranked (a name present in both scans first, then
# by path), over the linked parts only; the first counts the inode's bytes. A part of many rows
# holds no linked name, so its sums and its change stand as they are.
_ENTRY_DIFF = """
    WITH lo AS (
        SELECT o_row, row_number() OVER (
                   PARTITION BY o_dev, o_inode
                   ORDER BY in_new DESC, l_parent, l_name, o_row) AS o_nth
        FROM parts WHERE o_linked),
    ln AS (
        SELECT n_row, row_number() OVER (
                   PARTITION BY n_dev, n_inode
                   ORDER BY in_old DESC, l_parent, l_name, n_row) AS n_nth
        FROM parts WHERE n_linked),
    counted AS (
        SELECT p.key, p.kind, p.in_old, p.in_new, p.entries, p.change,
               CAST(CASE WHEN coalesce(lo.o_nth, 1) = 1 THEN p.old_bytes ELSE 0 END
                    AS BIGINT) AS old_bytes,
               CAST(CASE WHEN coalesce(ln.n_nth, 1) = 1 THEN p.new_bytes ELSE 0 END
                    AS BIGINT) AS new_bytes
        FROM parts p
        LEFT JOIN lo ON lo.o_row = p.o_row
        LEFT JOIN ln ON ln.n_row = p.n_row)
    SELECT key, kind, in_old, in_new, entries, old_bytes, new_bytes,
           coalesce(change,
                    CASE WHEN NOT in_old THEN 'new'
                         WHEN NOT in_new THEN 'gone'
                         WHEN new_bytes > old_bytes THEN 'grew'
                         WHEN new_bytes < old_bytes THEN 'shrank'
                         ELSE 'same' END) AS change
    FROM counted
"""


# The join holds one scan's rows in a hash table: 300-310 MB for the 1M-entry bench tree
# (2026-12-07), so about 300 bytes a row, and the query reads and folds besides (half as much
# again). Past the query memory it would spill to disk (5M entries: 9.7 s). Instead, a larger
# pair of scans is joined in passes, each over the paths that hash to it, so that a path's
# rows in both scans meet in the same pass, and one pass's rows fit in the query memory at
# this many bytes a row (as the paths spread, about evenly). Each pass reads both files again:
# past ``MAX_JOIN_PASSES`` (5M rows under a query memory of about 35 MB) the join spills.
JOIN_BYTES_PER_ROW = 450
MAX_JOIN_PASSES = 64


def join_passes(con: duckdb.DuckDBPyConnection, rows: int) -> int:
    """In how many passes to join scans of up to ``rows`` rows within ``con``'s memory limit."""
    setting = con.execute("SELECT current_setting('memory_limit')").fetchone()
    limit = memory_bytes(str(setting[0])) if setting else None
    if not limit:
        return 1
    return min(MAX_JOIN_PASSES, max(1, -(-rows * JOIN_BYTES_PER_ROW // limit)))


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_bytes(text: str) -> int | None:
    """DuckDB's display of a memory size (``488.2 MiB``, ``2.0 GiB``) in bytes; None if not one."""
    number, _, unit = text.strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        return None
    scale = _UNITS.get(unit.strip().lower())
    return None if scale is None or value <= 0 else int(value * scale)


def _entry_diff(
    store: api.StoreArg,
    old_info: ScanInfo,
    new_info: ScanInfo,
    key: str,
    classified: bool = False,
    rules: str | None = None,
    alone: str = "false",
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding view ``j``: the paths of either scan in parts, with their change.

    ``key`` is an SQL expression over the path's row (``parent``, ``name``, ``depth``, ``kind``,
    ``top``, ``uid``, ``gid``, ``age``; ``risk`` and ``grp`` when ``classified``), the only
    value of the row that ``j`` keeps besides ``kind``, ``in_old``, ``in_new``, ``old_bytes``,
    ``new_bytes`` and ``change``. A row of ``j`` is a part: the ``entries`` paths of one key,
    kind, side and change, their bytes summed; a path for which ``alone`` (an SQL condition over
    the same row) holds is a part of its own. Every entry adds its own bytes. A hard-linked
    inode adds them once per scan, at one name, preferring a name present in both scans: a new
    link to an old file adds nothing. ``top`` is the entry's direct child of the root (``.``
    for the root itself); ``uid``, ``gid`` and ``age`` are the newer scan's where the entry is
    in both. Paths are matched on their exact bytes.
    """
    extra = 'coalesce(n.risk, o.risk) AS risk, coalesce(n."group", o."group") AS grp,'
    extra = extra if classified else ""
    # the owner and the age a row is counted under: the newer scan's where it is in both
    extra += "coalesce(n.uid, o.uid) AS uid, coalesce(n.gid, o.gid) AS gid,"
    new_age = age_bucket_sql(api.scan_time_ns(new_info), "n.mtime_ns")
    old_age = age_bucket_sql(api.scan_time_ns(old_info), "o.mtime_ns")
    extra += f"CASE WHEN n.name IS NOT NULL THEN {new_age} ELSE {old_age} END AS age,"
    start = len(old_info.root) + (1 if old_info.root.endswith("/") else 2)
    extra += (
        "CASE WHEN coalesce(n.depth, o.depth) = 0 THEN '.'"
        " WHEN coalesce(n.depth, o.depth) = 1 THEN coalesce(n.name, o.name)"
        f" ELSE split_part(substr(coalesce(n.parent, o.parent), {start}), '/', 1) END AS top,"
    )
    con = query_engine()
    _open_side(con, "old_rows", store, old_info, classified, rules)
    _open_side(con, "new_rows", store, new_info, classified, rules)
    passes = join_passes(con, max(old_info.entries, new_info.entries))
    for n in range(passes):
        # by the whole path (a directory's children spread over the passes); the root's row
        # has no parent, hashed as the empty text on both sides
        share = "" if passes == 1 else f" AND hash(coalesce(parent, ''), name) % {passes} = {n}"
        parts = _PARTS.format(key=key, extra=extra, alone=alone, share=share)
        con.execute(("CREATE TEMP TABLE parts AS " if n == 0 else "INSERT INTO parts ") + parts)
    con.execute("CREATE TEMP VIEW j AS " + _ENTRY_DIFF)
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
    """What changed between two scans of one root: by child, pattern group, risk, owner, type, age.

    Args:
        root: the scanned root (default: the root of the latest scan in the store).
        store: the store.
        old: the earlier scan id (default: the scan before ``new``).
        new: the later scan id (default: the latest scan of ``root``).
        by: ``dir`` (direct children of the root; ``.`` is the root's own entry), ``group``
            (pattern group, ``(none)`` outside every group) or ``risk`` (classified as of each
            scan's time; an entry present in both takes its verdict in the newer scan),
            ``owner``/``owner_group`` (the entry's user or group, named as the scans recorded;
            an entry in both counts under its newer owner: who grew most), ``type``
            (extension) or ``category`` of the regular files, or ``age`` (the files' mtime
            age bucket, ``breakdowns.AGE_BUCKETS``, at the newer scan's time, or the older's
            for a file gone since). ``type``, ``category`` and ``age`` count regular files
            only, so their deltas add up to the change in the files' bytes.
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
    classified = by in ("group", "risk")
    key = {
        "dir": "top",
        "group": "coalesce(grp, '(none)')",
        "risk": "risk",
        "owner": "uid",
        "owner_group": "gid",
        "type": EXTENSION_SQL,
        "category": category_sql(),
        "age": "age",
    }[by]
    where = "WHERE kind = 'file'" if by in _FILES_ONLY else ""
    with _entry_diff(store, old_info, new_info, key, classified, rules) as con:
        frame = con.execute(
            f"""
            SELECT key AS {by},
                   CAST(sum(old_bytes) AS BIGINT) AS old_bytes,
                   CAST(sum(new_bytes) AS BIGINT) AS new_bytes,
                   CAST(sum(new_bytes) - sum(old_bytes) AS BIGINT) AS delta,
                   CAST(sum(CASE WHEN change = 'new' THEN entries ELSE 0 END) AS BIGINT)
                       AS new_entries,
                   CAST(sum(CASE WHEN change = 'new' THEN new_bytes ELSE 0 END) AS BIGINT)
                       AS new_entry_bytes,
                   CAST(sum(CASE WHEN change = 'gone' THEN entries ELSE 0 END) AS BIGINT)
                       AS gone_entries,
                   CAST(sum(CASE WHEN change = 'gone' THEN old_bytes ELSE 0 END) AS BIGINT)
                       AS gone_entry_bytes,
                   CAST(sum(CASE WHEN change = 'grew' THEN entries ELSE 0 END) AS BIGINT)
                       AS grew_entries,
                   CAST(sum(CASE WHEN change = 'grew' THEN new_bytes - old_bytes ELSE 0 END)
                        AS BIGINT) AS grew_bytes,
                   CAST(sum(CASE WHEN change = 'shrank' THEN entries ELSE 0 END) AS BIGINT)
                       AS shrank_entries,
                   CAST(sum(CASE WHEN change = 'shrank' THEN old_bytes - new_bytes ELSE 0 END)
                        AS BIGINT) AS shrank_bytes
            FROM j {where} GROUP BY 1
            ORDER BY abs(sum(new_bytes) - sum(old_bytes)) DESC, 1
            """
        ).df()
    if by in ("owner", "owner_group"):
        which: OwnerBy = "user" if by == "owner" else "group"
        names = {**id_names(old_info, which), **id_names(new_info, which)}
        frame[by] = [owner_label(v, names, which) for v in frame[by]]
    elif by == "type":
        frame[by] = [v if v != NO_EXTENSION else "(none)" for v in frame[by]]
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
    # only a file or link whose bytes may have changed needs its path (a hard-linked name's
    # count may change with its rank alone): a superset of the rows listed
    maybe = (
        "kind <> 'dir' AND (in_old <> in_new OR o_size IS DISTINCT FROM n_size"
        " OR o_linked OR n_linked)"
    )
    key = f"CASE WHEN {maybe} THEN {PATH_SQL} END"
    with _entry_diff(store, old_info, new_info, key, alone=maybe) as con:
        frame = con.execute(
            """
            SELECT key AS path,
                   change, old_bytes, new_bytes,
                   CAST(new_bytes - old_bytes AS BIGINT) AS delta
            FROM j WHERE change <> 'same' AND kind <> 'dir'
            ORDER BY abs(new_bytes - old_bytes) DESC, path, change LIMIT ?
            """,
            [limit],
        ).df()
    if relative:
        prefix = old_info.root.rstrip("/") + "/"
        frame["path"] = frame["path"].str.removeprefix(prefix)
    frame.attrs.update(old=old_info.scan_id, new=new_info.scan_id, root=old_info.root)
    return frame

"""Who, what kind, how old: a snapshot broken down by owner, by file type and by age.

Each view is one query over the snapshot (``by_owner`` also over its kept verdicts, for the
reclaimable bytes), in the SQL subset DuckDB and Spark share, and returns a DataFrame. Byte
sums follow the summary's rule: an entry adds its own bytes and a hard-linked inode counts once,
at its first name; excluded entries count nowhere. Owners are the snapshot's numeric ids, named
with the names the scan recorded (``uid 1003`` where it recorded none: an account removed since,
or one the scanning host did not know); a snapshot written before owners were recorded says
``owner unknown``. docs/breakdowns.md shows one example of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import duckdb
import pandas as pd

from hygiene_nb import api
from hygiene_nb.classify.filetypes import EXTENSION_SQL, NO_EXTENSION, category_of, category_sql
from hygiene_nb.classify.queries import PATH_SQL
from hygiene_nb.errors import UsageError
from hygiene_nb.query.history import resolve_scan
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.owners import UNKNOWN_OWNER
from hygiene_nb.scan.snapshot import query_engine

__all__ = [
    "AGE_BUCKETS",
    "AGE_EDGES_DAYS",
    "AgeBy",
    "OwnerBy",
    "TypeBy",
    "age_bucket_sql",
    "age_histogram",
    "by_owner",
    "by_type",
    "id_names",
    "owner_label",
]

OwnerBy = Literal["user", "group"]
TypeBy = Literal["extension", "category"]
AgeBy = Literal["user", "group", "extension", "category"]
OWNER_BY: tuple[OwnerBy, ...] = ("user", "group")
TYPE_BY: tuple[TypeBy, ...] = ("extension", "category")
AGE_BY: tuple[AgeBy, ...] = ("user", "group", "extension", "category")

# Bucket edges, in days of mtime age at the scan's time; the label of each bucket.
AGE_EDGES_DAYS = (1, 7, 30, 90, 365, 1095)
AGE_BUCKETS = (
    "under 1 day",
    "1-7 days",
    "7-30 days",
    "30-90 days",
    "90 days-1 year",
    "1-3 years",
    "3 years or more",
)
FUTURE = "in the future"  # an mtime after the scan (a clock set wrong, an archive's dates)

_NS_PER_DAY = 86_400 * 10**9
_COUNTED = "NOT coalesce(excluded, false)"
_LINKED = "(coalesce(nlink, 1) > 1 AND kind <> 'dir')"
# Each row and whether it adds its bytes: a hard-linked inode only at its first name.
_ONCE = f"""
    SELECT e.*, (f.nth IS NULL OR f.nth = 1) AS once FROM entries e LEFT JOIN (
        SELECT row_no, row_number() OVER (PARTITION BY dev, inode ORDER BY row_no) AS nth
        FROM entries WHERE {_LINKED} AND {_COUNTED}) f ON f.row_no = e.row_no
    WHERE NOT coalesce(e.excluded, false)
"""
# The same of classified rows: the classification marks each row's ``counted`` (its first
# counted name, for a hard-linked inode), so no row is joined to the window.
_ONCE_CLASSIFIED = f"""
    SELECT e.*, coalesce(e.counted, false) AS once FROM entries e WHERE {_COUNTED}
"""


def id_names(info: ScanInfo, by: OwnerBy) -> Mapping[str, str]:
    """The names the scan recorded for its uids (``user``) or gids (``group``)."""
    return info.user_names if by == "user" else info.group_names


def owner_label(value: object, names: Mapping[str, str], by: OwnerBy) -> str:
    """An owner id as people read it: its recorded name, else ``uid N``/``gid N``.

    ``scan.owners.owner_name`` says the same of one scan; this takes the names of several (a
    diff's two) and the missing values of a DataFrame column.
    """
    if value is None or pd.isna(value):  # type: ignore[call-overload]
        return UNKNOWN_OWNER
    number = int(value)  # type: ignore[call-overload]
    return names.get(str(number)) or f"{'uid' if by == 'user' else 'gid'} {number}"


def _ids_column(by: OwnerBy) -> str:
    return "uid" if by == "user" else "gid"


def _tops_sql(ids: str, root: str) -> str:
    """Per owner and direct child of the root, the bytes inside that child (``once``'s rows).

    The child is the segment of each row's parent just below the root (``split_part``, not a
    cut of the text: no string is made per row), so the sums are held per owner and child
    alone. (Summed per parent directory first, they were held per directory: their memory
    grew with the tree, about 130 MiB more at 5M entries than at 1M.)
    """
    # a parent's text starts with the root's, then "/" (one "/" for the root "/"): the child is
    # the part after as many slashes as that prefix holds (a root "//x" keeps both of its own)
    below_root = (root if root.endswith("/") else root + "/").count("/") + 1
    return f"""
        SELECT id, top, CAST(sum(bytes) AS BIGINT) AS bytes
        FROM (SELECT {ids} AS id,
                     CASE WHEN depth = 1 THEN name
                          ELSE split_part(parent, '/', {below_root}) END AS top,
                     CASE WHEN once THEN size ELSE 0 END AS bytes
              FROM once WHERE depth > 1 OR (depth = 1 AND kind = 'dir')) g
        GROUP BY id, top
    """


def _bytes(condition: str, column: str = "size") -> str:
    return f"CAST(coalesce(sum(CASE WHEN {condition} THEN {column} ELSE 0 END), 0) AS BIGINT)"


def _timestamps(frame: pd.DataFrame, *columns: str) -> None:
    for column in columns:
        frame[column] = pd.to_datetime(frame[column], unit="ns", utc=True)


def _share(frame: pd.DataFrame) -> None:
    total = int(frame["bytes"].sum()) if len(frame) else 0
    frame["share"] = frame["bytes"] / total if total else 0.0


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise UsageError(f"{what} must be one of {', '.join(allowed)}, not {value!r}.")


def _open(
    con: duckdb.DuckDBPyConnection,
    info: ScanInfo,
    store: api.StoreArg,
    *,
    classified: bool,
    rules: str | None,
    now_ns: int | None,
) -> None:
    api.open_entries(con, info, store=store, classified=classified, rules=rules, now_ns=now_ns)


def by_owner(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    by: OwnerBy = "user",
    top_dirs: int = 3,
    rules: str | None = None,
    as_of_scan: bool = False,
) -> pd.DataFrame:
    """What each owner holds in a snapshot, largest first.

    Args:
        root: the scanned root (default: the latest scan's).
        store: the store.
        scan_id: the scan (default: the latest of ``root``).
        by: ``user`` (the entries' uid) or ``group`` (their gid).
        top_dirs: how many of the root's direct children to name per owner, ranked by the
            bytes that owner holds inside them (not by who owns the directory).
        rules: an extra rules file for the reclaimable bytes.
        as_of_scan: measure the classification's ages when the scan finished (reports).

    Returns:
        One row per owner: ``owner`` (name), ``uid`` or ``gid``, ``entries``, ``files``,
        ``bytes``, ``alloc``, ``share`` (of the snapshot's bytes), ``reclaimable_safe`` and
        ``reclaimable_caution`` (safe plus caution, as the summary counts them: an inode only
        when all its names are chosen), ``newest`` and ``oldest`` (mtimes, UTC) and ``top_dirs``
        (a list of ``{"path", "bytes"}``).

    Raises:
        SnapshotNotFound: no snapshot matches.
        UsageError: ``by`` is unknown or ``top_dirs`` negative.
    """
    _check(by, OWNER_BY, "by")
    if top_dirs < 0:
        raise UsageError(f"top_dirs must be 0 or more, not {top_dirs}.")
    info = resolve_scan(root, store=store, scan_id=scan_id)
    ids = _ids_column(by)
    now_ns = api.scan_time_ns(info) if as_of_scan else None
    with query_engine() as con:
        _open(con, info, store, classified=True, rules=rules, now_ns=now_ns)
        con.execute(f"CREATE TEMP VIEW once AS {_ONCE_CLASSIFIED}")
        frame = con.execute(
            f"""
            SELECT {ids}, count(*) AS entries,
                   CAST(sum(CASE WHEN kind = 'file' THEN 1 ELSE 0 END) AS BIGINT) AS files,
                   {_bytes("once")} AS bytes, {_bytes("once", "alloc")} AS alloc,
                   max(mtime_ns) AS newest, min(mtime_ns) AS oldest
            FROM once GROUP BY {ids}
            """
        ).df()
        freed = {
            level: dict(con.execute(_freed_sql(ids, levels)).fetchall())
            for level, levels in (("safe", "'safe'"), ("caution", "'safe', 'caution'"))
        }
        tops = con.execute(
            f"""
            SELECT id, top, bytes FROM (
                SELECT id, top, bytes, row_number() OVER (
                           PARTITION BY id ORDER BY bytes DESC, top) AS nth
                FROM ({_tops_sql(ids, info.root)}) t) r
            WHERE nth <= {int(top_dirs)} ORDER BY id, nth
            """
        ).fetchall()
    names = id_names(info, by)
    base = info.root.rstrip("/")
    listed: dict[object, list[dict[str, object]]] = {}
    for key, top, nbytes in tops:
        listed.setdefault(key, []).append({"path": f"{base}/{top}", "bytes": int(nbytes)})
    frame.insert(0, "owner", [owner_label(v, names, by) for v in frame[ids]])
    frame[ids] = frame[ids].astype("Int64")
    for level in ("safe", "caution"):
        frame[f"reclaimable_{level}"] = [
            int(freed[level].get(None if pd.isna(v) else int(v), 0)) for v in frame[ids]
        ]
    frame["top_dirs"] = pd.Series(
        [listed.get(None if pd.isna(v) else int(v), []) for v in frame[ids]],
        index=frame.index,
        dtype=object,
    )
    _timestamps(frame, "newest", "oldest")
    _share(frame)
    order = ["owner", ids, "entries", "files", "bytes", "alloc", "share"]
    order += ["reclaimable_safe", "reclaimable_caution", "newest", "oldest", "top_dirs"]
    frame = frame[order].sort_values(["bytes", "owner"], ascending=[False, True])
    frame = frame.reset_index(drop=True)
    frame.attrs.update(root=info.root, scan_id=info.scan_id, by=by, partial=info.partial)
    return frame


def _freed_sql(ids: str, levels: str) -> str:
    """Bytes deleting the chosen risks would free, per owner (an inode only with all names).

    An inode's bytes go to the owner of its first chosen name; only the hard-linked rows are
    windowed, the others summed as they are. The chosen rows are read once for each part (a
    CTE read twice would be held whole: its memory would grow with the tree).
    """
    chosen = f"""
        SELECT row_no, {ids} AS id, kind, size, nlink, dev, inode FROM entries
        WHERE risk IN ({levels}) AND {_COUNTED}
    """
    return f"""
        SELECT id, CAST(coalesce(sum(b), 0) AS BIGINT) FROM (
            SELECT id, sum(size) AS b FROM ({chosen}) c WHERE NOT {_LINKED} GROUP BY id
            UNION ALL
            SELECT id, sum(CASE WHEN nth = 1 AND names >= nlink THEN size ELSE 0 END) AS b
            FROM (
                SELECT id, size, nlink,
                       row_number() OVER (PARTITION BY dev, inode ORDER BY row_no) AS nth,
                       count(*) OVER (PARTITION BY dev, inode) AS names
                FROM ({chosen}) c WHERE {_LINKED}) l
            GROUP BY id) t
        GROUP BY id
    """


def by_type(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    by: TypeBy = "extension",
    examples: int = 3,
) -> pd.DataFrame:
    """The snapshot's regular files by extension or by category, largest first.

    An extension is case-folded and the compressed tars are kept whole (``tar.gz``); a name
    without one counts under ``(none)``. Categories are the table in
    ``hygiene_nb.classify.filetypes`` (docs/breakdowns.md).

    Returns:
        One row per extension (``extension``, ``category``) or per category (``category``,
        ``extensions``: how many distinct ones): ``files``, ``bytes``, ``alloc``, ``share`` (of
        all files' bytes) and ``examples``, the paths of the ``examples`` largest files.

    Raises:
        SnapshotNotFound: no snapshot matches.
        UsageError: ``by`` is unknown or ``examples`` negative.
    """
    _check(by, TYPE_BY, "by")
    if examples < 0:
        raise UsageError(f"examples must be 0 or more, not {examples}.")
    info = resolve_scan(root, store=store, scan_id=scan_id)
    with query_engine() as con:
        _open(con, info, store, classified=False, rules=None, now_ns=None)
        # One query: the sums per extension, and the largest files of each (a category's are
        # among its extensions'), whose paths are made for those few rows only. A category is
        # a function of the extension, found below per extension. The files are read once for
        # each part (a CTE read twice would be held whole: its memory grows with the tree), and
        # the largest per extension are ranked on one key, ``(size, -row_no)``: DuckDB then
        # keeps a few rows per extension (``top_n_window_elimination``), not every file.
        # (A row value as the key: Spark SQL orders by the same struct, field by field.)
        typed = f"""
            SELECT row_no, {EXTENSION_SQL} AS ext, size, alloc, once
            FROM ({_ONCE}) o WHERE kind = 'file'
        """
        rows = con.execute(
            f"""
            WITH sums AS (
                SELECT ext, count(*) AS files, {_bytes("once")} AS bytes,
                       {_bytes("once", "alloc")} AS alloc
                FROM ({typed}) t GROUP BY ext),
            picked AS (
                SELECT ext, row_no, size FROM (
                    SELECT ext, row_no, size, row_number() OVER (
                               PARTITION BY ext ORDER BY (size, -row_no) DESC) AS nth
                    FROM ({typed}) t WHERE once) r
                WHERE nth <= {int(examples)})
            SELECT ext, files, bytes, alloc, CAST(NULL AS BIGINT) AS row_no,
                   CAST(NULL AS STRING) AS path
            FROM sums
            UNION ALL
            SELECT p.ext, CAST(NULL AS BIGINT), p.size, CAST(NULL AS BIGINT), p.row_no,
                   {PATH_SQL}
            FROM picked p JOIN entries e ON e.row_no = p.row_no
            """
        ).fetchall()
    sums = [r[:4] for r in rows if r[4] is None]
    picked = [(r[0], r[2], r[4], r[5]) for r in rows if r[4] is not None]
    per_ext = pd.DataFrame(sums, columns=["ext", "files", "bytes", "alloc"])
    per_ext["category"] = [category_of(ext) for ext in per_ext["ext"]]
    largest: dict[str, list[tuple[int, int, str]]] = {}
    for ext, size, row_no, path in picked:
        group = ext if by == "extension" else category_of(ext)
        largest.setdefault(group, []).append((-int(size), int(row_no), path))
    if by == "extension":
        frame = per_ext.assign(key=per_ext["ext"])
    else:
        frame = (
            per_ext.groupby("category", as_index=False)
            .agg(files=("files", "sum"), bytes=("bytes", "sum"), alloc=("alloc", "sum"),
                 extensions=("ext", "count"))
            .assign(key=lambda f: f["category"])
        )  # fmt: skip
    frame["examples"] = pd.Series(
        [[path for *_, path in sorted(largest.get(v, []))[:examples]] for v in frame["key"]],
        index=frame.index,
        dtype=object,
    )
    _share(frame)
    if by == "extension":
        frame["extension"] = [v if v != NO_EXTENSION else "(none)" for v in frame["key"]]
        columns = ["extension", "category", "files", "bytes", "alloc", "share", "examples"]
    else:
        columns = ["category", "extensions", "files", "bytes", "alloc", "share", "examples"]
    frame = frame.sort_values(["bytes", "key"], ascending=[False, True])[columns]
    frame = frame.reset_index(drop=True)
    for column in ("files", "bytes", "alloc"):
        frame[column] = frame[column].astype("int64")
    frame.attrs.update(root=info.root, scan_id=info.scan_id, by=by, partial=info.partial)
    return frame


def age_bucket_sql(now_ns: int, mtime: str = "mtime_ns") -> str:
    """An SQL expression: the age bucket label of the column ``mtime`` at ``now_ns``."""
    age = f"({int(now_ns)} - {mtime})"
    cases = [f"WHEN {age} < 0 THEN '{FUTURE}'"]
    for edge, label in zip(AGE_EDGES_DAYS, AGE_BUCKETS, strict=False):
        cases.append(f"WHEN {age} < {edge * _NS_PER_DAY} THEN '{label}'")
    return f"CASE WHEN {mtime} IS NULL THEN NULL {' '.join(cases)} ELSE '{AGE_BUCKETS[-1]}' END"


def _bucket_bounds() -> dict[str, tuple[int | None, int | None]]:
    lows = (0, *AGE_EDGES_DAYS)
    highs: tuple[int | None, ...] = (*AGE_EDGES_DAYS, None)
    bounds = {label: (lo, hi) for label, lo, hi in zip(AGE_BUCKETS, lows, highs, strict=True)}
    return {FUTURE: (None, 0), **bounds}


def age_histogram(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    by: AgeBy | None = None,
) -> pd.DataFrame:
    """The snapshot's regular files by mtime age, measured at the time the scan finished.

    Buckets have edges at 1, 7, 30, 90, 365 and 1,095 days (``AGE_BUCKETS``); a file whose
    mtime is after the scan counts in ``in the future`` (shown only when there is one).

    Args:
        root: the scanned root (default: the latest scan's).
        store: the store.
        scan_id: the scan (default: the latest of ``root``).
        by: None for one histogram, or ``user``, ``group``, ``extension``, ``category`` for
            one per owner or type (the rows of buckets that hold files).

    Returns:
        One row per bucket (and key): ``bucket``, ``min_days``, ``max_days`` (None: no upper
        edge), ``files``, ``bytes``, ``alloc`` and ``share`` (of the bytes of all files, or of
        the key's with ``by``), youngest first. Every bucket is listed without ``by``.

    Raises:
        SnapshotNotFound: no snapshot matches.
        UsageError: ``by`` is unknown.
    """
    if by is not None:
        _check(by, AGE_BY, "by")
    info = resolve_scan(root, store=store, scan_id=scan_id)
    now_ns = api.scan_time_ns(info)
    if by in ("user", "group"):
        key_sql = _ids_column(by)
    elif by == "extension":
        key_sql = EXTENSION_SQL
    elif by == "category":
        key_sql = category_sql()
    else:
        key_sql = "NULL"
    with query_engine() as con:
        _open(con, info, store, classified=False, rules=None, now_ns=None)
        frame = con.execute(
            f"""
            SELECT key, bucket, count(*) AS files,
                   {_bytes("once")} AS bytes, {_bytes("once", "alloc")} AS alloc
            FROM (SELECT {key_sql} AS key, {age_bucket_sql(now_ns)} AS bucket, size, alloc, once
                  FROM ({_ONCE}) o WHERE kind = 'file') t
            WHERE bucket IS NOT NULL GROUP BY key, bucket
            """
        ).df()
    bounds = _bucket_bounds()
    order = {label: i for i, label in enumerate(bounds)}
    if by is None:
        found = {
            str(b): (int(f), int(n), int(a))
            for b, f, n, a in zip(
                frame["bucket"], frame["files"], frame["bytes"], frame["alloc"], strict=True
            )
        }
        rows = [
            {
                "bucket": label,
                **dict(zip(("files", "bytes", "alloc"), found.get(label, (0, 0, 0)), strict=True)),
            }
            for label in bounds
            if label != FUTURE or label in found
        ]
        result = pd.DataFrame(rows, columns=["bucket", "files", "bytes", "alloc"])
        _share(result)
    else:
        result = frame.copy()
        if by in ("user", "group"):
            names = id_names(info, by)
            result["key"] = [owner_label(v, names, by) for v in result["key"]]
        elif by == "extension":
            result["key"] = [v if v != NO_EXTENSION else "(none)" for v in result["key"]]
        totals = result.groupby("key")["bytes"].transform("sum")
        result["share"] = (result["bytes"] / totals.where(totals > 0)).fillna(0.0)
        result["_order"] = [order[b] for b in result["bucket"]]
        result = result.sort_values(["key", "_order"]).drop(columns="_order")
        result.columns = [by if c == "key" else c for c in result.columns]
    at = int(result.columns.get_loc("bucket"))  # type: ignore[arg-type]
    for offset, (column, side) in enumerate((("min_days", 0), ("max_days", 1)), start=1):
        edges = [bounds[b][side] for b in result["bucket"]]
        result.insert(at + offset, column, pd.Series(edges, index=result.index, dtype="Int64"))
    result = result.reset_index(drop=True)
    result.attrs.update(
        root=info.root, scan_id=info.scan_id, by=by, at_ns=now_ns, partial=info.partial
    )
    return result

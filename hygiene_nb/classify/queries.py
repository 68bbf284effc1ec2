"""The summary as queries over a snapshot and its kept verdicts (DuckDB here, Spark SQL too).

``open_entries`` makes the view ``entries``: every snapshot row with its verdict columns and
``row_no``, its place in the snapshot file (the snapshot and the verdicts are joined row for row,
which is the one engine-specific part). Everything else is SQL in the subset DuckDB and Spark SQL
share (docs/format.md, "Queries": sums cast to ``BIGINT``, no engine-only functions), over that
view, so a fleet can run the same texts on Spark. Only the columns a query names are read.

The figures are the ones ``classify.summary`` defines over an Arrow table (a test holds the two
equal on random trees): a row adds its own bytes, a hard-linked inode counts once (at its first
name in the file), and reclaimable bytes count an inode only when every name of it is chosen.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hygiene_nb.classify.classification import VERDICT_COLUMNS
from hygiene_nb.classify.summary import (
    DEPENDENCY_GROUPS,
    NO_SCORE,
    RISKS,
    STALE_BUCKETS,
    STALE_DAYS,
    entries_of,
    sorted_groups,
)
from hygiene_nb.models import (
    Cleanliness,
    GroupStats,
    RiskStats,
    SizedEntry,
    StaleBucket,
    Summary,
)
from hygiene_nb.scan import arrays
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.snapshot import FORMAT_2_COLUMNS, PATH_SQL

__all__ = [
    "PATH_SQL",
    "SUMMARY_QUERIES",
    "cleanliness_of",
    "open_entries",
    "risk_of",
    "sql_literal",
    "summarize_entries",
]

_NS_PER_DAY = 86_400 * 10**9
_FORMAT_2_TYPES = {"ctime_ns": "BIGINT", "uid": "BIGINT", "gid": "BIGINT", "mode": "INTEGER"}

# A non-directory with more than one name: counted once, at its first name (lowest row_no).
_LINKED = "(coalesce(nlink, 1) > 1 AND kind <> 'dir')"
# An excluded entry is recorded and counted nowhere (in no sum, mix, score or ranking).
_COUNTED = "NOT coalesce(excluded, false)"
# The counted names of hard-linked inodes, each with its place among its inode's names (``nth``,
# 1: the first) and how many of them there are: only these few rows are windowed.
_LINKED_NAMES = f"""
    SELECT {{columns}},
           row_number() OVER (PARTITION BY dev, inode ORDER BY row_no) AS nth,
           count(*) OVER (PARTITION BY dev, inode) AS names
    FROM {{source}} WHERE {_LINKED} AND {_COUNTED}
"""
_ENTRY_COLUMNS = (
    "parent, name, parent_raw, name_raw, kind, size, alloc, nlink, tree_bytes, tree_alloc, "
    "tree_files, partial, error, risk, rule, claim, confidence, content_risk"
)

SUMMARY_QUERIES: dict[str, str] = {
    "counts": """
        SELECT count(*) AS entries,
               sum(CASE WHEN kind = 'dir' THEN 1 ELSE 0 END) AS dirs,
               sum(CASE WHEN kind = 'file' THEN 1 ELSE 0 END) AS files,
               sum(CASE WHEN kind = 'symlink' THEN 1 ELSE 0 END) AS symlinks,
               sum(CASE WHEN kind = 'other' THEN 1 ELSE 0 END) AS others,
               sum(CASE WHEN error IS NOT NULL THEN 1 ELSE 0 END) AS errors,
               sum(CASE WHEN excluded THEN 1 ELSE 0 END) AS excluded
        FROM entries
    """,
    "root": """
        SELECT tree_bytes, tree_alloc, tree_files, partial FROM entries
        WHERE depth = 0 ORDER BY row_no LIMIT 1
    """,
    # bytes per risk, a hard-linked inode once: at its first counted name (``counted``)
    "risk": f"""
        SELECT risk, CAST(sum(CASE WHEN counted THEN size ELSE 0 END) AS BIGINT) AS bytes,
               CAST(sum(CASE WHEN counted THEN alloc ELSE 0 END) AS BIGINT) AS alloc,
               count(*) AS entries
        FROM entries WHERE {_COUNTED} GROUP BY risk
    """,
    # what deleting every entry of the chosen risks frees: an inode only with all its names
    "freed": f"""
        WITH chosen AS (
            SELECT row_no, kind, size, alloc, nlink, dev, inode, excluded FROM entries
            WHERE risk IN ({{levels}}) AND {_COUNTED})
        SELECT CAST(coalesce(sum(b), 0) AS BIGINT) AS bytes,
               CAST(coalesce(sum(a), 0) AS BIGINT) AS alloc,
               CAST(coalesce(sum(n), 0) AS BIGINT) AS entries
        FROM (
            SELECT sum(size) AS b, sum(alloc) AS a, count(*) AS n FROM chosen
            WHERE NOT {_LINKED}
            UNION ALL
            SELECT sum(CASE WHEN nth = 1 AND names >= nlink THEN size ELSE 0 END) AS b,
                   sum(CASE WHEN nth = 1 AND names >= nlink THEN alloc ELSE 0 END) AS a,
                   count(*) AS n
            FROM ({_LINKED_NAMES.format(columns="size, alloc, nlink", source="chosen")}) l) t
    """,
    # bytes of non-directories by age bucket and risk, a hard-linked inode once
    "stale": f"""
        WITH aged AS (
            SELECT risk, size, CAST({{now_ns}} - mtime_ns AS DOUBLE) / {_NS_PER_DAY}.0 AS days
            FROM entries WHERE kind <> 'dir' AND counted)
        SELECT bucket, risk, CAST(sum(size) AS BIGINT) AS bytes FROM (
            SELECT risk, size, CASE {{buckets}} ELSE NULL END AS bucket FROM aged) b
        WHERE bucket IS NOT NULL GROUP BY bucket, risk
    """,
    # the cleanliness score's counts: files not protected, not dependencies, not excluded
    "clean": """
        SELECT risk, count(*) AS n FROM entries
        WHERE kind = 'file' AND risk <> 'high' AND NOT coalesce(excluded, false)
              AND (\"group\" IS NULL OR \"group\" NOT IN ({dependencies}))
        GROUP BY risk
    """,
    # each group's figures, from its outermost matches (``outermost``: nested ones left out)
    "groups": f"""
        SELECT \"group\", count(*) AS entries,
               CAST(coalesce(sum(coalesce(tree_bytes, size)), 0) AS BIGINT) AS bytes,
               CAST(coalesce(sum(coalesce(tree_files,
                                          CASE WHEN kind = 'file' THEN 1 ELSE 0 END)), 0)
                    AS BIGINT) AS files
        FROM entries
        WHERE coalesce(outermost, false) AND \"group\" IS NOT NULL AND {_COUNTED}
        GROUP BY \"group\"
    """,
    # per group, its outermost matches as large as its top-th (ties at the edge too)
    "group_ranked": f"""
        WITH matches AS (
            SELECT row_no, \"group\", coalesce(tree_bytes, size) AS ranked_bytes FROM entries
            WHERE coalesce(outermost, false) AND \"group\" IS NOT NULL AND {_COUNTED}),
        nth AS (
            SELECT \"group\", ranked_bytes, row_number() OVER (
                PARTITION BY \"group\" ORDER BY ranked_bytes DESC NULLS LAST) AS k
            FROM matches),
        edge AS (SELECT \"group\", min(ranked_bytes) AS ranked_bytes FROM nth
                 WHERE k <= {{top}} GROUP BY \"group\")
        SELECT m.row_no AS row_no, m.\"group\" AS \"group\" FROM matches m
        JOIN edge e ON e.\"group\" = m.\"group\"
        WHERE e.ranked_bytes IS NULL OR m.ranked_bytes >= e.ranked_bytes
    """,
    # the rows of one ranking as large as its top-th (ties at the edge too), numbers only
    "ranked": f"""
        WITH ranked AS (
            SELECT row_no, coalesce(tree_bytes, size) AS ranked_bytes
            FROM entries e WHERE ({{where}}) AND {_COUNTED}),
        edge AS (
            SELECT min(ranked_bytes) AS ranked_bytes FROM (
                SELECT ranked_bytes FROM ranked ORDER BY ranked_bytes DESC LIMIT {{top}}) t)
        SELECT row_no FROM ranked WHERE ranked_bytes >= (SELECT ranked_bytes FROM edge)
        LIMIT {{cap}}
    """,
    # what the rankings show, for the rows they chose (a list of row numbers)
    "shown": f"""
        SELECT row_no, {_ENTRY_COLUMNS} FROM entries WHERE row_no IN ({{rows}})
    """,
    # the largest entries of one kind of ranking, ties by path: where ties are too many to
    # fetch by row (``_TIES``), the ranking is made whole in one query
    "largest": f"""
        WITH ranked AS (
            SELECT {_ENTRY_COLUMNS}, coalesce(tree_bytes, size) AS ranked_bytes
            FROM entries e WHERE ({{where}}) AND {_COUNTED}),
        edge AS (
            SELECT min(ranked_bytes) AS ranked_bytes FROM (
                SELECT ranked_bytes FROM ranked ORDER BY ranked_bytes DESC LIMIT {{top}}) t)
        SELECT {_ENTRY_COLUMNS} FROM ranked
        WHERE ranked_bytes >= (SELECT ranked_bytes FROM edge)
        ORDER BY ranked_bytes DESC, {PATH_SQL} ASC LIMIT {{top}}
    """,
}

# "largest directories" leaves out a directory whose largest child holds half of it or more
# (that child, or one further down, is the one to show: dust collapses such chains too)
_CHAIN = "NOT coalesce(2 * largest_child >= tree_bytes, false)"
_RANKINGS = {
    "largest": "depth > 0",
    "largest_files": "kind = 'file'",
    "largest_dirs": f"kind = 'dir' AND depth > 0 AND {_CHAIN}",
    "children": "depth = 1",
}


def _quoted(values: list[str]) -> str:
    return ", ".join(sql_literal(v) for v in values)


def sql_literal(value: object) -> str:
    """``value`` as an SQL string literal (quotes doubled), for texts built with ``format``."""
    return "'" + str(value).replace("'", "''") + "'"


def _int(value: object) -> int:
    """A count or sum from a query (None, an empty sum, is 0)."""
    if value is None:
        return 0
    assert isinstance(value, int | float), value
    return int(value)


def open_entries(
    con: duckdb.DuckDBPyConnection,
    snapshot: Path,
    verdicts: Path | pa.Table | None,
    *,
    name: str = "entries",
) -> None:
    """Define the view ``name`` on ``con``: the snapshot's rows, their verdicts, ``row_no``.

    ``verdicts`` is the kept file (``classify.stored``), the verdicts computed now
    (``classify_verdicts``) when the store could not keep them, or None for the snapshot alone.
    """
    rows = f"read_parquet({sql_literal(snapshot)}, file_row_number = true)"
    # a format-1 snapshot has no owner, ctime or mode: null there (unknown), never zero
    try:
        present = set(pq.read_schema(snapshot).names)
    except (OSError, pa.ArrowException):
        present = set(FORMAT_2_COLUMNS)  # unreadable: the query itself says why
    lacking = "".join(
        f", CAST(NULL AS {_FORMAT_2_TYPES[c]}) AS {c}" for c in FORMAT_2_COLUMNS if c not in present
    )
    if verdicts is None:
        source = f"{rows} s"
    elif isinstance(verdicts, pa.Table):
        con.register(f"{name}_verdicts", verdicts.select(list(VERDICT_COLUMNS)))
        source = f"{rows} s POSITIONAL JOIN {name}_verdicts c"
    else:
        source = f"{rows} s POSITIONAL JOIN read_parquet({sql_literal(verdicts)}) c"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP VIEW {name} AS
        SELECT * EXCLUDE (file_row_number), s.file_row_number AS row_no{lacking} FROM {source}
        """
    )


def _stats(row: tuple[object, ...]) -> RiskStats:
    return RiskStats(bytes=_int(row[0]), alloc=_int(row[1]), entries=_int(row[2]))


def risk_of(con: duckdb.DuckDBPyConnection) -> dict[str, RiskStats]:
    """Bytes (a hard-linked inode once, at its first name) and entries per risk of ``entries``."""
    by_risk = {r[0]: r[1:] for r in con.execute(SUMMARY_QUERIES["risk"]).fetchall()}
    return {level: _stats(by_risk.get(level, (0, 0, 0))) for level in RISKS}


def cleanliness_of(con: duckdb.DuckDBPyConnection, *, partial: bool) -> Cleanliness:
    """The cleanliness score of ``entries`` (``classify.summary.cleanliness``)."""
    query = SUMMARY_QUERIES["clean"].format(dependencies=_quoted(sorted(DEPENDENCY_GROUPS)))
    clean = {r: int(n) for r, n in con.execute(query).fetchall()}
    n = sum(clean.values())
    c, i, p, v = (clean.get(r, 0) for r in ("safe", "caution", "unknown", "personal"))
    score = 100 if n == 0 else round(100 - 70 * c / n - 20 * i / n - 10 * p / n)
    reason = NO_SCORE if n == 0 else None
    return Cleanliness(max(0, min(100, score)), n, c, i, p, v, estimate=partial, no_score=reason)


def summarize_entries(
    con: duckdb.DuckDBPyConnection, info: ScanInfo, *, top: int, now_ns: int
) -> Summary:
    """The summary of the view ``entries`` (see ``open_entries``) at ``now_ns``."""
    q = SUMMARY_QUERIES

    def one(sql: str) -> tuple[object, ...]:
        row = con.execute(sql).fetchone()
        return tuple(row) if row is not None else ()

    counts = one(q["counts"])
    root_rows = con.execute(q["root"]).fetchall()
    tree_bytes, tree_alloc, tree_files, root_partial = root_rows[0] if root_rows else (None,) * 4
    partial = True if root_partial is None else bool(root_partial)

    risk = risk_of(con)

    reclaimable, levels = {}, []
    for level in ("safe", "caution"):
        levels.append(level)
        freed = one(q["freed"].format(levels=_quoted(levels)))
        reclaimable[level] = _stats(freed)

    bounds = [b for _, b in STALE_BUCKETS[1:]] + [None]
    cases = " ".join(
        f"WHEN days >= {low} AND days < {high} THEN {i}"
        if high is not None
        else f"WHEN days >= {low} THEN {i}"
        for i, ((_, low), high) in enumerate(zip(STALE_BUCKETS, bounds, strict=True))
    )
    aged: dict[int, dict[str, int]] = {}
    for bucket, level, nbytes in con.execute(
        q["stale"].format(now_ns=int(now_ns), buckets=cases)
    ).fetchall():
        aged.setdefault(int(bucket), {})[level] = int(nbytes)
    stale = [
        StaleBucket(label, low, {r: aged.get(i, {}).get(r, 0) for r in RISKS})
        for i, (label, low) in enumerate(STALE_BUCKETS)
    ]

    groups, ranked = _rankings(con, top)
    return Summary(
        root=info.root,
        scan_id=info.scan_id,
        scanned_at=info.started_at,
        tree_bytes=None if tree_bytes is None else _int(tree_bytes),
        tree_alloc=None if tree_alloc is None else _int(tree_alloc),
        tree_files=None if tree_files is None else _int(tree_files),
        entries=_int(counts[0]),
        dirs=_int(counts[1]),
        files=_int(counts[2]),
        symlinks=_int(counts[3]),
        others=_int(counts[4]),
        errors=_int(counts[5]),
        excluded=_int(counts[6]),
        partial=partial,
        fs_free=info.fs_free,
        fs_total=info.fs_total,
        risk=risk,
        reclaimable=reclaimable,
        groups=groups,
        stale=stale,
        stale_bytes=sum(sum(b.bytes.values()) for b in stale if b.min_days >= STALE_DAYS),
        cleanliness=cleanliness_of(con, partial=partial),
        largest=ranked["largest"],
        largest_files=ranked["largest_files"],
        largest_dirs=ranked["largest_dirs"],
        children=ranked["children"],
    )


# A ranking whose ties at the edge are more than this is made whole in one query.
_TIES = 50_000


def _rankings(
    con: duckdb.DuckDBPyConnection, top: int
) -> tuple[list[GroupStats], dict[str, list[SizedEntry]]]:
    """The pattern index and the rankings: chosen on numbers, then shown in full by row.

    Each ranking's rows as large as its top-th, and each group's (outermost) rows, are chosen
    on the few columns that choose them; what is shown of the chosen rows is read in one
    query (``shown``). ``entries_of`` of those rows is what it is of all rows.
    """
    q = SUMMARY_QUERIES
    chosen: dict[str, pa.Array] = {}
    whole: dict[str, pa.Table] = {}
    for name, where in _RANKINGS.items():
        text = q["ranked"].format(where=where, top=int(top), cap=_TIES + 1)
        rows = con.sql(text).to_arrow_table().column("row_no")
        if len(rows) > _TIES:
            whole[name] = con.sql(q["largest"].format(where=where, top=int(top))).to_arrow_table()
        else:
            chosen[name] = rows.combine_chunks()
    figures = con.execute(q["groups"]).fetchall()
    per_group = con.sql(q["group_ranked"].format(top=int(top))).to_arrow_table()
    group_of = per_group.column("group").cast(pa.string())
    for group, *_ in figures:
        rows = per_group.filter(pc.equal(group_of, arrays.string_scalar(group)))
        chosen[f"group:{group}"] = rows.column("row_no").combine_chunks()
    wanted = sorted({n for rows in chosen.values() for n in rows.to_pylist()})
    if len(wanted) <= _TIES:
        text = q["shown"].format(rows=", ".join(str(int(n)) for n in wanted) or "NULL")
        shown = con.sql(text).to_arrow_table()
    else:  # too many to name: the chosen rows as a table, joined
        con.register("summary_rows", pa.table({"row_no": pa.array(wanted, pa.int64())}))
        try:
            shown = con.sql(q["shown"].format(rows="SELECT row_no FROM summary_rows"))
            shown = shown.to_arrow_table()
        finally:
            con.unregister("summary_rows")

    def of(name: str) -> list[SizedEntry]:
        if name in whole:
            return entries_of(whole[name], top)
        rows = shown.filter(pc.is_in(shown.column("row_no"), value_set=chosen[name]))
        return entries_of(rows.drop_columns(["row_no"]), top)

    groups = [
        GroupStats(group=g, count=int(n), bytes=int(b), files=int(f), entries=of(f"group:{g}"))
        for g, n, b, f in figures
    ]
    return sorted_groups(groups), {name: of(name) for name in _RANKINGS}

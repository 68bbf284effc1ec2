"""Pure views over a classified snapshot: totals, risk mix, groups, staleness, score, largest.

Reclaimable bytes, the pattern index and staleness are here too.

Byte sums never double count: each row adds its own bytes (a directory its own size, a file its
size), so nested entries are counted once, and a hard-linked inode once. Reclaimable bytes count
an inode only when every one of its names is in the set (otherwise deleting frees nothing).
An excluded entry (``--exclude``, ``.hygieneignore``) is recorded and counted nowhere: not in the
walker's sums, the risk mix, reclaimable bytes, staleness, the score or any ranking.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.classify.rules import Risk
from hygiene_nb.models import (
    Cleanliness,
    GroupStats,
    RiskStats,
    SizedEntry,
    StaleBucket,
    Summary,
)
from hygiene_nb.pathnames import path_b64, raw_path
from hygiene_nb.scan import arrays
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.snapshot import entry_paths

__all__ = [
    "DEPENDENCY_GROUPS",
    "NO_SCORE",
    "RISKS",
    "STALE_BUCKETS",
    "STALE_DAYS",
    "chain_dirs",
    "cleanliness",
    "counted_once",
    "counted_rows",
    "entries_of",
    "freed_bytes",
    "group_index",
    "group_stats",
    "kept_bytes",
    "outermost_by_group",
    "pattern_index",
    "ranked_candidates",
    "reclaimable",
    "risk_mix",
    "sorted_groups",
    "staleness",
    "summarize_table",
]

RISKS = tuple(r.value for r in Risk)
DEPENDENCY_GROUPS = frozenset({"node_modules", "virtualenv", "vendor-bundle"})
STALE_BUCKETS = (
    ("< 30 days", 0),
    ("30-90 days", 30),
    ("90 days-1 year", 90),
    ("1-2 years", 365),
    ("> 2 years", 730),
)
STALE_DAYS = 365
# Why there is no cleanliness score when it has nothing to count.
NO_SCORE = "no files outside protected and dependency directories"
_NS_PER_DAY = 86_400 * 10**9
# Arrow scalars, not Python values, for the compute functions (``scan.arrays``)
_DIR, _FILE = arrays.string_scalar("dir"), arrays.string_scalar("file")
_FALSE = arrays.bool_scalar(False)
_ZERO, _ONE = arrays.int_scalar(0, pa.int64()), arrays.int_scalar(1, pa.int64())
Mask = npt.NDArray[np.bool_]


def _np(table: pa.Table, column: str) -> npt.NDArray[np.generic]:
    values = table.column(column)
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return arrays.numbers(values)  # read without pyarrow importing pandas
    out: npt.NDArray[np.generic] = values.to_numpy(zero_copy_only=False)
    return out


def _link_groups(table: pa.Table) -> tuple[Mask, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """For non-directories with nlink > 1: (is_linked, group id per row, nlink per row)."""
    nlink = _np(table, "nlink").astype(np.int64)
    is_dir = arrays.mask(pc.equal(table.column("kind").cast(pa.string()), _DIR))
    linked = (nlink > 1) & ~is_dir
    group = np.full(table.num_rows, -1, dtype=np.int64)
    rows = np.flatnonzero(linked)
    if rows.size:
        keys = np.stack([_np(table, "dev")[rows], _np(table, "inode")[rows]], axis=1)
        _, inverse = np.unique(keys, axis=0, return_inverse=True)
        group[rows] = inverse.reshape(-1)
    return linked, group, nlink


def _own_bytes(table: pa.Table) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    return _np(table, "size").astype(np.int64), _np(table, "alloc").astype(np.int64)


def _first_of_group(linked: Mask, group: npt.NDArray[np.int64]) -> Mask:
    """True for each row except the 2nd, 3rd… names of a hard-linked inode."""
    keep = np.ones(linked.shape, dtype=bool)
    rows = np.flatnonzero(linked)
    if rows.size:
        _, first = np.unique(group[rows], return_index=True)
        keep[rows] = False
        keep[rows[first]] = True
    return keep


def counted_once(table: pa.Table, among: Mask | None = None) -> Mask:
    """Per row, whether its own bytes count: False for the 2nd, 3rd… name of an inode.

    ``among``: only these rows count (an inode's first name among them); the others never.
    """
    linked, group, _ = _link_groups(table)
    if among is None:
        return _first_of_group(linked, group)
    return _first_of_group(linked & among, group) & among


def risk_mix(table: pa.Table) -> dict[str, RiskStats]:
    """Bytes (hard links once, each at its first name) and entries per risk level."""
    risk = _np(table, "risk")
    size, alloc = _own_bytes(table)
    once = counted_once(table)
    out = {}
    for level in RISKS:
        mask = risk == level
        out[level] = RiskStats(
            bytes=int(size[mask & once].sum()),
            alloc=int(alloc[mask & once].sum()),
            entries=int(mask.sum()),
        )
    return out


def freed_bytes(table: pa.Table, chosen: Mask) -> tuple[int, int]:
    """Bytes (apparent, allocated) that deleting the ``chosen`` rows would free.

    Each row adds its own bytes; a hard-linked inode counts once, and only when all its names
    are chosen (otherwise deleting frees nothing of it).
    """
    size, alloc = _own_bytes(table)
    linked, group, nlink = _link_groups(table)
    frees = chosen & ~linked
    rows = np.flatnonzero(chosen & linked)
    if rows.size:
        names_in = np.bincount(group[rows], minlength=int(group.max()) + 1)
        complete = names_in[group[rows]] >= nlink[rows]
        first = _first_of_group(linked & chosen, group)
        frees[rows[complete & first[rows]]] = True
    return int(size[frees].sum()), int(alloc[frees].sum())


def reclaimable(
    table: pa.Table, levels: tuple[str, ...] = ("safe", "caution")
) -> dict[str, RiskStats]:
    """Bytes deleting every entry at each level would free (cumulative: safe, then +caution)."""
    risk = _np(table, "risk")
    out = {}
    chosen = np.zeros(table.num_rows, dtype=bool)
    for level in levels:
        chosen |= risk == level
        freed, freed_alloc = freed_bytes(table, chosen)
        out[level] = RiskStats(bytes=freed, alloc=freed_alloc, entries=int(chosen.sum()))
    return out


def _exact(columns: dict[str, list[Any]], i: int) -> str | None:
    """Row ``i``'s ``path_b64`` (only rows with a non-UTF-8 name in their path have one)."""
    names = ("parent", "name", "parent_raw", "name_raw")
    row: dict[str, Any] = {c: columns[c][i] for c in names if c in columns}
    if row.get("parent_raw") is None and row.get("name_raw") is None:
        return None
    return path_b64(columns["path"][i], raw_path(row))


def ranked_candidates(rows: pa.Table, n: int) -> pa.Table:
    """The rows ``entries_of(rows, n)`` chooses among: every row as large as the n-th largest.

    With a ``bytes`` column (``tree_bytes``, else ``size``). Ties at the edge are all kept, so
    that ``entries_of`` breaks them by path; ``entries_of`` of these rows is that of ``rows``.
    """
    rows = rows.append_column("bytes", pc.coalesce(rows.column("tree_bytes"), rows.column("size")))
    if rows.num_rows == 0 or n <= 0:
        return rows.slice(0, 0)
    k = min(n, rows.num_rows)
    top_k = rows.take(pc.select_k_unstable(rows, k=k, sort_keys=[("bytes", "descending")]))
    edge = pc.min(top_k.column("bytes"))
    if edge.is_valid:
        rows = rows.filter(pc.fill_null(pc.greater_equal(rows.column("bytes"), edge), _FALSE))
    return rows


def entries_of(rows: pa.Table, n: int) -> list[SizedEntry]:
    """The ``n`` largest rows as ranked entries (largest first, ties by path)."""
    if rows.num_rows == 0 or n <= 0:
        return []
    k = min(n, rows.num_rows)
    rows = ranked_candidates(rows, n)
    rows = rows.append_column("path", entry_paths(rows))
    rows = rows.sort_by([("bytes", "descending"), ("path", "ascending")]).slice(0, k)
    get = {c: rows.column(c).to_pylist() for c in rows.column_names}
    return [
        SizedEntry(
            path=get["path"][i],
            kind=get["kind"][i],
            bytes=get["bytes"][i],
            alloc=get["tree_alloc"][i] if get["tree_alloc"][i] is not None else get["alloc"][i],
            files=get["tree_files"][i],
            partial=bool(get["partial"][i]),
            error=get["error"][i],
            nlink=get["nlink"][i],
            risk=get.get("risk", [None] * rows.num_rows)[i],
            rule=get.get("rule", [None] * rows.num_rows)[i],
            claim=get.get("claim", [None] * rows.num_rows)[i],
            confidence=get.get("confidence", [None] * rows.num_rows)[i],
            path_b64=_exact(get, i),
            holds=get["content_risk"][i]
            if "content_risk" in get and get["kind"][i] == "dir"
            else None,
        )
        for i in range(rows.num_rows)
    ]


def pattern_index(table: pa.Table, *, shown: int = 200) -> list[GroupStats]:
    """Per rule group: its outermost matching entries (nested ones removed) and their sums."""
    roots = table.filter(pc.fill_null(table.column("group_root"), _FALSE))
    return group_index(roots.filter(pc.is_valid(roots.column("group"))), shown=shown)


def group_index(roots: pa.Table, *, shown: int) -> list[GroupStats]:
    """``pattern_index`` of the rows that are a match of their group (``group_root``)."""
    out = [
        group_stats(group, rows, entries_of(rows, shown))
        for group, rows in outermost_by_group(roots)
    ]
    return sorted_groups(out)


def outermost_by_group(roots: pa.Table) -> list[tuple[str, pa.Table]]:
    """Per group (in name order), its rows that lie inside no other row of the same group.

    ``roots`` holds ``group``, ``kind``, and ``path`` or the columns ``entry_paths`` reads.
    """
    return [
        (
            group,
            _outermost(roots.filter(pc.equal(roots.column("group"), arrays.string_scalar(group)))),
        )
        for group in sorted(set(roots.column("group").to_pylist()))
    ]


def group_stats(group: str, rows: pa.Table, entries: list[SizedEntry]) -> GroupStats:
    """One group's figures from its outermost rows, with ``entries``, its largest ones."""
    is_file = pc.cast(pc.equal(rows.column("kind").cast(pa.string()), _FILE), pa.int64())
    files = pc.coalesce(rows.column("tree_files"), is_file)
    return GroupStats(
        group=group,
        count=rows.num_rows,
        bytes=int(pc.sum(pc.coalesce(rows.column("tree_bytes"), rows.column("size"))).as_py() or 0),
        files=int(pc.sum(files).as_py() or 0),
        entries=entries,
    )


def sorted_groups(groups: list[GroupStats]) -> list[GroupStats]:
    """The pattern index's order: most bytes first, ties by group name."""
    return sorted(groups, key=lambda g: (-g.bytes, g.group))


def _outermost(rows: pa.Table) -> pa.Table:
    """Drop rows that lie inside another row of the table (a photo inside ~/Pictures)."""
    if not pc.any(pc.equal(rows.column("kind").cast(pa.string()), _DIR)).as_py():
        return rows  # only directories hold anything
    column = rows.column("path") if "path" in rows.column_names else entry_paths(rows)
    paths = column.to_pylist()
    dirs = pc.equal(rows.column("kind").cast(pa.string()), _DIR).to_pylist()
    held: set[str] = set()  # the directories kept so far: what a later row may lie inside
    keep: list[int] = []
    for i in sorted(range(len(paths)), key=lambda i: paths[i]):  # a directory before its rows
        if any(above in held for above in _ancestors(paths[i])):
            continue
        keep.append(i)
        if dirs[i]:
            held.add(paths[i])
    return rows.take(arrays.numeric_array(np.array(sorted(keep), dtype=np.int64)))


def _ancestors(path: str) -> Iterator[str]:
    """The directories above ``path``, nearest first (``/a/b/c``: ``/a/b``, ``/a``, ``/``)."""
    cut = path.rstrip("/").rfind("/")
    while cut > 0:
        path = path[:cut]
        yield path
        cut = path.rfind("/")
    if cut == 0:
        yield "/"


def kept_bytes(table: pa.Table, chosen: Mask) -> int:
    """Apparent bytes of the ``chosen`` rows, each inode once (what keeping them keeps)."""
    size, _ = _own_bytes(table)
    linked, group, _ = _link_groups(table)
    return int(size[chosen & _first_of_group(linked & chosen, group)].sum())


def staleness(table: pa.Table, *, now_ns: int) -> list[StaleBucket]:
    """Bytes of non-directories (hard links once) by age bucket and risk."""
    is_dir = arrays.mask(pc.equal(table.column("kind").cast(pa.string()), _DIR))
    linked, group, _ = _link_groups(table)
    counted = ~is_dir & _first_of_group(linked, group)
    age_days = (now_ns - _np(table, "mtime_ns").astype(np.int64)) / _NS_PER_DAY
    size = _np(table, "size").astype(np.int64)
    risk = _np(table, "risk")
    out = []
    bounds = [b for _, b in STALE_BUCKETS[1:]] + [np.inf]
    for (label, low), high in zip(STALE_BUCKETS, bounds, strict=True):
        in_bucket = counted & (age_days >= low) & (age_days < high)
        out.append(
            StaleBucket(label, low, {r: int(size[in_bucket & (risk == r)].sum()) for r in RISKS})
        )
    return out


def cleanliness(table: pa.Table, *, partial: bool) -> Cleanliness:
    """Seed 004's score over files that are not protected, not dependencies, not excluded.

    safe → cleanable (-70), caution → intermediate (-20), unknown → pending (-10), personal →
    valuable (no deduction): ``round(100 - 70*c/N - 20*i/N - 10*p/N)``; when N is 0 there is
    no score (``no_score`` says why; ``score`` is 100 there, which nothing shows).
    """
    is_file = arrays.mask(pc.equal(table.column("kind").cast(pa.string()), _FILE))
    group = np.asarray(table.column("group").to_pylist(), dtype=object)
    dependency = np.isin(group, list(DEPENDENCY_GROUPS))
    excluded = _np(table, "excluded").astype(bool)
    risk = _np(table, "risk")
    counted = is_file & (risk != "high") & ~dependency & ~excluded
    n = int(counted.sum())
    c, i, p, v = (
        int((counted & (risk == r)).sum()) for r in ("safe", "caution", "unknown", "personal")
    )
    score = 100 if n == 0 else round(100 - 70 * c / n - 20 * i / n - 10 * p / n)
    reason = NO_SCORE if n == 0 else None
    return Cleanliness(max(0, min(100, score)), n, c, i, p, v, estimate=partial, no_score=reason)


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def chain_dirs(table: pa.Table) -> pa.Array:
    """True for each directory whose largest child holds at least half of its bytes.

    "Largest directories" leaves them out (as dust collapses such chains): the child, or one
    further down, is the one to show. ``table`` holds the counted rows only.
    """
    parent = table.column("parent").cast(pa.string())
    child_bytes = pc.coalesce(table.column("tree_bytes"), table.column("size"))
    biggest = (
        pa.table({"parent": parent, "b": child_bytes})
        .filter(pc.is_valid(parent))
        .group_by("parent")
        .aggregate([("b", "max")])
    )
    at = pc.index_in(entry_paths(table), biggest.column("parent"))
    largest_child = pc.take(biggest.column("b_max"), at)
    half_or_more = pc.greater_equal(pc.multiply(largest_child, 2), table.column("tree_bytes"))
    is_dir = pc.equal(table.column("kind").cast(pa.string()), _DIR)
    return pc.and_(is_dir, pc.fill_null(half_or_more, _FALSE))


def counted_rows(table: pa.Table) -> pa.Table:
    """The rows the figures count: all but the excluded ones (recorded, counted nowhere)."""
    return table.filter(pc.invert(pc.fill_null(table.column("excluded"), _FALSE)))


def summarize_table(table: pa.Table, info: ScanInfo, *, top: int = 20, now_ns: int) -> Summary:
    """Summarize one classified snapshot (see ``classify.classify_table``).

    Args:
        table: the classified snapshot rows.
        info: the scan's metadata.
        top: how many of the largest entries to list in each ranking.
        now_ns: the current time, for staleness.
    """
    kind = table.column("kind").cast(pa.string())
    depth = table.column("depth")
    root_rows = table.filter(pc.equal(depth, _ZERO)).to_pylist()
    root = root_rows[0] if root_rows else {}
    counts = {"dirs": _count(pc.equal(kind, _DIR))}
    for other in ("file", "symlink", "other"):
        counts[other] = _count(pc.equal(kind, arrays.string_scalar(other)))
    entries, errors = table.num_rows, _count(pc.is_valid(table.column("error")))
    excluded = _count(table.column("excluded"))
    table = counted_rows(table)
    kind = table.column("kind").cast(pa.string())
    depth = table.column("depth")
    not_root = pc.greater(depth, _ZERO)
    is_dir = pc.equal(kind, _DIR)
    stale = staleness(table, now_ns=now_ns)
    partial = bool(root.get("partial", True))
    return Summary(
        root=info.root,
        scan_id=info.scan_id,
        scanned_at=info.started_at,
        tree_bytes=root.get("tree_bytes"),
        tree_alloc=root.get("tree_alloc"),
        tree_files=root.get("tree_files"),
        entries=entries,
        dirs=counts["dirs"],
        files=counts["file"],
        symlinks=counts["symlink"],
        others=counts["other"],
        errors=errors,
        excluded=excluded,
        partial=partial,
        fs_free=info.fs_free,
        fs_total=info.fs_total,
        risk=risk_mix(table),
        reclaimable=reclaimable(table),
        groups=pattern_index(table, shown=top),
        stale=stale,
        stale_bytes=sum(sum(b.bytes.values()) for b in stale if b.min_days >= STALE_DAYS),
        cleanliness=cleanliness(table, partial=partial),
        largest=entries_of(table.filter(not_root), top),
        largest_files=entries_of(table.filter(pc.equal(kind, _FILE)), top),
        largest_dirs=entries_of(
            table.filter(pc.and_(pc.and_(is_dir, not_root), pc.invert(chain_dirs(table)))), top
        ),
        children=entries_of(table.filter(pc.equal(depth, _ONE)), top),
    )

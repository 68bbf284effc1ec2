"""Pure summaries of a snapshot table: totals, the largest entries, the root's children."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.models import SizedEntry, Summary
from hygiene_nb.snapshot import ScanInfo, entry_paths

__all__ = ["SUMMARY_COLUMNS", "summarize_table"]

SUMMARY_COLUMNS = [
    "parent",
    "name",
    "kind",
    "size",
    "alloc",
    "nlink",
    "depth",
    "tree_bytes",
    "tree_alloc",
    "tree_files",
    "partial",
    "error",
    "excluded",
]


def _bytes(table: pa.Table) -> pa.ChunkedArray:
    """Recursive bytes for directories (where known), own bytes for everything else."""
    return pc.coalesce(table.column("tree_bytes"), table.column("size"))


def _top(table: pa.Table, mask: pa.ChunkedArray | pa.Array, n: int) -> list[SizedEntry]:
    """The ``n`` largest rows of ``table`` where ``mask`` holds, largest first (ties by path)."""
    rows = table.filter(mask)
    if rows.num_rows == 0 or n <= 0:
        return []
    rows = rows.append_column("bytes", _bytes(rows))
    rows = rows.take(
        pc.select_k_unstable(rows, k=min(n, rows.num_rows), sort_keys=[("bytes", "descending")])
    )
    rows = rows.append_column("path", entry_paths(rows))
    rows = rows.sort_by([("bytes", "descending"), ("path", "ascending")])
    out = []
    for r in rows.to_pylist():
        out.append(
            SizedEntry(
                path=r["path"],
                kind=r["kind"],
                bytes=r["bytes"],
                alloc=r["tree_alloc"] if r["tree_alloc"] is not None else r["alloc"],
                files=r["tree_files"],
                partial=bool(r["partial"]),
                error=r["error"],
                nlink=r["nlink"],
            )
        )
    return out


def _count(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def summarize_table(table: pa.Table, info: ScanInfo, *, top: int = 20) -> Summary:
    """Summarize one snapshot (``table`` holds at least SUMMARY_COLUMNS).

    Args:
        table: the snapshot rows.
        info: the scan's metadata.
        top: how many of the largest entries to list in each ranking.

    Returns:
        Totals from the root row and the rankings. A directory's bytes are recursive (hard
        links once); a hard-linked file appears once per name in the file ranking, with nlink.
    """
    kind = table.column("kind").cast(pa.string())
    depth = table.column("depth")
    root_rows = table.filter(pc.equal(depth, 0)).to_pylist()
    root = root_rows[0] if root_rows else {}
    not_root = pc.greater(depth, 0)
    is_dir = pc.equal(kind, "dir")
    return Summary(
        root=info.root,
        scan_id=info.scan_id,
        scanned_at=info.started_at,
        tree_bytes=root.get("tree_bytes"),
        tree_alloc=root.get("tree_alloc"),
        tree_files=root.get("tree_files"),
        entries=table.num_rows,
        dirs=_count(is_dir),
        files=_count(pc.equal(kind, "file")),
        symlinks=_count(pc.equal(kind, "symlink")),
        others=_count(pc.equal(kind, "other")),
        errors=_count(pc.is_valid(table.column("error"))),
        excluded=_count(table.column("excluded")),
        partial=bool(root.get("partial", True)),
        fs_free=info.fs_free,
        fs_total=info.fs_total,
        largest=_top(table, not_root, top),
        largest_files=_top(table, pc.equal(kind, "file"), top),
        largest_dirs=_top(table, pc.and_(is_dir, not_root), top),
        children=_top(table, pc.equal(depth, 1), top),
    )

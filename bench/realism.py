"""How much a snapshot's tree looks like a real one: the statistics that decide its size.

Names and mtimes are most of a snapshot's bytes, so the generated tree is compared with a real
directory on them (``bench/README.md`` explains each line). Computed from the snapshot itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["STATISTICS", "tree_statistics"]

_NS_PER_MINUTE = 60 * 10**9

STATISTICS = {
    "distinct_names": "distinct file names / files",
    "names_with_digit": "file names with a digit",
    "mtimes_with_ns": "file mtimes with a nanosecond part",
    "near_previous": "file mtime within 1 min of the file listed before it",
    "dir_mtime_newest": "directory mtime = the newest in its subtree",
}


def tree_statistics(snapshot: Path) -> dict[str, float]:
    """The shares in ``STATISTICS`` (0..1) for the snapshot in directory ``snapshot``."""
    columns = ["parent", "name", "kind", "mtime_ns", "tree_latest_mtime_ns"]
    parts = [pq.read_table(p, columns=columns) for p in sorted(snapshot.rglob("*.parquet"))]
    table = pa.concat_tables(parts)
    kind = np.asarray(pc.cast(table.column("kind"), pa.string()).to_pylist(), dtype=object)
    is_file = kind == "file"
    names = table.column("name").filter(pa.array(is_file))
    mtime = table.column("mtime_ns").to_numpy(zero_copy_only=False)
    parent = pc.cast(table.column("parent"), pa.string()).combine_chunks()
    same_dir = np.zeros(len(kind), dtype=bool)
    same_dir[1:] = pc.equal(parent[1:], parent[:-1]).to_numpy(zero_copy_only=False)
    pairs = same_dir & is_file & np.roll(is_file, 1)
    is_dir = kind == "dir"
    # null for non-directories: filled, so the column stays int64 (float64 would round ns)
    newest = pc.fill_null(table.column("tree_latest_mtime_ns"), -1).to_numpy()
    files = max(1, int(is_file.sum()))
    digits = pc.sum(pc.match_substring_regex(names, r"\d")).as_py() or 0
    return {
        "distinct_names": pc.count_distinct(names).as_py() / files,
        "names_with_digit": digits / files,
        "mtimes_with_ns": float(np.mean(mtime[is_file] % 10**9 != 0)) if is_file.any() else 0.0,
        "near_previous": float(
            np.mean(np.abs(mtime[pairs] - mtime[np.flatnonzero(pairs) - 1]) <= _NS_PER_MINUTE)
        )
        if pairs.any()
        else 0.0,
        "dir_mtime_newest": float(np.mean(mtime[is_dir] == newest[is_dir]))
        if is_dir.any()
        else 0.0,
    }

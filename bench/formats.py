"""What format 2's columns cost: a snapshot's bytes per entry with them and without them.

Format 2 added ``ctime_ns``, ``uid``, ``gid`` and ``mode``. ``format_bytes`` rewrites one
snapshot twice with the store's Parquet writer (``hygiene_nb.scan.snapshot.parquet_writer``:
the same compression, levels, dictionaries and encodings) and row group for row group as the
scan wrote it: once as it is (format 2, "after") and once without those four columns (format 1,
"before"), and weighs both files with ``os.stat``. The only difference between the two is the
columns. ``two_owner_bytes`` does the same on a small generated tree, half of whose files
(drawn at random, the hardest case for the ``uid``/``gid`` columns) are chowned to ``nobody``.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench.gen_tree import generate_tree
from hygiene_nb.scan.snapshot import FORMAT_2_COLUMNS, parquet_writer

__all__ = ["NOBODY", "format_bytes", "two_owner_bytes"]

NOBODY = 65534  # uid and gid of `nobody` on Debian and most Linux systems
TWO_OWNER_ENTRIES = 10_000  # creating files is most of its time (0.1-1 ms each here)


def _rewrite(part: Path, out: Path, *, drop: tuple[str, ...]) -> int:
    """``part`` written again to ``out`` without the ``drop`` columns; the new file's bytes."""
    source = pq.ParquetFile(part)
    meta = {k: v for k, v in (source.metadata.metadata or {}).items() if k != b"ARROW:schema"}
    schema = source.schema_arrow
    for name in drop:
        schema = schema.remove(schema.get_field_index(name))
    writer = parquet_writer(out, schema.remove_metadata())
    try:
        for group in range(source.num_row_groups):
            table = source.read_row_group(group).drop_columns(list(drop))
            # one row group per group read, as the scan wrote them
            writer.write_table(table, row_group_size=max(1, table.num_rows))
        writer.add_key_value_metadata(meta)
    finally:
        writer.close()
    return os.stat(out).st_size


def format_bytes(snapshot: Path, out: Path) -> dict[str, Any]:
    """Bytes per entry of the snapshot in directory ``snapshot`` as format 1 and as format 2.

    The rewrites are left in ``out`` (made if missing) for the caller to remove:
    ``f1-N.parquet`` and ``f2-N.parquet`` for the snapshot's N-th file.

    Returns:
        ``entries``, ``stored_bytes`` (the snapshot's files as the scan wrote them),
        ``format_1_bytes`` and ``format_2_bytes`` (the rewrites, weighed with ``os.stat``),
        ``format_1_bytes_per_entry``, ``format_2_bytes_per_entry``, ``format_2_cost`` (their
        difference per entry), and ``column_bytes_per_entry``: what each of the four columns'
        chunks take in the stored file.
    """
    parts = sorted(p for p in snapshot.rglob("*.parquet") if p.is_file())
    if not parts:
        raise FileNotFoundError(f"no snapshot file under {snapshot}")
    out.mkdir(parents=True, exist_ok=True)
    entries = stored = before = after = 0
    columns = dict.fromkeys(FORMAT_2_COLUMNS, 0)
    for number, part in enumerate(parts):
        footer = pq.ParquetFile(part).metadata
        entries += footer.num_rows
        stored += os.stat(part).st_size
        for group in range(footer.num_row_groups):
            chunks = footer.row_group(group)
            for i in range(chunks.num_columns):
                chunk = chunks.column(i)
                if chunk.path_in_schema in columns:
                    columns[chunk.path_in_schema] += chunk.total_compressed_size
        before += _rewrite(part, out / f"f1-{number}.parquet", drop=FORMAT_2_COLUMNS)
        after += _rewrite(part, out / f"f2-{number}.parquet", drop=())
    per = max(1, entries)
    return {
        "entries": entries,
        "stored_bytes": stored,
        "format_1_bytes": before,
        "format_2_bytes": after,
        "format_1_bytes_per_entry": round(before / per, 3),
        "format_2_bytes_per_entry": round(after / per, 3),
        "format_2_cost": round((after - before) / per, 3),
        # each new column's compressed chunks (pages and dictionaries), per entry
        "column_bytes_per_entry": {k: round(v / per, 3) for k, v in columns.items()},
    }


def two_owner_bytes(
    scratch: Path, *, entries: int = TWO_OWNER_ENTRIES, seed: int = 42
) -> dict[str, Any]:
    """``format_bytes`` of a scan of a generated tree half of whose files ``nobody`` owns.

    Needs root (to chown); otherwise returns ``{"skipped": why}``.
    """
    if os.geteuid() != 0:
        return {"skipped": "needs root to chown half of the files to nobody"}
    from hygiene_nb.api import scan_root

    work = Path(tempfile.mkdtemp(prefix="two-owners-", dir=scratch))
    try:
        root = work / "tree"
        generate_tree(root, entries=entries, seed=seed)
        rng = random.Random(seed)
        chowned = files = 0
        for top, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(top, name)
                files += 1
                if rng.random() < 0.5:
                    os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
                    chowned += 1
        info = scan_root(root, store=work / "store")
        result = format_bytes(Path(info.path), work / "rewrites")
        result.update(files=files, chowned=chowned, owners=sorted(info.user_names.values()))
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)

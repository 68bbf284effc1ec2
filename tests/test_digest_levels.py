"""Directory digests, hashed a level at a time as DuckDB streams each level's sorted lines,
equal what one ordered ``string_agg`` per level gives (the query they replace, kept here as the
reference): on a tree with every kind of entry, a generated tree, an excluded subtree and a
directory holding the store, with batches small enough that a directory's lines span many.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from bench.gen_tree import generate_tree
from hygiene_nb import api
from hygiene_nb.scan import digests
from hygiene_nb.scan.index import ScanInfo, digest_dir, find_scan
from hygiene_nb.scan.snapshot import query_engine
from hygiene_nb.store import Store
from tests.helpers import write

_REFERENCE_LEVEL = """
    INSERT INTO d
    SELECT e.self,
           CASE WHEN bool_or(e.unseen) OR bool_or(c.kind = 'dir'
                     AND cd.digest IS NULL AND c.self IS NOT NULL)
                     OR (bool_or(e.holds) AND count(c.self) = 0)
                THEN NULL
                ELSE sha256(coalesce(string_agg(
                    c.line || ':' || coalesce(cd.digest, ''), chr(10) ORDER BY c.line
                ), ''))
           END,
           ?
    FROM e
    LEFT JOIN e c ON c.p = e.self AND c.depth = ?
    LEFT JOIN d cd ON cd.self = c.self AND cd.depth = ?
    WHERE e.depth = ? AND e.kind = 'dir'
    GROUP BY e.self
"""


def _reference(store: Store, info: ScanInfo) -> dict[bytes, str | None]:
    with query_engine() as con:
        con.execute(
            f"CREATE TEMP TABLE e AS {digests._ENTRIES}", [digests._snapshot_file(store, info)]
        )
        con.execute("CREATE TEMP TABLE d (self BLOB, digest VARCHAR, depth INTEGER)")
        deepest = con.execute("SELECT coalesce(max(depth), 0) FROM e").fetchall()[0][0]
        for level in range(int(deepest), -1, -1):
            con.execute(_REFERENCE_LEVEL, [level, level + 1, level + 1, level])
        table = con.sql("SELECT self, digest FROM d").to_arrow_table()
    return _by_self(table)


def _by_self(table: pa.Table) -> dict[bytes, str | None]:
    selves = [bytes(s) for s in table.column("self").to_pylist()]
    assert len(set(selves)) == len(selves)  # one row per directory
    return dict(zip(selves, table.column("digest").to_pylist(), strict=True))


def _computed(store: Store, info: ScanInfo) -> dict[bytes, str | None]:
    kept = digest_dir(store, info) / "dirs.parquet"
    if kept.exists():
        kept.unlink()  # computed now, not read back
    return _by_self(digests._directory_digests(store, info))


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 7, 65_536])
def test_levels_hashed_as_they_stream_equal_one_ordered_aggregate(
    tricky_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int
) -> None:
    write(tricky_tree / "skipme" / "x", 3)  # excluded: no digest, nor for what holds it
    wide = tricky_tree / "wide"
    for i in range(40):  # one directory's lines across many batches
        write(wide / f"w{i:02d}", i)
    (tricky_tree / "deep-empty" / "a" / "b").mkdir(parents=True)
    store_path = tricky_tree / "inner" / "store"  # the store inside the tree: its sums only
    api.scan_root(tricky_tree, store=tmp_path / "first")
    api.scan_root(tricky_tree, store=store_path, excludes=("skipme/",))
    store = Store(store_path)
    info = find_scan(store, root=str(tricky_tree))
    monkeypatch.setattr(digests, "_BATCH_ROWS", batch_rows)
    found = _computed(store, info)
    reference = _reference(store, info)
    assert found == reference
    assert found[os.fsencode(tricky_tree / "skipme")] is None
    assert found[os.fsencode(tricky_tree)] is None  # it holds what was not seen
    assert found[os.fsencode(tricky_tree / "wide")] is not None
    assert found[os.fsencode(tricky_tree / "empty-dir")] is not None
    assert len({d for d in found.values() if d is not None}) > 10


def test_a_generated_tree_gives_the_reference_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "gen"
    generate_tree(root, 3_000, 7)
    api.scan_root(root, store=tmp_path / "store")
    store = Store(tmp_path / "store")
    info = find_scan(store, root=str(root))
    reference = _reference(store, info)
    for batch_rows in (5, 65_536):
        monkeypatch.setattr(digests, "_BATCH_ROWS", batch_rows)
        assert _computed(store, info) == reference
    assert all(d is not None for d in reference.values())  # everything was read whole
    assert len(reference) > 100

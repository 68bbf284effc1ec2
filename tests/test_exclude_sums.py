"""Excluded entries are recorded and counted nowhere; the store and quarantines count as du counts.

For patterns without ``/`` or ``!`` every directory's sums equal GNU du's with ``--exclude`` (both
walkers, a real tree with hard links, a sparse file and nested excluded directories); the
summary's figures leave excluded entries out; the store's and a quarantine's bytes stay in the
sums while nothing inside them is recorded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest

from hygiene_nb import api
from hygiene_nb.pathnames import raw_path
from hygiene_nb.query import views
from hygiene_nb.scan.digests import entry_digests
from hygiene_nb.scan.index import find_scan
from hygiene_nb.scan.request import ScanRequest, walk_options
from hygiene_nb.scan.walk import WalkerName, open_walker
from hygiene_nb.store import QUARANTINE_NAME, Store
from tests.helpers import du_bytes, write


def excluded_tree(root: Path) -> Path:
    """Hard links across excluded and kept names, a sparse file, nested excluded directories."""
    write(root / "a" / "keep.txt", 5000)
    os.link(root / "a" / "keep.txt", root / "a" / "twin.gz")  # a kept inode's excluded name
    (root / "b").mkdir()
    os.link(root / "a" / "keep.txt", root / "b" / "twin.txt")
    write(root / "a" / "only.gz", 7000)  # excluded, its other name kept below
    os.link(root / "a" / "only.gz", root / "b" / "only-kept")
    with (root / "a" / "sparse.gz").open("wb") as handle:
        handle.truncate(8 * 1024 * 1024)
    with (root / "b" / "sparse").open("wb") as handle:
        handle.truncate(3 * 1024 * 1024)
    write(root / "b" / "logs.gz" / "inner.txt", 900)  # an excluded directory
    write(root / "b" / "logs.gz" / "deeper.gz" / "x", 300)  # nested inside it
    write(root / "c" / "build" / "o.bin", 4000)  # `build` excluded by name at any depth
    write(root / "c" / "d" / "build" / "p.bin", 40)
    write(root / "c" / "d" / "e.txt", 12)
    write(root / "cache" / "x.bin", 333)
    write(root / "c" / "d" / "cAche", 77)  # `c?che`: a file this time
    (root / "empty").mkdir()
    return root


def scanned(store: Path, root: Path, walker: str, excludes: list[str]) -> dict[bytes, Any]:
    api.scan_root(root, store=store, walker=cast(WalkerName, walker), excludes=excludes)
    return {raw_path(r): r for r in api.load(str(root), store=store).to_pylist()}


@pytest.mark.parametrize("patterns", [["*.gz"], ["build", "c?che"], ["*.gz", "build"]])
def test_every_directory_sums_what_du_exclude_sums(
    tmp_path: Path, store: Path, walker: str, patterns: list[str]
) -> None:
    root = excluded_tree(tmp_path / "tree")
    rows = scanned(store, root, walker, patterns)
    assert any(r["excluded"] for r in rows.values())
    dirs = {p: r for p, r in rows.items() if r["kind"] == "dir" and not r["excluded"]}
    assert len(dirs) >= 6
    for path, row in dirs.items():
        assert row["tree_bytes"] == du_bytes(path, apparent=True, excludes=patterns), path
        assert row["tree_alloc"] == du_bytes(path, apparent=False, excludes=patterns), path
        assert row["partial"] is False


def test_an_excluded_entry_is_recorded_but_counted_in_no_figure(
    tmp_path: Path, store: Path, walker: str
) -> None:
    root = tmp_path / "tree"
    write(root / "big.gz", 90_000)
    write(root / "sub" / "huge.gz", 80_000)
    write(root / "sub" / "small.txt", 10)
    write(root / "sub" / "node_modules" / "dep.gz", 70_000)
    rows = scanned(store, root, walker, ["*.gz"])
    root_row = rows[os.fsencode(root)]
    assert rows[os.fsencode(root / "big.gz")]["excluded"] is True
    assert root_row["tree_bytes"] == du_bytes(root, apparent=True, excludes=["*.gz"])
    assert root_row["tree_files"] == 1

    s = api.summarize(str(root), store=store, top=10, as_of_scan=True)
    assert s.excluded == 3
    assert s.tree_bytes == root_row["tree_bytes"]
    assert sum(r.bytes for r in s.risk.values()) == s.tree_bytes
    assert sum(r.entries for r in s.risk.values()) == s.entries - s.excluded
    shown = [e.path for e in s.largest + s.largest_files + s.largest_dirs + s.children]
    assert shown and not [p for p in shown if p.endswith(".gz")]
    assert sum(sum(b.bytes.values()) for b in s.stale) == s.tree_bytes - sum(
        r["size"] for r in rows.values() if r["kind"] == "dir"
    )


# -- the store and quarantines ------------------------------------------------------------------


def walk_rows(root: Path, walker: str, skip: list[Path]) -> dict[bytes, dict[str, Any]]:
    top = os.fspath(root)
    options = walk_options(ScanRequest(root=top, skip_dirs=tuple(skip)), top)
    out: dict[bytes, dict[str, Any]] = {}
    for batch in open_walker(options, walker=cast(WalkerName, walker)).batches():
        for row in batch.to_pylist():
            path = row["name"] if not row["parent"] else os.path.join(row["parent"], row["name"])
            out[path] = row
    return out


def test_the_store_and_quarantines_count_as_du_counts_them_and_nothing_inside_is_recorded(
    tmp_path: Path, walker: str
) -> None:
    root = tmp_path / "tree"
    write(root / "data" / "f", 1000)
    quarantine = root / "data" / QUARANTINE_NAME
    write(quarantine / "batch-1" / "moved" / "big", 50_000)
    os.link(root / "data" / "f", quarantine / "batch-1" / "f-link")  # one inode, two places
    store = root / "home" / "store"
    write(store / "snapshots" / "s" / "part-0.parquet", 20_000)
    (store / "snapshots" / "s" / "deeper").mkdir()
    rows = walk_rows(root, walker, [store])
    for kept in (root, root / "data", root / "home", quarantine, store):
        row = rows[os.fsencode(kept)]
        assert row["flags"] == 0, kept
        assert row["tree_bytes"] == du_bytes(kept, apparent=True), kept
        assert row["tree_alloc"] == du_bytes(kept, apparent=False), kept
    inside = [p for p in rows if p.startswith((os.fsencode(quarantine), os.fsencode(store)))]
    assert sorted(inside) == sorted([os.fsencode(quarantine), os.fsencode(store)])


def test_a_scan_never_classifies_what_the_store_holds_but_counts_its_bytes(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    write(root / "data" / "f", 1000)
    write(root / "data" / QUARANTINE_NAME / "batch-1" / "old.log", 60_000)
    store = root / "store"
    api.scan_root(root, store=store)
    rows = {raw_path(r): r for r in api.load(str(root), store=store).to_pylist()}
    quarantine = os.fsencode(root / "data" / QUARANTINE_NAME)
    assert not [p for p in rows if p.startswith(quarantine + b"/")]
    assert not [p for p in rows if p.startswith(os.fsencode(store) + b"/")]
    assert rows[quarantine]["tree_bytes"] == du_bytes(quarantine, apparent=True)
    assert rows[os.fsencode(root / "data")]["tree_bytes"] == du_bytes(root / "data", apparent=True)
    s = api.summarize(str(root), store=store, top=10, as_of_scan=True)
    by_path = {e.path: e for e in s.largest_dirs + s.children}
    assert by_path[os.fsdecode(quarantine)].risk == "high"
    assert by_path[os.fsdecode(quarantine)].rule == "store"
    assert by_path[str(store)].rule == "store"


def test_the_treemap_gives_an_excluded_entry_no_area(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "tree"
    write(root / "big.gz", 90_000)
    write(root / "sub" / "huge.gz", 80_000)
    write(root / "sub" / "small.txt", 10)
    api.scan_root(root, store=store, excludes=["*.gz"])
    info = find_scan(Store(store), root=str(root))
    whole = views.browse_frame(views.classified_as_of_scan(info, store=store))
    nodes = views.treemap_of(str(root), store=store)
    assert nodes.to_dict("records") == views.treemap_nodes(whole, str(root)).to_dict("records")
    area = dict(zip(nodes["id"], nodes["bytes"], strict=True))
    assert area[str(root / "big.gz")] == 0
    assert area[str(root / "sub" / "huge.gz")] == 0
    assert area[str(root / "sub")] == du_bytes(root / "sub", apparent=True, excludes=["*.gz"])


def test_a_quarantine_whose_entries_are_not_recorded_has_no_digest(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    write(root / "data" / QUARANTINE_NAME / "batch-1" / "old.log", 60_000)
    (root / "empty" / QUARANTINE_NAME).mkdir(parents=True)  # holds nothing: nothing unseen
    write(root / "other" / "f", 10)
    store = tmp_path / "store"
    info = api.scan_root(root, store=store)
    held = [root / "data" / QUARANTINE_NAME, root / "data", root]
    seen = [root / "empty" / QUARANTINE_NAME, root / "empty", root / "other"]
    digests = entry_digests(Store(store), info, [os.fsencode(p) for p in held + seen])
    assert set(digests) == {os.fsencode(p) for p in seen}

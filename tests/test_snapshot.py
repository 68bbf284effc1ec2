"""The snapshot store: layout, permissions, metadata, loading, listing and pruning."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.errors import SnapshotNotFound, UsageError
from hygiene_nb.scan import walk_options
from hygiene_nb.snapshot import read_scan_info
from hygiene_nb.store import resolve_store
from tests.conftest import write


def test_snapshot_lands_in_a_hive_partition_with_private_modes(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 3)
    info = api.scan_root(tmp_path / "r", store=store)
    part = Path(info.path)
    assert part.name == f"scan={info.scan_id}"
    assert part.parent.name.startswith("root=") and part.parent.parent.name.startswith("host=")
    for path in [store, *store.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path


def test_scan_metadata_travels_in_the_parquet_footer_and_the_index(
    tmp_path: Path, store: Path
) -> None:
    write(tmp_path / "r" / "f", 3)
    info = api.scan_root(tmp_path / "r", store=store, excludes=["*.tmp"])
    footer = read_scan_info(Path(info.path) / "part-0.parquet")
    assert footer.scan_id == info.scan_id and footer.root == str(tmp_path / "r")
    assert footer.entries == 2 and footer.fs_total > 0 and footer.tool_version
    assert footer.options["excludes"] == ["*.tmp"]
    index = [json.loads(line) for line in (store / "index.jsonl").read_text().splitlines()]
    assert [i["scan_id"] for i in index] == [info.scan_id]


def test_duckdb_reads_the_dataset_as_is(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "a" / "f", 10)
    api.scan_root(tmp_path / "r", store=store)
    api.scan_root(tmp_path / "r", store=store)
    glob = str(store / "snapshots" / "**" / "*.parquet")
    result = duckdb.execute(
        f"select count(distinct scan), count(*) from read_parquet('{glob}', hive_partitioning=true)"
    ).fetchall()
    assert result == [(2, 6)]  # r, r/a, r/a/f in each scan


@pytest.mark.parametrize("walker", ["c", "python"])
def test_each_row_group_holds_its_directories_after_everything_else(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch, walker: str
) -> None:
    for d in range(30):
        for f in range(3):
            write(tmp_path / "r" / f"d{d}" / f"f{f}", f)
    (tmp_path / "r" / "d0" / "link").symlink_to("f0")
    # small walk batches, so directories and files arrive interleaved batch after batch
    monkeypatch.setattr(
        "hygiene_nb.api.walk_options", lambda *a: replace(walk_options(*a), batch_rows=8)
    )
    info = api.scan_root(tmp_path / "r", store=store, walker=walker)  # type: ignore[arg-type]
    parquet = pq.ParquetFile(Path(info.path) / "part-0.parquet")
    assert parquet.metadata.num_rows == 122
    for group in range(parquet.metadata.num_row_groups):
        kinds = parquet.read_row_group(group, columns=["kind"]).column("kind").to_pylist()
        first_dir = kinds.index("dir")
        assert set(kinds[first_dir:]) == {"dir"}
        assert set(kinds[:first_dir]) == {"file", "symlink"}


def test_load_reads_only_the_columns_asked_for(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 3)
    api.scan_root(tmp_path / "r", store=store)
    table = api.load(str(tmp_path / "r"), store=store, columns=["path", "size"])
    assert table.column_names == ["path", "size"]
    assert sorted(table.column("path").to_pylist()) == [
        str(tmp_path / "r"),
        str(tmp_path / "r" / "f"),
    ]


def test_load_of_an_unknown_root_says_to_scan_first(store: Path) -> None:
    with pytest.raises(SnapshotNotFound, match="hygiene-nb scan"):
        api.load("/nowhere", store=store)


def test_latest_snapshot_is_loaded_by_default(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 3)
    api.scan_root(tmp_path / "r", store=store)
    write(tmp_path / "r" / "g", 5)
    second = api.scan_root(tmp_path / "r", store=store)
    assert api.summarize(str(tmp_path / "r"), store=store).scan_id == second.scan_id
    assert api.load(str(tmp_path / "r"), store=store).num_rows == 3


def test_store_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_store().root == tmp_path / "xdg" / "hygiene-nb"
    monkeypatch.setenv("HYGIENE_NB_STORE", str(tmp_path / "env"))
    assert resolve_store().root == tmp_path / "env"
    assert resolve_store(tmp_path / "arg").root == tmp_path / "arg"


def test_prune_never_removes_the_latest_snapshot_of_a_root(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "a" / "f", 1)
    write(tmp_path / "b" / "f", 1)
    a_scans = [api.scan_root(tmp_path / "a", store=store) for _ in range(3)]
    b_only = api.scan_root(tmp_path / "b", store=store)
    removed = api.prune_snapshots(store=store, keep=1)
    assert {s.scan_id for s in removed} == {a_scans[0].scan_id, a_scans[1].scan_id}
    left = {s.scan_id for s in api.list_snapshots(store=store)}
    assert left == {a_scans[2].scan_id, b_only.scan_id}
    assert not Path(a_scans[0].path).exists() and Path(a_scans[2].path).exists()
    # Even "older than 0 days" keeps the latest of each root.
    time.sleep(0.01)
    assert api.prune_snapshots(store=store, older_than_days=0) == []


def test_prune_dry_run_removes_nothing(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "a" / "f", 1)
    first = api.scan_root(tmp_path / "a", store=store)
    api.scan_root(tmp_path / "a", store=store)
    assert [s.scan_id for s in api.prune_snapshots(store=store, keep=1, dry_run=True)] == [
        first.scan_id
    ]
    assert Path(first.path).exists() and len(api.list_snapshots(store=store)) == 2


def test_prune_needs_a_criterion(store: Path) -> None:
    with pytest.raises(UsageError):
        api.prune_snapshots(store=store)


def test_failed_scan_leaves_no_snapshot_behind(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "r" / "f", 1)

    def broken(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("hygiene_nb.api._take_root_totals", broken)
    with pytest.raises(KeyboardInterrupt):
        api.scan_root(tmp_path / "r", store=store)
    assert list((store / "snapshots").rglob("*.parquet")) == []
    assert list((store / ".incoming").iterdir()) == []
    assert not (store / "index.jsonl").exists()


names = st.binary(min_size=1, max_size=60).filter(
    lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(names, min_size=1, max_size=8, unique=True),
    st.lists(st.integers(0, 5000), min_size=8, max_size=8),
)
def test_any_names_and_sizes_round_trip_through_a_snapshot(
    tmp_path_factory: pytest.TempPathFactory, files: list[bytes], sizes: list[int]
) -> None:
    root = tmp_path_factory.mktemp("rt")
    store = tmp_path_factory.mktemp("store")
    want = {}
    for name, size in zip(files, sizes, strict=False):
        path = os.fsencode(root) + b"/" + name
        with open(path, "wb") as handle:
            handle.write(b"\0" * size)
        want[path] = size
    api.scan_root(root, store=store)
    from hygiene_nb.snapshot import raw_path

    got = {
        raw_path(r): r["size"]
        for r in api.load(str(root), store=store).to_pylist()
        if r["depth"] == 1
    }
    assert got == want
    assert pq.read_metadata(next(store.rglob("*.parquet"))).num_rows == len(want) + 1


def test_a_copied_store_reads_its_own_snapshots(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 3)
    api.scan_root(tmp_path / "r", store=store)
    import shutil

    shutil.copytree(store, tmp_path / "copy")
    shutil.rmtree(store)
    assert api.load(str(tmp_path / "r"), store=tmp_path / "copy").num_rows == 2

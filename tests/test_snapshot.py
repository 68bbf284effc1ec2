"""The snapshot store: layout, permissions, metadata, loading, listing and pruning."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.errors import SnapshotNotFound, UsageError
from hygiene_nb.scan.request import walk_options
from hygiene_nb.scan.snapshot import entry_paths, read_scan_info
from hygiene_nb.store import resolve_store
from tests.helpers import as_format_1, du_bytes, write


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
        "hygiene_nb.api.scan.walk_options", lambda *a: replace(walk_options(*a), batch_rows=8)
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

    monkeypatch.setattr("hygiene_nb.api.scan._take_root_totals", broken)
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
    from hygiene_nb.pathnames import raw_path

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


def test_format_2_records_ctime_owner_group_and_mode_as_lstat_does(
    tmp_path: Path, store: Path, walker: str
) -> None:
    root = tmp_path / "r"
    write(root / "a" / "f", 5)
    write(root / "g", 1)
    os.chmod(root / "g", 0o4751)
    (root / "a" / "link").symlink_to("f")
    os.mkfifo(root / "a" / "pipe")
    if os.geteuid() == 0:  # a second owner and group, as on a shared tree
        os.chown(root / "g", 65534, 65534)
        os.lchown(root / "a" / "link", 1, 2)
    info = api.scan_root(root, store=store, walker=walker)  # type: ignore[arg-type]
    assert info.format_version == 2
    assert read_scan_info(Path(info.path) / "part-0.parquet").format_version == 2
    meta = pq.read_metadata(Path(info.path) / "part-0.parquet").metadata
    assert meta[b"hygiene_nb.format_version"] == b"2"
    rows = api.load(str(root), store=store).to_pylist()
    assert len(rows) == 6
    for row in rows:
        st_ = os.lstat(row["path"])
        assert (row["ctime_ns"], row["uid"], row["gid"], row["mode"]) == (
            st_.st_ctime_ns,
            st_.st_uid,
            st_.st_gid,
            st_.st_mode,
        ), row["path"]


def test_a_format_1_snapshot_still_loads_summarizes_and_charts(tmp_path: Path, store: Path) -> None:
    from hygiene_nb.query import views

    root = tmp_path / "r"
    write(root / "a" / "f", 10)
    old = api.scan_root(root, store=store)
    then = du_bytes(root / "a", apparent=True)
    as_format_1(old, store)
    write(root / "a" / "g", 7)
    new = api.scan_root(root, store=store)
    now = du_bytes(root / "a", apparent=True)
    [first, second] = api.list_snapshots(store=store, root=str(root))
    assert (first.format_version, second.format_version) == (1, 2)
    table = api.load(str(root), store=store, scan_id=old.scan_id)
    assert table.num_rows == 3
    for column in ("ctime_ns", "uid", "gid", "mode"):
        assert table.column(column).null_count == 3  # unknown, never zero
    some = api.load(str(root), store=store, scan_id=old.scan_id, columns=["path", "uid", "size"])
    assert some.column_names == ["path", "uid", "size"]
    assert api.summarize(str(root), store=store, scan_id=old.scan_id).tree_bytes == old.tree_bytes
    growth = views.child_growth(str(root), store=store)  # one DuckDB query over both formats
    assert sorted(set(growth["scan_id"])) == sorted([old.scan_id, new.scan_id])
    assert growth.set_index("scan_id")["bytes"].to_dict() == {old.scan_id: then, new.scan_id: now}


def test_a_plan_from_a_format_1_snapshot_is_refused(tmp_path: Path, store: Path) -> None:
    from hygiene_nb.errors import SnapshotOutdated

    root = tmp_path / "r"
    write(root / "junk.tmp", 10)
    info = api.scan_root(root, store=store)
    as_format_1(info, store)
    api.annotate([str(root / "junk.tmp")], store=store, decision="delete")
    with pytest.raises(SnapshotOutdated, match=r"scan .* again"):
        api.make_plan(root, store=store)


def test_a_snapshot_from_a_newer_format_is_refused_not_misread(tmp_path: Path, store: Path) -> None:
    from hygiene_nb.errors import SnapshotTooNew

    root = tmp_path / "r"
    write(root / "f", 1)
    info = api.scan_root(root, store=store)
    part = Path(info.path) / "part-0.parquet"
    table = pq.read_table(part)
    meta = {k: v for k, v in pq.read_metadata(part).metadata.items() if k != b"ARROW:schema"}
    meta[b"hygiene_nb.format_version"] = b"99"
    pq.write_table(table.replace_schema_metadata(meta), part)
    with pytest.raises(SnapshotTooNew, match="format 99"):
        api.load(str(root), store=store)


def test_entry_paths_are_the_same_text_made_either_way_on_a_real_snapshot(
    tmp_path: Path, store: Path
) -> None:
    """A large table's paths (made in SQL) equal those of its small pieces (made by Arrow)."""
    root = tmp_path / "r"
    for d in range(30):
        for f in range(800):  # 24,000 files: above the size DuckDB makes the paths from
            write(root / f"d{d}" / f"é {f}.txt", 1)
    (root / "odd").mkdir()
    os.mkdir(os.fsencode(root / "odd") + b"/bad-\xff")
    info = api.scan_root(root, store=store)
    table = pq.read_table(Path(info.path) / "part-0.parquet")
    assert table.num_rows > 24_000
    big = entry_paths(table).to_pylist()
    pieces = [
        p for start in range(0, table.num_rows, 5_000)
        for p in entry_paths(table.slice(start, 5_000)).to_pylist()
    ]  # fmt: skip
    parents, names = table.column("parent").to_pylist(), table.column("name").to_pylist()
    reference = [
        n if p is None else os.path.join(p, n) for p, n in zip(parents, names, strict=True)
    ]
    assert big == pieces == reference
    whole = entry_paths(table, whole=True)  # the same, in one chunk (what the widget keeps)
    assert whole.num_chunks == 1 and whole.to_pylist() == big
    assert big[parents.index(None)] == str(root)
    assert any(p.endswith("/odd/bad-\\xff") for p in big)  # the display text of the bad byte
    # a child of "/" is "/x", never "//x", either way
    top = pa.table({"parent": pa.array(["/"] * 20_001, pa.string()), "name": ["x"] * 20_001})
    assert set(entry_paths(top).to_pylist()) == {"/x"}
    assert entry_paths(top.slice(0, 3)).to_pylist() == ["/x"] * 3
    # a row without a name has no path either way (never "/a/")
    nameless = pa.table(
        {"parent": pa.array(["/a"] * 20_001), "name": pa.nulls(20_001, pa.string())}
    )
    assert entry_paths(nameless).null_count == 20_001
    assert entry_paths(nameless.slice(0, 3)).null_count == 3


_NAMES = st.text(
    st.characters(exclude_characters="/\0", exclude_categories=["Cs"]), min_size=1, max_size=6
)


@settings(max_examples=200, deadline=None)
@given(
    parent=st.lists(_NAMES, max_size=4),
    name=_NAMES,
    root_depth=st.integers(0, 4),
)
def test_row_keys_give_back_the_parent_and_name_a_path_is_made_of(
    parent: list[str], name: str, root_depth: int
) -> None:
    """The inverse of PATH_SQL (checked by DuckDB itself), for the root's row, rows below "/"
    and names with spaces, dots, backslashes and newlines; a text no row shows finds none."""
    from hygiene_nb.scan.snapshot import PATH_SQL, row_keys

    parent_path = "/" + "/".join(parent)
    root = "/" + "/".join([*parent, name][:root_depth]) if root_depth else "/"
    rows = pa.table(
        {
            "parent": pa.array([None, parent_path], pa.string()),
            "name": pa.array([root, name], pa.string()),
        }
    )
    shown = duckdb.connect().execute(f"SELECT {PATH_SQL} AS path FROM rows").fetchall()
    texts = [p for (p,) in shown]
    keys = row_keys([*texts, "/" + texts[1], texts[1] + "/", "x"], root)
    found = list(
        zip(keys.column("parent").to_pylist(), keys.column("name").to_pylist(), strict=True)
    )
    assert found[0] == (None, root)
    if texts[1] != root:
        assert found[1] == (parent_path, name)
    made = set(zip(rows.column("parent").to_pylist(), rows.column("name").to_pylist(), strict=True))
    assert not made & set(found[2:])  # "//…", a trailing slash, no slash: no row's

"""Scanning real trees: sums against GNU du, kinds, names, errors, excludes and budgets."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import ExcludeInvalid, RootInvalid
from hygiene_nb.pathnames import raw_path
from hygiene_nb.scan.request import parse_ignore_lines
from hygiene_nb.scan.walk import pywalk
from tests.helpers import as_nobody, bind_mount, du_bytes, tmpfs, world_readable_tmpdir, write


def rows_of(store: Path, root: Path, walker: str, **kwargs: Any) -> dict[bytes, dict[str, Any]]:
    api.scan_root(root, store=store, walker=walker, **kwargs)  # type: ignore[arg-type]
    table = api.load(str(root), store=store)
    return {raw_path(r): r for r in table.to_pylist()}


def test_directory_sums_equal_gnu_du(tricky_tree: Path, store: Path, walker: str) -> None:
    rows = rows_of(store, tricky_tree, walker)
    dirs = {p: r for p, r in rows.items() if r["kind"] == "dir"}
    assert len(dirs) > 45  # the deep chain alone has 41
    for path, row in dirs.items():
        assert row["tree_bytes"] == du_bytes(path, apparent=True), path
        assert row["tree_alloc"] == du_bytes(path, apparent=False), path
        assert row["partial"] is False


def test_every_entry_is_recorded_once_with_its_kind(
    tricky_tree: Path, store: Path, walker: str
) -> None:
    rows = rows_of(store, tricky_tree, walker)
    found = subprocess.run(
        ["find", str(tricky_tree), "-print0"], check=True, capture_output=True
    ).stdout
    assert set(rows) == set(found.rstrip(b"\0").split(b"\0"))
    root = os.fsencode(tricky_tree)
    assert rows[root + b"/a/to-dir"]["kind"] == "symlink"
    assert rows[root + b"/a/b/c/dangling"]["kind"] == "symlink"
    assert rows[root + b"/d/fifo"]["kind"] == "other"
    assert rows[root + b"/d/sparse"]["size"] == 10 * 1024 * 1024
    assert rows[root + b"/d/sparse"]["alloc"] < 1024 * 1024
    assert rows[root]["depth"] == 0 and rows[root]["parent"] is None


def test_symlinked_directory_is_not_followed(tricky_tree: Path, store: Path, walker: str) -> None:
    rows = rows_of(store, tricky_tree, walker)
    root = os.fsencode(tricky_tree)
    assert not [p for p in rows if p.startswith(root + b"/a/to-dir/")]
    link = rows[root + b"/a/to-dir"]
    assert link["size"] == len(os.fsencode(tricky_tree / "d"))


def test_fifo_is_never_opened(tmp_path: Path, store: Path, walker: str) -> None:
    os.mkfifo(tmp_path / "pipe")
    # Opening a fifo for reading with no writer would block: the scan must finish regardless.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hygiene_nb",
            "scan",
            str(tmp_path),
            "--store",
            str(store),
            "--walker",
            walker,
            "--json",
        ],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_non_utf8_names_are_kept_byte_for_byte(tricky_tree: Path, store: Path, walker: str) -> None:
    rows = rows_of(store, tricky_tree, walker)
    bad = os.fsencode(tricky_tree) + b"/bad/name-\xff\xfe"
    assert bad in rows
    row = rows[bad]
    assert row["name_raw"] == b"name-\xff\xfe"
    assert os.path.exists(raw_path(row))
    assert rows[os.fsencode(tricky_tree / "uni" / "ünïcödé-名前")]["name_raw"] is None


def test_hard_links_count_once_in_the_root_total(tmp_path: Path, store: Path, walker: str) -> None:
    write(tmp_path / "t" / "x" / "big", 100_000)
    for i in range(3):
        (tmp_path / "t" / f"y{i}").mkdir()
        os.link(tmp_path / "t" / "x" / "big", tmp_path / "t" / f"y{i}" / "big")
    info = api.scan_root(tmp_path / "t", store=store, walker=walker)  # type: ignore[arg-type]
    assert info.tree_bytes == du_bytes(tmp_path / "t", apparent=True)
    assert info.tree_files == 1  # one inode, four names


def test_store_inside_the_root_is_counted_and_nothing_inside_it_recorded(
    tmp_path: Path, walker: str
) -> None:
    write(tmp_path / "data" / "f", 10)
    store = tmp_path / "store"
    api.scan_root(tmp_path, store=store, walker=walker)  # type: ignore[arg-type]
    rows = {raw_path(r): r for r in api.load(str(tmp_path), store=store).to_pylist()}
    store_row = rows[os.fsencode(store)]
    assert store_row["excluded"] is False
    assert store_row["tree_bytes"] > store_row["size"]  # what it held while it was walked
    assert not [p for p in rows if p.startswith(os.fsencode(store) + b"/")]


@pytest.mark.parametrize(
    ("patterns", "gone", "kept"),
    [
        (["*.log"], ["a/x.log", "b/c/y.log"], ["a/x.txt"]),
        (["/a"], ["a/x.log", "a/x.txt"], ["b/c/y.log", "b/a"]),
        (["build/"], ["b/build/o.bin"], ["b/c/build"]),  # dir_only: the file 'build' stays
        (["*.log", "!keep.log"], ["a/x.log"], ["b/keep.log"]),
        (["**/c"], ["b/c/y.log"], ["a/x.txt"]),
        (["b/**/y.log"], ["b/c/y.log"], ["a/x.log"]),
    ],
)
def test_excludes_follow_gitignore_rules(
    tmp_path: Path, store: Path, walker: str, patterns: list[str], gone: list[str], kept: list[str]
) -> None:
    root = tmp_path / "r"
    for rel in ["a/x.log", "a/x.txt", "b/c/y.log", "b/keep.log", "b/build/o.bin", "b/a"]:
        write(root / rel, 5)
    write(root / "b" / "c" / "build", 3)
    rows = rows_of(store, root, walker, excludes=patterns)
    base = os.fsencode(root) + b"/"
    for rel in gone:
        path = base + rel.encode()
        # Either the entry itself is recorded as excluded, or an excluded ancestor hid it.
        recorded = rows.get(path)
        if recorded is not None:
            assert recorded["excluded"] is True, rel
        else:
            assert any(
                rows.get(base + b"/".join(rel.encode().split(b"/")[:i]), {}).get("excluded")
                for i in range(1, rel.count("/") + 1)
            ), rel
    for rel in kept:
        assert rows[base + rel.encode()]["excluded"] is False, rel


def test_hygieneignore_file_at_the_root_is_read(tmp_path: Path, store: Path, walker: str) -> None:
    root = tmp_path / "r"
    write(root / ".hygieneignore", data=b"# caches\nnode_modules/\n")
    write(root / "app" / "node_modules" / "pkg" / "index.js", 50)
    write(root / "app" / "main.js", 5)
    rows = rows_of(store, root, walker)
    nm = rows[os.fsencode(root / "app" / "node_modules")]
    assert nm["excluded"] is True and nm["tree_bytes"] is None
    assert os.fsencode(root / "app" / "node_modules" / "pkg") not in rows
    assert rows[os.fsencode(root / "app" / "main.js")]["excluded"] is False


def test_malformed_exclude_is_a_clear_error() -> None:
    with pytest.raises(ExcludeInvalid, match="line 2"):
        parse_ignore_lines(["ok", "/"], source=".hygieneignore")


def test_budget_is_shared_fairly_by_the_roots_children(
    tmp_path: Path, store: Path, walker: str
) -> None:
    root = tmp_path / "r"
    for d in range(30):
        for f in range(40):
            write(root / "big" / f"d{d:02d}" / f"f{f:02d}", 1)
    for small in ("a", "b"):
        for f in range(10):
            write(root / small / "sub" / f"f{f}", 1)
    rows = rows_of(store, root, walker, max_entries=300)
    assert len(rows) <= 300
    for small in ("a", "b"):
        row = rows[os.fsencode(root / small)]
        assert row["partial"] is False and row["tree_files"] == 10
    assert rows[os.fsencode(root / "big")]["partial"] is True
    assert rows[os.fsencode(root)]["partial"] is True
    cut = [r for r in rows.values() if r["budget_cut"]]
    assert cut and all(r["partial"] for r in cut)


def test_time_budget_marks_unlisted_directories_partial(
    tmp_path: Path, store: Path, walker: str
) -> None:
    root = tmp_path / "r"
    for d in range(5):
        write(root / f"d{d}" / "deeper" / "f", 1)
    info = api.scan_root(root, store=store, walker=walker, max_seconds=1e-9)  # type: ignore[arg-type]
    assert info.partial is True
    rows = {raw_path(r): r for r in api.load(str(root), store=store).to_pylist()}
    assert all(rows[os.fsencode(root / f"d{d}")]["partial"] for d in range(5))


def test_mount_point_is_recorded_and_not_crossed(tmp_path: Path, store: Path, walker: str) -> None:
    root = tmp_path / "r"
    mnt = root / "mnt"
    mnt.mkdir(parents=True)
    write(root / "f", 10)
    with tmpfs(mnt):
        write(mnt / "inside", 100)
        rows = rows_of(store, root, walker, one_file_system=True)
        assert rows[os.fsencode(mnt)]["mount_point"] is True
        assert os.fsencode(mnt / "inside") not in rows
        crossing = rows_of(store, root, walker)
        assert os.fsencode(mnt / "inside") in crossing


@pytest.mark.parametrize("self_bind", [False, True])
def test_a_same_filesystem_bind_mount_is_a_mount_point_too(
    tmp_path: Path, store: Path, walker: str, self_bind: bool
) -> None:
    """Same ``st_dev`` as the root: only its mount id says another mount is there."""
    root = tmp_path / "r"
    outside = tmp_path / "outside"
    write(outside / "precious", 100)
    mnt = root / "mnt"
    mnt.mkdir(parents=True)
    write(mnt / "own", 5)
    write(root / "f", 10)
    with bind_mount(mnt if self_bind else outside, mnt):
        assert os.stat(mnt).st_dev == os.stat(root).st_dev
        rows = rows_of(store, root, walker, one_file_system=True)
        assert rows[os.fsencode(mnt)]["mount_point"] is True
        assert not any(p.startswith(os.fsencode(mnt) + b"/") for p in rows)
        assert rows[os.fsencode(root / "f")]["mount_point"] is False


def _walk_as_nobody(root: Path, walker: str) -> list[dict[str, Any]]:
    """Walk ``root`` in a forked child running as user 'nobody'; return its rows."""
    from hygiene_nb.scan.walk import open_walker
    from hygiene_nb.scan.walk.spec import WalkOptions

    def walk() -> list[dict[str, Any]]:
        found = open_walker(WalkOptions(root=os.fsencode(root)), walker=walker)  # type: ignore[arg-type]
        rows = [r for b in found.batches() for r in b.to_pylist()]
        for r in rows:
            r["parent"], r["name"] = r["parent"].hex(), r["name"].hex()
        return rows

    rows: list[dict[str, Any]] = as_nobody(walk)
    for r in rows:
        r["path"] = os.fsdecode(bytes.fromhex(r["parent"]) + b"/" + bytes.fromhex(r["name"]))
    return rows


def test_unreadable_directory_is_unknown_not_empty(tmp_path: Path, walker: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to user 'nobody' (root itself bypasses permissions)")
    with world_readable_tmpdir() as base:
        root = base / "r"
        write(root / "open" / "f", 10)
        write(root / "locked" / "secret", 1000)
        (root / "locked").chmod(0)
        rows = {r["path"]: r for r in _walk_as_nobody(root, walker)}
        locked = rows[str(root / "locked")]
        assert locked["errno"] == errno.EACCES
        assert locked["partial"] is True
        assert str(root / "locked" / "secret") not in rows
        top = next(r for r in rows.values() if r["depth"] == 0)
        assert top["partial"] is True
        assert rows[str(root / "open")]["partial"] is False


def test_entry_that_vanishes_mid_scan_is_an_error_not_zero(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "r"
    write(root / "keep" / "f", 10)
    write(root / "doomed" / "f", 10)
    real_open = pywalk._open_dir

    def open_after_removing(path: bytes) -> int:
        if path == os.fsencode(root / "doomed"):
            shutil.rmtree(root / "doomed")  # the tree changes under the walker
        return real_open(path)

    monkeypatch.setattr(pywalk, "_open_dir", open_after_removing)
    info = api.scan_root(root, store=store, walker="python")
    rows = {r["path"]: r for r in api.load(str(root), store=store).to_pylist()}
    assert rows[str(root / "doomed")]["error"] == "vanished"
    assert rows[str(root)]["partial"] is True
    assert info.partial is True and info.errors == 1
    assert rows[str(root / "keep")]["partial"] is False


def test_directory_replaced_by_another_is_detected(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "r"
    write(root / "swap" / "f", 10)
    real_open = pywalk._open_dir

    def swap_then_open(path: bytes) -> int:
        if path == os.fsencode(root / "swap"):
            os.rename(root / "swap", tmp_path / "swapped-out")  # keeps the old inode alive
            (root / "swap").mkdir()  # same name, another inode
        return real_open(path)

    monkeypatch.setattr(pywalk, "_open_dir", swap_then_open)
    api.scan_root(root, store=store, walker="python")
    rows = {r["path"]: r for r in api.load(str(root), store=store).to_pylist()}
    assert rows[str(root / "swap")]["error"] == "vanished"
    assert str(root / "swap" / "f") not in rows


@pytest.mark.parametrize("bad", ["missing", "file", "link"])
def test_root_must_be_a_real_directory(tmp_path: Path, store: Path, bad: str) -> None:
    target = tmp_path / bad
    if bad == "file":
        write(target, 1)
    elif bad == "link":
        (tmp_path / "real").mkdir()
        target.symlink_to(tmp_path / "real")
    with pytest.raises(RootInvalid):
        api.scan_root(target, store=store)
    assert not (store / "snapshots").exists() or not any((store / "snapshots").rglob("*.parquet"))


def test_scan_changes_nothing_in_the_tree(tricky_tree: Path, store: Path, walker: str) -> None:
    def state() -> list[tuple[bytes, int, int, int, int]]:
        out = []
        for dirpath, dirnames, filenames in os.walk(os.fsencode(tricky_tree)):
            for name in dirnames + filenames:
                st = os.lstat(os.path.join(dirpath, name))
                out.append(
                    (os.path.join(dirpath, name), st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
                )
        return sorted(out)

    before = state()
    api.scan_root(tricky_tree, store=store, walker=walker)  # type: ignore[arg-type]
    assert state() == before


def test_progress_reports_growing_entry_counts(tmp_path: Path, store: Path, walker: str) -> None:
    for d in range(50):
        write(tmp_path / "r" / f"d{d}" / "f", 1)
    seen: list[int] = []
    info = api.scan_root(tmp_path / "r", store=store, walker=walker, progress=seen.append)  # type: ignore[arg-type]
    assert seen and seen == sorted(seen) and seen[-1] == info.entries == 101


def test_a_root_whose_path_is_not_utf8_is_refused_clearly(tmp_path: Path, store: Path) -> None:
    bad = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(bad)
    with pytest.raises(RootInvalid, match="not valid UTF-8"):
        api.scan_root(os.fsdecode(bad), store=store)


def test_entry_budgets_are_fair_with_the_default_walker_every_time(
    tmp_path: Path, store: Path
) -> None:
    # Each child: 5 files and a deep directory of 30. A budget of 30 covers every child's own
    # listing (1 + 3 + 3 x 6 = 22) but not the deep ones: no child may be cut before its turn.
    root = tmp_path / "r"
    for child in ("a", "b", "c"):
        for f in range(5):
            write(root / child / f"f{f}", 1)
        for f in range(30):
            write(root / child / "deep" / f"g{f:02d}", 1)
    for _ in range(15):
        rows = rows_of(store, root, "auto", max_entries=30)
        assert len(rows) <= 30
        for child in ("a", "b", "c"):
            row = rows[os.fsencode(root / child)]
            assert row["budget_cut"] is False, child  # its own listing was read
            assert row["partial"] is True  # its deep directory was not (fully)


def test_a_scan_does_not_make_pyarrow_import_pandas(tmp_path: Path) -> None:
    # pyarrow imports pandas (0.2 s) the first time it converts a Python value; the scan
    # builds its constants from bytes so that the command never pays for it
    root = tmp_path / "r"
    write(root / "a" / "x.txt", 10)
    write(root / "b" / "y.bin", 5)
    (root / "link").symlink_to("a")
    code = (
        "import sys\n"
        "from hygiene_nb.cli import main\n"
        f"sys.argv = ['hygiene-nb', 'scan', {str(root)!r}, '--store', {str(tmp_path / 's')!r},"
        " '--exclude', 'b', '--json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('pandas' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"
    assert json.loads(done.stdout)["entries"] == 5  # root, a, a/x.txt, link, b (excluded)


def test_a_scan_with_no_remembered_rule_loads_no_classification(tmp_path: Path) -> None:
    # after the walk, a scan fills in the remembered rules; with none there is nothing to
    # classify, and DuckDB and the classification (about 0.2 s of CPU) stay unloaded
    root, store = tmp_path / "r", tmp_path / "s"
    write(root / "a" / "x.txt", 10)
    code = (
        "import sys\n"
        "from hygiene_nb.cli import main\n"
        f"sys.argv = ['hygiene-nb', 'scan', {str(root)!r}, '--store', {str(store)!r}, '--json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "loaded = [m for m in ('duckdb', 'hygiene_nb.api.classification') if m in sys.modules]\n"
        "print(loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert json.loads(done.stdout)["entries"] == 3
    # with a remembered rule the same scan does classify (to fill the rule in)
    write(root / "__pycache__" / "m.pyc", 10)
    api.remember_rule("python-cache", "delete", store=store)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "hygiene_nb.api.classification" in done.stderr.strip().splitlines()[-1]

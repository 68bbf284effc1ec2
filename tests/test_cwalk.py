"""Tests for the C walker core: same rows as the Python walker, du-exact rollups, budgets."""

from __future__ import annotations

import errno
import os
import pickle
import pwd
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hygiene_nb.scan.walk import cwalk
from hygiene_nb.scan.walk.pywalk import PyWalker
from hygiene_nb.scan.walk.spec import (
    FLAG_BUDGET_CUT,
    FLAG_EXCLUDED,
    FLAG_MOUNT_POINT,
    KIND_DIR,
    KIND_FILE,
    KIND_OTHER,
    KIND_SYMLINK,
    WALK_SCHEMA,
    ExcludeRule,
    WalkOptions,
)
from tests.helpers import bind_mount, tmpfs, world_readable_tmpdir

CORE_BUILT = cwalk.is_available()
needs_core = pytest.mark.skipif(
    not CORE_BUILT,
    reason="could not import hygiene_nb.scan.walk._cwalk: the C walker core is not built",
)
DU = "/usr/bin/du"

Row = tuple[Any, ...]


# -- helpers ------------------------------------------------------------------------------------


def _rows(walker: Any) -> list[Row]:
    out: list[Row] = []
    for batch in walker.batches():
        assert batch.schema.equals(WALK_SCHEMA)
        cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        out.extend(zip(*cols, strict=True))
    return out


def _walk(root: Path | bytes, walker: str = "c", **kw: Any) -> list[Row]:
    options = WalkOptions(root=os.fsencode(root), **kw)
    return _rows(cwalk.CWalker(options) if walker == "c" else PyWalker(options))


def _dicts(rows: list[Row]) -> list[dict[str, Any]]:
    return [dict(zip(WALK_SCHEMA.names, r, strict=True)) for r in rows]


def _by_path(rows: list[Row]) -> dict[bytes, dict[str, Any]]:
    out = {}
    for d in _dicts(rows):
        path = d["name"] if not d["parent"] else os.path.join(d["parent"], d["name"])
        assert path not in out, path
        out[path] = d
    return out


def _assert_same_as_python(root: Path, **kw: Any) -> list[Row]:
    c_rows = _walk(root, "c", **kw)
    py_rows = _walk(root, "python", **kw)
    assert len(c_rows) == len(set(c_rows)), "the C walker emitted a row twice"
    c_set, py_set = set(c_rows), set(py_rows)
    assert c_set - py_set == set() and py_set - c_set == set()
    return c_rows


def _write(path: Path, size: int) -> None:
    path.write_bytes(b"x" * size)


def _mixed_tree(base: Path) -> Path:
    """A tree with most things a walker can meet (no permissions games)."""
    root = base / "tree"
    root.mkdir()
    (root / "empty").mkdir()
    (root / "empty2" / "nested_empty").mkdir(parents=True)
    _write(root / "small.txt", 10)
    _write(root / "zero", 0)
    with open(root / "sparse.bin", "wb") as f:
        f.seek(10 * 1024 * 1024)
        f.write(b"end")
    # hard links: same directory, sibling, nested, cousin, 3+ links, and one from outside
    a = root / "a"
    (a / "sub" / "deeper").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "c" / "x" / "y").mkdir(parents=True)
    _write(a / "f1", 5000)
    os.link(a / "f1", a / "f1_same_dir")
    os.link(a / "f1", root / "b" / "f1_sibling")
    os.link(a / "f1", a / "sub" / "f1_nested")
    os.link(a / "f1", a / "sub" / "deeper" / "f1_deeper")
    os.link(a / "f1", root / "c" / "x" / "y" / "f1_cousin")
    _write(root / "c" / "g", 7000)
    os.link(root / "c" / "g", root / "c" / "x" / "g2")
    os.link(root / "c" / "g", root / "b" / "g3")
    outside = base / "outside_file"
    _write(outside, 3000)
    os.link(outside, a / "linked_from_outside")
    # names: unicode, invalid UTF-8, newline, 255 bytes
    _write(root / "caf\u00e9 \u65e5\u672c.txt", 3)
    os.mkdir(os.fsencode(root) + b"/bad\xff\xfe")
    with open(os.fsencode(root) + b"/bad\xff\xfe/inner\x80", "wb") as f:
        f.write(b"abc")
    _write(root / "new\nline", 4)
    _write(root / ("n" * 255), 6)
    # symlinks: to a file, dangling, to a directory (never followed)
    os.symlink("small.txt", root / "link_to_file")
    os.symlink("does/not/exist", root / "dangling")
    os.symlink("a", root / "link_to_dir")
    # special files
    os.mkfifo(root / "fifo")
    sock_path = root / "sock"
    if len(os.fsencode(sock_path)) < 100:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.fsdecode(sock_path))
    # deep nesting (40 levels) and a wide directory (5,000 entries)
    deep = root / "deep"
    d = deep
    for i in range(40):
        d = d / f"level{i:02d}"
    d.mkdir(parents=True)
    _write(d / "bottom.txt", 42)
    wide = root / "wide"
    wide.mkdir()
    for i in range(5000):
        (wide / f"f{i:05d}").touch()
    return root


def _du(path: bytes, *args: str) -> int:
    out = subprocess.run([DU, *args, path], check=True, capture_output=True).stdout
    return int(out.split(b"\t", 1)[0])


# -- the build ----------------------------------------------------------------------------------


def test_core_is_built_wherever_a_c_compiler_exists() -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here, so the optional C core may legitimately be missing")
    assert CORE_BUILT, (
        f"a C compiler exists ({compiler}) but hygiene_nb.scan.walk._cwalk did not build/import: "
        "the compiled walker is silently missing (see the pip install output)"
    )


# -- same rows as the Python walker -------------------------------------------------------------


@needs_core
@pytest.mark.parametrize("threads", [1, 2, 8])
def test_rows_match_python_walker_on_mixed_tree(tmp_path: Path, threads: int) -> None:
    root = _mixed_tree(tmp_path)
    rows = _assert_same_as_python(root, threads=threads)
    by_path = _by_path(rows)
    rb = os.fsencode(root)
    assert by_path[rb]["depth"] == 0 and by_path[rb]["parent"] == b""
    assert by_path[rb + b"/bad\xff\xfe/inner\x80"]["size"] == 3
    assert by_path[rb + b"/new\nline"]["kind"] == KIND_FILE
    assert by_path[rb + b"/" + b"n" * 255]["size"] == 6
    assert by_path[rb + b"/dangling"]["kind"] == KIND_SYMLINK
    assert by_path[rb + b"/link_to_dir"]["kind"] == KIND_SYMLINK
    assert not any(p.startswith(rb + b"/link_to_dir/") for p in by_path)
    assert by_path[rb + b"/fifo"]["kind"] == KIND_OTHER
    assert by_path[rb + b"/wide"]["tree_files"] == 5000
    assert by_path[rb + b"/deep"]["tree_bytes"] > 42
    assert max(d["depth"] for d in by_path.values()) == 42
    assert not any(d["partial"] or d["errno"] or d["flags"] for d in by_path.values())


@needs_core
def test_rows_are_identical_for_one_and_many_threads(tmp_path: Path) -> None:
    root = _mixed_tree(tmp_path)
    one = set(_walk(root, threads=1))
    assert one == set(_walk(root, threads=8))
    assert one == set(_walk(root, threads=32, batch_rows=7))


@needs_core
def test_directories_come_after_their_contents(tmp_path: Path) -> None:
    root = _mixed_tree(tmp_path)
    seen_dirs: set[bytes] = set()
    for d in _dicts(_walk(root, threads=8, batch_rows=100)):
        path = d["name"] if not d["parent"] else os.path.join(d["parent"], d["name"])
        assert d["parent"] not in seen_dirs, "a row came after its parent directory's row"
        if d["kind"] == KIND_DIR:
            seen_dirs.add(path)


@needs_core
@pytest.mark.parametrize("threads", [1, 8])
def test_each_batch_holds_its_directories_after_its_other_rows(
    tmp_path: Path, threads: int
) -> None:
    # the snapshot writer then takes each part as a slice; the stream stays post-order (above)
    root = _mixed_tree(tmp_path)
    walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), batch_rows=100, threads=threads))
    mixed = 0
    sizes = []
    for batch in walker.batches():
        kinds = batch.column("kind").to_pylist()
        dirs = kinds.count(KIND_DIR)
        assert kinds[len(kinds) - dirs :] == [KIND_DIR] * dirs
        mixed += 0 < dirs < len(kinds)
        sizes.append(len(kinds))
    assert mixed > 0  # batches that hold both kinds were seen
    assert sizes[:-1] == [100] * (len(sizes) - 1)  # full batches, whatever their kinds


@needs_core
def test_a_listing_is_statted_and_emitted_in_inode_order(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    for i in range(300):
        (root / f"f{(i * 7919) % 1000:03d}").write_bytes(b"")
    listed = [e.inode() for e in os.scandir(root)]
    if listed == sorted(listed):
        pytest.skip("this filesystem already lists the directory in inode order")
    rows = [d for d in _dicts(_walk(root, threads=4, batch_rows=64)) if d["kind"] != KIND_DIR]
    assert len(rows) == 300
    inodes = [d["inode"] for d in rows]
    assert inodes == sorted(inodes)


@needs_core
def test_batches_follow_schema_and_batch_rows(tmp_path: Path) -> None:
    root = _mixed_tree(tmp_path)
    walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), batch_rows=333, threads=4))
    sizes = []
    for batch in walker.batches():
        assert batch.schema.equals(WALK_SCHEMA)
        batch.validate(full=True)
        sizes.append(batch.num_rows)
    assert max(sizes) <= 333 and sum(sizes) > 5000
    assert walker.stats.entries == sum(sizes)
    assert walker.stats.errors == 0 and not walker.stats.budget_cut
    assert walker.name == "c"


# -- rollups equal du ---------------------------------------------------------------------------


@needs_core
@pytest.mark.parametrize("threads", [1, 8])
def test_every_directory_rollup_equals_du(tmp_path: Path, threads: int) -> None:
    root = _mixed_tree(tmp_path)
    shutil.rmtree(root / "wide")  # keeps the number of du runs small; wide is covered above
    # more link shapes: many links spread over many directories
    spread = root / "spread"
    for i in range(6):
        (spread / f"p{i}" / "q").mkdir(parents=True)
    _write(spread / "base", 12345)
    for i in range(6):
        os.link(spread / "base", spread / f"p{i}" / "q" / "l")
        if i % 2:
            os.link(spread / "base", spread / f"p{i}" / "l")
    dirs = [d for d in _dicts(_walk(root, threads=threads)) if d["kind"] == KIND_DIR]
    assert len(dirs) > 50
    for d in dirs:
        path = d["name"] if not d["parent"] else os.path.join(d["parent"], d["name"])
        assert d["tree_bytes"] == _du(path, "-sb", "--apparent-size"), path
        assert d["tree_alloc"] == _du(path, "-sB1"), path


@needs_core
def test_hard_links_count_once_per_directory(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "x" / "y").mkdir(parents=True)
    (root / "z").mkdir()
    _write(root / "x" / "f", 1000)
    os.link(root / "x" / "f", root / "x" / "y" / "f2")
    os.link(root / "x" / "f", root / "z" / "f3")
    by_path = _by_path(_walk(root))
    dir_size = (root / "x").lstat().st_size
    rb = os.fsencode(root)
    assert by_path[rb + b"/x"]["tree_files"] == 1
    assert by_path[rb + b"/x"]["tree_bytes"] == 1000 + 2 * dir_size
    assert by_path[rb + b"/z"]["tree_files"] == 1
    assert by_path[rb]["tree_files"] == 1


# -- excludes -----------------------------------------------------------------------------------


@needs_core
def test_excludes_match_python_walker(tmp_path: Path) -> None:
    root = _mixed_tree(tmp_path)
    (root / "node_modules" / "pkg").mkdir(parents=True)
    _write(root / "node_modules" / "pkg" / "index.js", 100)
    (root / "a" / "node_modules").mkdir()
    _write(root / "a" / "keep.log", 1)
    _write(root / "a" / "drop.log", 1)
    (root / "build").write_bytes(b"a file named like a dir rule")
    rules = (
        ExcludeRule(b"node_modules", dir_only=True),
        ExcludeRule(b"*.log"),
        ExcludeRule(b"keep.log", negate=True),
        ExcludeRule(b"build", dir_only=True),
        ExcludeRule(b"a/sub", anchored=True),
        ExcludeRule(b"deep/*/level01", anchored=True),
        ExcludeRule(b"wide/f0000[0-4]", anchored=True, pathname=True),
        ExcludeRule(b"c*y", anchored=True, pathname=False),
    )
    rows = _assert_same_as_python(root, excludes=rules, threads=8)
    by_path = _by_path(rows)
    rb = os.fsencode(root)

    def flags(rel: bytes) -> int:
        return int(by_path[rb + b"/" + rel]["flags"])

    assert flags(b"node_modules") == FLAG_EXCLUDED
    assert not any(p.startswith(rb + b"/node_modules/") for p in by_path)
    assert flags(b"a/node_modules") == FLAG_EXCLUDED
    assert flags(b"a/drop.log") == FLAG_EXCLUDED
    assert flags(b"a/keep.log") == 0
    assert flags(b"build") == 0  # a file; the rule is dir_only
    assert flags(b"a/sub") == FLAG_EXCLUDED
    assert flags(b"deep/level00/level01") == FLAG_EXCLUDED
    assert flags(b"wide/f00003") == FLAG_EXCLUDED and flags(b"wide/f00005") == 0
    assert flags(b"c/x/y") == FLAG_EXCLUDED  # no FNM_PATHNAME: '*' crosses '/'
    excluded_dir = by_path[rb + b"/a/sub"]
    assert not excluded_dir["partial"]
    assert excluded_dir["tree_bytes"] == excluded_dir["size"]


@needs_core
def test_skip_names_and_identities_are_summed_and_nothing_below_them_emitted(
    tmp_path: Path,
) -> None:
    root = _mixed_tree(tmp_path)
    (root / ".hygiene-nb-quarantine" / "q").mkdir(parents=True)
    st = (root / "deep").lstat()
    rows = _assert_same_as_python(root, skip_identities=frozenset({(st.st_dev, st.st_ino)}))
    by_path = _by_path(rows)
    rb = os.fsencode(root)
    for rel in (b"/.hygiene-nb-quarantine", b"/deep"):
        assert by_path[rb + rel]["flags"] == 0
        assert by_path[rb + rel]["tree_bytes"] == _du(rb + rel, "-sb", "--apparent-size")
        assert not any(p.startswith(rb + rel + b"/") for p in by_path)


# -- budgets ------------------------------------------------------------------------------------


def _budget_tree(base: Path) -> Path:
    root = base / "budget"
    for i in range(60):
        d = root / "huge" / f"part{i:02d}"
        d.mkdir(parents=True)
        for j in range(150):
            (d / f"f{j}").touch()
    for i in range(5):
        d = root / f"small{i}"
        (d / "inner").mkdir(parents=True)
        for j in range(10):
            (d / f"f{j}").touch()
        (d / "inner" / "g").touch()
    return root


@needs_core
@pytest.mark.parametrize("threads", [1, 8])
def test_entry_budget_lets_small_children_finish(tmp_path: Path, threads: int) -> None:
    root = _budget_tree(tmp_path)
    walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), max_entries=1500, threads=threads))
    rows = _rows(walker)
    assert len(rows) <= 1500
    assert walker.stats.budget_cut and walker.stats.entries == len(rows)
    by_path = _by_path(rows)
    rb = os.fsencode(root)
    for i in range(5):
        small = by_path[rb + b"/small%d" % i]
        assert not small["partial"] and small["flags"] == 0 and small["tree_files"] == 11
    huge = by_path[rb + b"/huge"]
    assert huge["partial"]
    assert by_path[rb]["partial"]
    cut = [d for d in by_path.values() if d["flags"] & FLAG_BUDGET_CUT]
    assert cut and all(d["partial"] and d["kind"] == KIND_DIR for d in cut)


@needs_core
def test_entry_budget_caps_rows_exactly_like_python(tmp_path: Path) -> None:
    root = _budget_tree(tmp_path)
    for cap in (1, 2, 7, 400):
        c_rows = _walk(root, max_entries=cap, threads=4)
        py_rows = _walk(root, "python", max_entries=cap)
        assert len(c_rows) == len(py_rows) == cap


@needs_core
def test_time_budget_cuts_unlisted_directories(tmp_path: Path) -> None:
    root = _budget_tree(tmp_path)
    walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), max_seconds=1e-9))
    by_path = _by_path(_rows(walker))
    rb = os.fsencode(root)
    assert walker.stats.budget_cut
    assert set(by_path) == {rb, rb + b"/huge", *(rb + b"/small%d" % i for i in range(5))}
    for path, d in by_path.items():
        if path != rb:
            assert d["flags"] == FLAG_BUDGET_CUT and d["partial"]
    assert by_path[rb]["partial"] and by_path[rb]["flags"] == 0


@needs_core
def test_root_slash_joins_parent_paths_without_double_slash() -> None:
    rows = _dicts(_walk(b"/", max_entries=300, one_file_system=True, threads=4))
    assert len(rows) <= 300
    root = [d for d in rows if d["depth"] == 0]
    assert len(root) == 1 and root[0]["name"] == b"/" and root[0]["parent"] == b""
    for d in rows:
        if d["depth"] == 1:
            assert d["parent"] == b"/"
        assert b"//" not in d["parent"]
        if d["depth"] > 0:
            assert b"/" not in d["name"]


# -- mounts, permissions, odd roots -------------------------------------------------------------


@needs_core
def test_one_file_system_records_mount_point_without_descending(tmp_path: Path) -> None:
    root = tmp_path / "m"
    mnt = root / "mnt"
    mnt.mkdir(parents=True)
    _write(root / "f", 10)
    with tmpfs(mnt):
        _write(mnt / "inside", 100)
        rows = _assert_same_as_python(root, one_file_system=True, threads=4)
        by_path = _by_path(rows)
        rm = os.fsencode(mnt)
        assert by_path[rm]["flags"] == FLAG_MOUNT_POINT and not by_path[rm]["partial"]
        assert rm + b"/inside" not in by_path
        by_path = _by_path(_assert_same_as_python(root, threads=4))
        assert by_path[rm]["flags"] == 0 and rm + b"/inside" in by_path


@needs_core
def test_one_file_system_stops_at_a_same_filesystem_bind_mount(tmp_path: Path) -> None:
    root = tmp_path / "m"
    (root / "sub").mkdir(parents=True)
    _write(root / "f", 10)
    outside = tmp_path / "outside"
    outside.mkdir()
    _write(outside / "precious", 100)
    for name in ("a", "b"):
        (root / "sub" / name).mkdir()
    _write(root / "sub" / "b" / "own", 3)
    with (
        bind_mount(outside, root / "sub" / "a"),
        bind_mount(root / "sub" / "b", root / "sub" / "b"),
    ):
        rows = _assert_same_as_python(root, one_file_system=True, threads=4)
        by_path = _by_path(rows)
        for point in (b"a", b"b"):  # another directory, and one mounted on itself
            mp = os.fsencode(root / "sub") + b"/" + point
            assert by_path[mp]["flags"] == FLAG_MOUNT_POINT, point
            assert not any(p.startswith(mp + b"/") for p in by_path), point
        assert os.fsencode(root / "sub" / "a" / "precious") not in by_path
        assert by_path[os.fsencode(root / "sub")]["flags"] == 0


def _walk_as_nobody(root: Path) -> tuple[list[Row], list[Row]]:
    """Walk ``root`` with both walkers in a forked child running as ``nobody``."""
    nobody = pwd.getpwnam("nobody")
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(rfd)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            walked = (_walk(root, "c", threads=4), _walk(root, "python"))
            with os.fdopen(wfd, "wb") as f:
                pickle.dump(walked, f)
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the walk as nobody did not finish")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0, "the child walking as nobody failed"
    result: tuple[list[Row], list[Row]] = pickle.loads(data)
    return result


@needs_core
def test_unreadable_directories_report_errno_and_partial() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to the 'nobody' user (permissions bind non-root only)")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user to walk as (root ignores directory permissions)")
    with world_readable_tmpdir() as base:
        root = base / "perm"
        (root / "locked").mkdir(parents=True)
        _write(root / "locked" / "secret", 10)
        (root / "listable_only").mkdir()
        _write(root / "listable_only" / "file", 10)
        (root / "listable_only" / "subdir").mkdir()
        (root / "open").mkdir()
        _write(root / "open" / "file", 10)
        os.chmod(root / "locked", 0)
        os.chmod(root / "listable_only", stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        c_rows, py_rows = _walk_as_nobody(root)
        assert set(c_rows) == set(py_rows)
        by_path = _by_path(c_rows)
        rb = os.fsencode(root)
        locked = by_path[rb + b"/locked"]
        assert locked["errno"] == errno.EACCES and locked["partial"] and locked["kind"] == KIND_DIR
        assert rb + b"/locked/secret" not in by_path
        unstattable = by_path[rb + b"/listable_only/file"]
        assert unstattable["errno"] == errno.EACCES and unstattable["size"] == 0
        assert by_path[rb + b"/listable_only/subdir"]["errno"] == errno.EACCES
        assert by_path[rb + b"/listable_only"]["partial"]
        assert not by_path[rb + b"/open"]["partial"]
        assert by_path[rb]["partial"] and by_path[rb]["errno"] == 0


@needs_core
def test_root_that_is_not_a_directory_matches_python(tmp_path: Path) -> None:
    _write(tmp_path / "file", 10)
    os.symlink("file", tmp_path / "link")
    for name in ("file", "link"):
        rows = _assert_same_as_python(tmp_path / name)
        assert len(rows) == 1 and rows[0][WALK_SCHEMA.names.index("errno")] != 0


@needs_core
def test_missing_root_raises_like_python(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _walk(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        _walk(tmp_path / "missing", "python")


@needs_core
def test_abandoning_a_walk_midway_stops_cleanly(tmp_path: Path) -> None:
    root = _budget_tree(tmp_path)
    for _ in range(5):
        walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), batch_rows=50, threads=8))
        it = walker.batches()
        first = next(it)
        assert isinstance(first, pa.RecordBatch) and first.num_rows == 50
        it.close()
        del it, walker
    walker = cwalk.CWalker(WalkOptions(root=os.fsencode(root), batch_rows=50, threads=8))
    list(walker.batches())
    with pytest.raises(RuntimeError):
        list(walker.batches())


@needs_core
def test_invalid_options_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        cwalk.CWalker(WalkOptions(root=b"relative/path"))
    with pytest.raises(ValueError):
        cwalk.CWalker(WalkOptions(root=os.fsencode(tmp_path) + b"\0x"))
    with pytest.raises(ValueError):
        cwalk.CWalker(WalkOptions(root=os.fsencode(tmp_path), batch_rows=0))

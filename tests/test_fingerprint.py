"""Fingerprints: any change below a directory changes its fingerprint; walks stay on the path.

Every test walks a real temporary tree. A walk follows no symlink, on the way or inside, and
enters no other mount (a tmpfs, or a bind mount of the same filesystem).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.fs.fingerprint import (
    Fingerprint,
    SymlinkOnPath,
    fingerprint,
    kind_of_mode,
    lstat_beneath,
    signed64,
    walk_subtree,
    walk_subtree_at,
)
from hygiene_nb.fs.mounts import MountInside
from tests.helpers import bind_mount, tmpfs, write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``root/top``: files at two depths, an empty file and directory, a symlink, a fifo."""
    top = tmp_path / "root" / "top"
    write(top / "a.txt", 10)
    write(top / "sub" / "deep" / "b.bin", 2000)
    write(top / "sub" / "empty")
    (top / "emptydir").mkdir()
    (top / "link").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(top / "sub" / "fifo")
    write(tmp_path / "elsewhere" / "outside", 5)
    return top


def fp(top: Path) -> Fingerprint:
    return fingerprint(walk_subtree(os.fsencode(top.parent), os.fsencode(top)))


def test_a_walk_lists_every_entry_below_and_follows_no_link(tree: Path) -> None:
    walked = walk_subtree(os.fsencode(tree.parent), os.fsencode(tree))
    assert {rel: kind for rel, kind, *_ in walked} == {
        b"a.txt": "file",
        b"sub": "dir",
        b"sub/deep": "dir",
        b"sub/deep/b.bin": "file",
        b"sub/empty": "file",
        b"sub/fifo": "other",
        b"emptydir": "dir",
        b"link": "symlink",
    }
    found = fingerprint(walked)
    assert (found.count, found.bytes) == (8, sum(size for _, _, size, *_ in walked))
    assert found.newest_mtime_ns == max(mtime for *_, mtime, _, _ in walked)
    assert found.sha256.startswith("sha256:") and len(found.sha256) == 7 + 64


def test_walking_twice_gives_the_same_fingerprint_and_reading_changes_nothing(tree: Path) -> None:
    before = fp(tree)
    (tree / "sub" / "deep" / "b.bin").read_bytes()  # atime is not in it
    assert fp(tree) == before


def _append(tree: Path) -> None:
    with (tree / "sub" / "deep" / "b.bin").open("ab") as handle:
        handle.write(b"!")


def _touch_mtime(tree: Path) -> None:
    os.utime(tree / "sub" / "deep" / "b.bin", ns=(1, 1_000_000_000))


def _rewrite_keeping_size_and_mtime(tree: Path) -> None:
    """What ``touch -d`` after an edit leaves: same size, same mtime; only the ctime moves."""
    path = tree / "sub" / "deep" / "b.bin"
    st = os.stat(path)
    with path.open("r+b") as handle:
        handle.write(b"Z")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def _chmod(tree: Path) -> None:
    os.chmod(tree / "a.txt", 0o600)


def _new_entry(tree: Path) -> None:
    write(tree / "sub" / "deep" / "new", 0)


def _new_empty_dir(tree: Path) -> None:
    (tree / "emptydir" / "inner").mkdir()


def _removed(tree: Path) -> None:
    (tree / "sub" / "empty").unlink()


def _replaced_by_a_symlink(tree: Path) -> None:
    path = tree / "sub" / "deep" / "b.bin"
    data = path.read_bytes()
    path.unlink()
    write(tree.parent / "moved-away", data=data)
    path.symlink_to(tree.parent / "moved-away")


def _renamed(tree: Path) -> None:
    (tree / "a.txt").rename(tree / "A.txt")


@pytest.mark.parametrize(
    "change",
    [_append, _touch_mtime, _rewrite_keeping_size_and_mtime, _chmod, _new_entry, _new_empty_dir,
     _removed, _replaced_by_a_symlink, _renamed],
)  # fmt: skip
def test_any_change_below_changes_the_fingerprint(
    tree: Path, change: Callable[[Path], None]
) -> None:
    before = fp(tree)
    change(tree)
    assert fp(tree).sha256 != before.sha256


def test_the_fingerprint_of_tuples_is_order_free_and_sums_sizes_and_times() -> None:
    a = (b"a", "dir", 4096, 200, 10, 250)
    b = (b"b", "file", 5, 300, 11, 400)
    found = fingerprint([b, a])
    assert found == fingerprint([a, b])
    assert (found.count, found.bytes, found.newest_mtime_ns) == (2, 4101, 300)
    empty = fingerprint([])
    assert (empty.count, empty.bytes, empty.newest_mtime_ns) == (0, 0, 0)
    assert empty.sha256 != found.sha256
    for other in [
        (b"c", "file", 5, 300, 11, 400),  # its path
        (b"b", "symlink", 5, 300, 11, 400),  # its kind
        (b"b", "file", 6, 300, 11, 400),  # its size
        (b"b", "file", 5, 301, 11, 400),  # its mtime
        (b"b", "file", 5, 300, 12, 400),  # its inode
        (b"b", "file", 5, 300, 11, 401),  # its ctime
    ]:
        assert fingerprint([a, other]).sha256 != found.sha256, other


def test_a_snapshot_and_a_fresh_walk_fingerprint_a_directory_alike(tree: Path, store: Path) -> None:
    os.unlink(tree / "sub" / "fifo")  # a plan never holds a directory with a special file
    api.scan_root(tree.parent, store=store)
    api.annotate([str(tree)], store=store, decision="delete")
    plan = api.make_plan(tree.parent, store=store)
    (candidate,) = plan.plan["candidates"]
    found = fp(tree)
    assert candidate["fingerprint"] == {
        "count": found.count,
        "bytes": found.bytes,
        "newest_mtime_ns": found.newest_mtime_ns,
        "sha256": found.sha256,
    }


# -- what a walk refuses -------------------------------------------------------------------------


def test_a_symlink_on_the_way_is_refused(tree: Path, tmp_path: Path) -> None:
    (tree.parent / "via").symlink_to(tree)
    root = os.fsencode(tree.parent)
    with pytest.raises(SymlinkOnPath):
        walk_subtree(root, root + b"/via/sub")
    with pytest.raises(SymlinkOnPath):
        lstat_beneath(root, root + b"/via/a.txt")
    with pytest.raises(SymlinkOnPath):  # a file where a directory should be
        lstat_beneath(root, root + b"/top/a.txt/x")


def test_the_walked_directory_itself_a_symlink_is_refused(tree: Path) -> None:
    (tree.parent / "alias").symlink_to(tree)
    root = os.fsencode(tree.parent)
    with pytest.raises(OSError) as info:
        walk_subtree(root, root + b"/alias")
    assert info.value.errno in (errno.ELOOP, errno.ENOTDIR)


def test_a_directory_replaced_since_it_was_recorded_is_refused(tree: Path) -> None:
    st = os.stat(tree / "sub")
    identity = (st.st_dev, st.st_ino)
    root, sub = os.fsencode(tree.parent), os.fsencode(tree / "sub")
    assert walk_subtree(root, sub, expect=identity)
    (tree / "sub").rename(tree / "sub-old")
    (tree / "sub").mkdir()
    with pytest.raises(SymlinkOnPath) as info:
        walk_subtree(root, sub, expect=identity)
    assert info.value.errno == errno.ESTALE
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(SymlinkOnPath):
            walk_subtree_at(fd, b"sub", expect=identity)
        old = os.stat(tree / "sub-old")
        assert len(walk_subtree_at(fd, b"sub-old", expect=(old.st_dev, old.st_ino))) == 4
    finally:
        os.close(fd)


def test_a_walk_never_enters_a_tmpfs_mounted_inside(tree: Path) -> None:
    (tree / "sub" / "mnt").mkdir()
    root = os.fsencode(tree.parent)
    with tmpfs(tree / "sub" / "mnt"):
        write(tree / "sub" / "mnt" / "volatile", 1)
        with pytest.raises(MountInside):
            walk_subtree(root, os.fsencode(tree))
        with pytest.raises(MountInside):  # the walked directory is the mount point
            walk_subtree(root, os.fsencode(tree / "sub" / "mnt"))
        st = os.stat(tree)
        fd = os.open(tree.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(MountInside):
                walk_subtree_at(fd, b"top", expect=(st.st_dev, st.st_ino))
        finally:
            os.close(fd)
    assert fp(tree).count == 9  # unmounted: an ordinary empty directory again


def test_a_walk_never_enters_a_bind_mount_of_the_same_filesystem(
    tree: Path, tmp_path: Path
) -> None:
    (tree / "bound").mkdir()
    source = tmp_path / "source"
    write(source / "secret", 3)
    with bind_mount(source, tree / "bound"):
        assert os.stat(tree / "bound").st_dev == os.stat(tree).st_dev  # a device check is blind
        with pytest.raises(MountInside):
            walk_subtree(os.fsencode(tree.parent), os.fsencode(tree))


# -- single entries ------------------------------------------------------------------------------


def test_lstat_beneath_follows_nothing(tree: Path) -> None:
    root = os.fsencode(tree.parent)
    assert stat.S_ISLNK(lstat_beneath(root, root + b"/top/link").st_mode)
    assert lstat_beneath(root, root + b"/top/sub/deep/b.bin").st_size == 2000
    assert lstat_beneath(root, root).st_ino == os.lstat(tree.parent).st_ino
    with pytest.raises(FileNotFoundError):
        lstat_beneath(root, root + b"/top/gone")
    with pytest.raises(FileNotFoundError):
        lstat_beneath(root, root + b"/nothing/here")


def test_kinds_and_signed_numbers(tree: Path) -> None:
    assert kind_of_mode(os.lstat(tree / "a.txt").st_mode) == "file"
    assert kind_of_mode(os.lstat(tree / "sub").st_mode) == "dir"
    assert kind_of_mode(os.lstat(tree / "link").st_mode) == "symlink"
    assert kind_of_mode(os.lstat(tree / "sub" / "fifo").st_mode) == "other"
    assert signed64(5) == 5 and signed64((1 << 63) - 1) == (1 << 63) - 1
    assert signed64(1 << 63) == -(1 << 63) and signed64((1 << 64) - 1) == -1

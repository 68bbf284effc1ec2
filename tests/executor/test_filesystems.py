"""Which filesystem a directory is on, and whether it is still the one recorded.

Identities are taken of real mounts: tmpfs (an ``f_fsid`` of its own), a small FUSE filesystem
(no ``f_fsid``, like most user-space ones), each mounted again at the same place, and mounts
detached with ``umount -l`` while a handle is still open (no longer in the mount table).
Where the mount table itself must be unreadable or malformed, the real table is altered
before ``fs_identity`` reads it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.executor import filesystems
from hygiene_nb.executor.filesystems import birth_ns, fs_identity, same_filesystem
from hygiene_nb.fs import mounts
from hygiene_nb.fs.mounts import mount_id, mount_table
from tests.helpers import fuse_mount, tmpfs

_MNT_DETACH = 2


@contextmanager
def handle(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def identity(path: Path) -> dict[str, Any] | None:
    with handle(path) as fd:
        return fs_identity(fd)


def detached(path: Path) -> dict[str, Any] | None:
    """The identity of the filesystem at ``path`` once it is detached (``umount -l``)."""
    with handle(path) as fd:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.umount2(os.fsencode(path), _MNT_DETACH) == 0, os.strerror(ctypes.get_errno())
        return fs_identity(fd)


def test_a_tmpfs_is_known_by_its_fsid_and_its_mount(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    with tmpfs(tmp_path / "t"):
        found = identity(tmp_path / "t")
        fsid, dev = os.statvfs(tmp_path / "t").f_fsid, os.stat(tmp_path / "t").st_dev
    assert found == {
        "dev": dev,
        "fsid": f"{fsid:x}",
        "fstype": "tmpfs",
        "source": "hygiene-nb-test",
        "root": "/",
        "mount_point": str(tmp_path / "t"),
    }


def test_a_fuse_filesystem_without_fsid_is_known_by_its_mount(tmp_path: Path) -> None:
    (tmp_path / "f").mkdir()
    with fuse_mount(tmp_path / "f", {}):
        assert os.statvfs(tmp_path / "f").f_fsid == 0
        found = identity(tmp_path / "f")
        dev = os.stat(tmp_path / "f").st_dev
    assert found == {
        "dev": dev,
        "fstype": "fuse",
        "source": "hygiene-nb-fuse",
        "root": "/",
        "mount_point": str(tmp_path / "f"),
    }


def test_a_detached_filesystem_is_known_by_its_fsid_alone_or_not_at_all(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    with tmpfs(tmp_path / "t"):
        fsid = os.statvfs(tmp_path / "t").f_fsid
        alone = detached(tmp_path / "t")
    assert alone is not None and alone.keys() == {"dev", "fsid"}
    assert alone["fsid"] == f"{fsid:x}"
    with fuse_mount(tmp_path / "f", {}):
        assert detached(tmp_path / "f") is None  # no fsid, no mount: nothing to tell it by


def test_an_unreadable_fd_has_no_identity(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    os.close(fd)
    assert fs_identity(fd) is None


def test_where_the_mount_cannot_be_told_only_the_fsid_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t").mkdir()
    with tmpfs(tmp_path / "t"):
        whole = identity(tmp_path / "t")
        assert whole is not None and "mount_point" in whole
        fsid_only = {"dev": whole["dev"], "fsid": whole["fsid"]}
        table = mount_table()
        assert table is not None
        with handle(tmp_path / "t") as fd:
            own = str(mount_id(fd)).encode()
        (line,) = [x for x in table.splitlines() if x.split(b" ")[0] == own]
        cut = line[: line.index(b" - ") + len(b" - tmpfs")]  # no source after the type

        with monkeypatch.context() as m:  # a kernel without statx nor /proc/self/fdinfo
            m.setattr(mounts, "_STATX", None)
            m.setattr(mounts, "_fdinfo_mount_id", lambda fd: None)
            assert identity(tmp_path / "t") == fsid_only
        with monkeypatch.context() as m:  # /proc/self/mountinfo cannot be read
            m.setattr(filesystems, "mount_table", lambda: None)
            assert identity(tmp_path / "t") == fsid_only
        with monkeypatch.context() as m:  # its line for the mount is cut short
            m.setattr(filesystems, "mount_table", lambda: table.replace(line, cut))
            assert identity(tmp_path / "t") == fsid_only
        with monkeypatch.context() as m:  # it does not list the mount
            m.setattr(filesystems, "mount_table", lambda: table.replace(line + b"\n", b""))
            assert identity(tmp_path / "t") == fsid_only
        assert identity(tmp_path / "t") == whole


def test_same_filesystem_tells_real_mounts_apart_or_says_it_cannot(tmp_path: Path) -> None:
    t, f, g = tmp_path / "t", tmp_path / "f", tmp_path / "g"
    for path in (t, f, g):
        path.mkdir()
    with tmpfs(t), handle(t) as held:
        first_tmpfs = fs_identity(held)
        assert same_filesystem(first_tmpfs, identity(t)) is True
        fsid_alone = detached(t)  # still alive through ``held``: the next one gets a new dev
        with tmpfs(t):
            again_tmpfs = identity(t)  # the same place, type and source: another tmpfs
    with fuse_mount(f, {}), handle(f) as held:
        first_fuse = fs_identity(held)
        assert same_filesystem(first_fuse, identity(f)) is True  # by its mount
        detached(f)
        with fuse_mount(f, {}):
            again_fuse = identity(f)
    with fuse_mount(g, {}):
        elsewhere_fuse = identity(g)
    assert first_tmpfs and again_tmpfs and first_fuse and again_fuse and elsewhere_fuse
    assert first_tmpfs["dev"] != again_tmpfs["dev"] and first_fuse["dev"] != again_fuse["dev"]
    # a new fsid on an identical mount under a new device number: it cannot be told
    assert first_tmpfs["fsid"] != again_tmpfs["fsid"]
    assert same_filesystem(first_tmpfs, again_tmpfs) is None
    assert same_filesystem(first_tmpfs, {**again_tmpfs, "dev": first_tmpfs["dev"]}) is False
    # without fsids: another mount point is another filesystem; the same one under a new
    # device number is one only if its source names something durable ("hygiene-nb-fuse" not)
    assert same_filesystem(first_fuse, elsewhere_fuse) is False
    assert same_filesystem(first_fuse, again_fuse) is None
    durable = {"source": "/dev/loop7"}
    assert same_filesystem({**first_fuse, **durable}, {**again_fuse, **durable}) is True
    # one side known by its fsid only, the other by its mount only: nothing to compare
    assert same_filesystem(fsid_alone, first_fuse) is None
    assert same_filesystem(None, first_fuse) is None and same_filesystem(first_fuse, None) is None


def test_birth_times_are_told_where_the_filesystem_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "f").mkdir()
    with tmpfs(tmp_path / "t"), handle(tmp_path / "t") as fd:
        (tmp_path / "t" / "x").write_bytes(b"")
        born = birth_ns(fd, b"x")
        assert born is not None and abs(born - os.stat(tmp_path / "t" / "x").st_ctime_ns) < 10**9
        assert birth_ns(fd, b"missing") is None
        monkeypatch.setattr(filesystems, "_STATX", None)  # a C library without statx
        assert birth_ns(fd, b"x") is None
    monkeypatch.undo()
    with fuse_mount(tmp_path / "f", {b"x": b"fuse"}), handle(tmp_path / "f") as fd:
        assert os.stat(tmp_path / "f" / "x").st_size == 4
        assert birth_ns(fd, b"x") is None  # a filesystem that does not say

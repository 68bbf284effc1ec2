"""Fingerprints: what an entry or a directory's whole subtree looks like, from disk or snapshot.

A subtree fingerprint is (count, bytes, newest mtime, sha256 over sorted (relative path, kind,
size, mtime_ns, inode, ctime_ns) lines). The same function hashes snapshot rows and a fresh walk,
so a deep file touched, added, removed or replaced by a symlink changes it. ctime is in it
because no user can set it: a file rewritten with its size kept and its mtime put back
(``touch -d``) still changes the fingerprint. Reading the disk here is read-only, relative to
directory handles opened from the root with no symlink followed. A walk
never enters another mount: every directory it opens must be on the mount of the directory it
walks (mount ids, so a bind mount of the same filesystem counts), else ``MountInside``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hygiene_nb.fs.mounts import MountInside, mount_id, require_mount

__all__ = [
    "DIR_FLAGS",
    "Entry",
    "Fingerprint",
    "SymlinkOnPath",
    "fingerprint",
    "kind_of_mode",
    "lstat_beneath",
    "open_dir_at",
    "open_dirs_at",
    "signed64",
    "walk_subtree",
    "walk_subtree_at",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Fingerprint:
    """Count, bytes and newest mtime of a subtree's entries, and a hash over all of them."""

    count: int
    bytes: int
    newest_mtime_ns: int
    sha256: str


def kind_of_mode(mode: int) -> str:
    """Snapshot kind of an lstat mode."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def signed64(value: int) -> int:
    """An inode or device number as snapshots store it (signed 64-bit, wrapped)."""
    return value - (1 << 64) if value >= (1 << 63) else value


Entry = tuple[bytes, str, int, int, int, int]  # (relative path, kind, size, mtime, inode, ctime)


def fingerprint(entries: Iterable[Entry]) -> Fingerprint:
    """Fingerprint (relative path, kind, size, mtime_ns, inode, ctime_ns) tuples, in any order."""
    lines = sorted(entries)
    digest = hashlib.sha256()
    total = newest = 0
    for rel, kind, size, mtime, inode, ctime in lines:
        digest.update(rel + b"\0" + f"{kind}\0{size}\0{mtime}\0{inode}\0{ctime}\n".encode())
        total += size
        newest = max(newest, mtime)
    return Fingerprint(len(lines), total, newest, "sha256:" + digest.hexdigest())


class SymlinkOnPath(OSError):
    """A component between the root and an entry is a symlink (or not a directory)."""


def open_dir_at(dir_fd: int, name: bytes) -> int:
    """Open directory ``name`` under ``dir_fd``; never a symlink, never anything but a directory.

    Raises:
        OSError: ``ELOOP``/``ENOTDIR`` when it is a symlink or not a directory.
    """
    return os.open(name, DIR_FLAGS, dir_fd=dir_fd)


def open_dirs_at(dir_fd: int, parts: Sequence[bytes]) -> int:
    """A new handle on ``parts`` below ``dir_fd``, one component at a time, never a symlink.

    Raises:
        OSError: a component is missing, a symlink (``ELOOP``) or not a directory.
    """
    current = os.dup(dir_fd)
    try:
        for part in parts:
            nxt = open_dir_at(current, part)
            os.close(current)
            current = nxt
    except BaseException:
        os.close(current)
        raise
    return current


def _open_parent(root: bytes, path: bytes) -> tuple[int, bytes]:
    """Open the directory holding ``path`` by walking down from ``root`` (no symlinks)."""
    rel = path[len(root) :].strip(b"/")
    parts = rel.split(b"/")
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                nxt = open_dir_at(fd, part)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SymlinkOnPath(exc.errno, "not a real directory on the way", part) from exc
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def lstat_beneath(root: bytes, path: bytes) -> os.stat_result:
    """``lstat`` of ``path`` reached from ``root`` without following any symlink on the way.

    Raises:
        SymlinkOnPath: a directory on the way is a symlink now.
        FileNotFoundError: it is gone.
    """
    if path == root:
        return os.lstat(root)
    fd, name = _open_parent(root, path)
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def walk_subtree(root: bytes, path: bytes, *, expect: tuple[int, int] | None = None) -> list[Entry]:
    """Every entry below directory ``path`` as fingerprint tuples (read-only, no symlinks).

    Depth first, holding only the handles of the directories on the current path (a wide
    directory costs no more handles than a narrow one).

    Args:
        root: where the walk to ``path`` starts (no symlink is followed on the way).
        path: the directory to walk.
        expect: (st_dev, st_ino) the opened directory must have.

    Raises:
        SymlinkOnPath: a directory on the way is a symlink now, or ``path`` is not ``expect``.
        MountInside: ``path`` is a mount point, or holds one (or it cannot be told).
        OSError: a directory cannot be read.
    """
    fd, name = _open_parent(root, path) if path != root else (os.open(root, DIR_FLAGS), b"")
    try:
        top = open_dir_at(fd, name) if name else os.dup(fd)
        try:
            if name:
                require_mount(top, mount_id(fd), path)  # not a mount point itself
        except BaseException:
            os.close(top)
            raise
    finally:
        os.close(fd)
    try:
        st = os.fstat(top)
        if expect is not None and (st.st_dev, st.st_ino) != expect:
            raise SymlinkOnPath(errno.ESTALE, "the directory was replaced", path)
        out: list[Entry] = []
        _walk_into(top, b"", out, _mount_of(top, path))
        return out
    finally:
        os.close(top)


def walk_subtree_at(dir_fd: int, name: bytes, *, expect: tuple[int, int]) -> list[Entry]:
    """Like ``walk_subtree``, for directory ``name`` under an open handle (no symlinks).

    Raises:
        SymlinkOnPath: ``name`` is not the directory ``expect`` names.
        MountInside: ``name`` is a mount point, or holds one (or it cannot be told).
        OSError: a directory cannot be read.
    """
    top = open_dir_at(dir_fd, name)
    try:
        st = os.fstat(top)
        if (st.st_dev, st.st_ino) != expect:
            raise SymlinkOnPath(errno.ESTALE, "the directory was replaced", name)
        require_mount(top, mount_id(dir_fd), name)
        out: list[Entry] = []
        _walk_into(top, b"", out, _mount_of(top, name))
        return out
    finally:
        os.close(top)


def _mount_of(fd: int, where: bytes) -> int:
    """The mount id of ``fd``; "cannot tell" refuses (``MountInside``)."""
    found = mount_id(fd)
    if found is None:
        raise MountInside(where, "it cannot be told whether another filesystem is mounted there")
    return found


def _walk_into(dfd: int, prefix: bytes, out: list[Entry], mount: int) -> None:
    subdirs: list[tuple[bytes, tuple[int, int]]] = []
    with os.scandir(dfd) as entries:
        for entry in entries:
            name = os.fsencode(entry.name)
            st = entry.stat(follow_symlinks=False)
            kind = kind_of_mode(st.st_mode)
            out.append(
                (
                    prefix + name,
                    kind,
                    st.st_size,
                    st.st_mtime_ns,
                    signed64(st.st_ino),
                    st.st_ctime_ns,
                )
            )
            if kind == "dir":
                subdirs.append((name, (st.st_dev, st.st_ino)))
    for name, identity in subdirs:
        child = open_dir_at(dfd, name)
        try:
            here = os.fstat(child)
            if (here.st_dev, here.st_ino) != identity:
                raise SymlinkOnPath(errno.ESTALE, "a directory was replaced while walking", name)
            require_mount(child, mount, prefix + name)  # never into another mount
            _walk_into(child, prefix + name + b"/", out, mount)
        finally:
            os.close(child)

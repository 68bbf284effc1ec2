"""The only code in hygiene-nb that moves or removes a user's file.

Every operation is relative to directory handles and never follows a symlink. Moves use
``renameat2(RENAME_NOREPLACE)`` (a regular file may fall back to link + unlink, which can never
overwrite either); nothing here replaces an existing target. ``remove_tree`` is reachable only
from ``purge``; it never opens anything but directories and never follows a link.
``remove_original_after_verified_copy`` is reachable only from the cross-device copy
(``crossdev``), after the copy was verified, and removes only entries it was told were copied.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import sys
from collections.abc import Mapping, Sequence
from typing import Protocol

from hygiene_nb.mounts import MountInside, mount_id, require_mount

__all__ = [
    "DIR_FLAGS",
    "DryRunFileOps",
    "FileOps",
    "LocalFileOps",
    "open_dir_at",
    "open_dirs_at",
    "remove_original_after_verified_copy",
    "remove_own_empty_dir",
    "remove_own_file",
    "remove_tree",
    "replace_own_file",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RENAME_NOREPLACE = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_RENAMEAT2 = getattr(_LIBC, "renameat2", None)
if _RENAMEAT2 is not None:
    _RENAMEAT2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    _RENAMEAT2.restype = ctypes.c_int


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


class FileOps(Protocol):
    """What the executor may do to files: one no-replace move, one tree removal."""

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Move ``src`` to ``dst`` (relative to the handles) unless ``dst`` exists."""
        ...

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Create a private directory (never following a link at ``name``)."""
        ...


class LocalFileOps:
    """The real thing."""

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Move without ever replacing ``dst`` (``EEXIST`` if it exists, even as a dangling link).

        Raises:
            OSError: the move failed (``EEXIST``, ``EXDEV``, ``ENOENT``, ``EPERM``…); nothing moved.
        """
        sys.audit("hygiene_nb.rename_noreplace", src_dir, src, dst_dir, dst)
        if _RENAMEAT2 is not None:
            if _RENAMEAT2(src_dir, src, dst_dir, dst, _RENAME_NOREPLACE) == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EINVAL):
                raise OSError(err, os.strerror(err), src)
        # No renameat2 here: link + unlink never overwrites, but only works for regular files.
        st = os.stat(src, dir_fd=src_dir, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ENOSYS, "no no-replace rename for directories here", src)
        os.link(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir, follow_symlinks=False)
        os.unlink(src, dir_fd=src_dir)

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Create directory ``name`` (0700); ``EEXIST`` if anything, even a link, is there."""
        os.mkdir(name, 0o700, dir_fd=dir_fd)


class DryRunFileOps:
    """Records what would be done and does nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, bytes]] = []

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Record the move."""
        self.calls.append(("rename", src, dst))

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Record the directory."""
        self.calls.append(("mkdir", name, b""))


def remove_tree(dir_fd: int, name: bytes) -> tuple[int, int]:
    """**Destroy** ``name`` under ``dir_fd`` and everything below it (purge only).

    Directories are opened with ``O_NOFOLLOW|O_DIRECTORY``; everything else (files, links,
    fifos, sockets, devices) is unlinked by name without being opened. Every directory opened
    must be on the mount of ``dir_fd`` (mount ids, so a bind mount of the same filesystem
    counts): at another mount the removal stops before reading or removing anything under it.

    Returns:
        (entries removed, bytes of regular files removed).

    Raises:
        MountInside: a directory inside is on another mount (or it cannot be told); what was
            removed before stays removed, nothing under the mount was touched.
    """
    sys.audit("hygiene_nb.remove_tree", dir_fd, name)
    mount = mount_id(dir_fd)
    if mount is None:
        raise MountInside(name, "it cannot be told whether another filesystem is mounted there")
    return _remove_tree(dir_fd, name, mount)


def _remove_tree(dir_fd: int, name: bytes, mount: int) -> tuple[int, int]:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return 1, st.st_size if stat.S_ISREG(st.st_mode) else 0
    count = size = 0
    fd = open_dir_at(dir_fd, name)
    try:
        require_mount(fd, mount, name)  # never delete through a mount
        with os.scandir(fd) as entries:
            children = [os.fsencode(e.name) for e in entries]
        for child in children:
            removed, freed = _remove_tree(fd, child, mount)
            count += removed
            size += freed
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return count + 1, size


def replace_own_file(dir_fd: int, tmp: bytes, final: bytes) -> None:
    """Atomically put hygiene-nb's own metadata file ``tmp`` in place of ``final`` (a manifest).

    Only for files hygiene-nb wrote itself inside a batch it owns; never for user data.
    """
    os.replace(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def remove_own_file(dir_fd: int, name: bytes) -> None:
    """Remove one of hygiene-nb's own files (a temp manifest that failed to write)."""
    os.unlink(name, dir_fd=dir_fd)


def remove_own_empty_dir(dir_fd: int, name: bytes) -> None:
    """Remove an empty directory hygiene-nb made (a restored batch's mirror); never non-empty."""
    os.rmdir(name, dir_fd=dir_fd)


def remove_original_after_verified_copy(
    dir_fd: int, name: bytes, verified: Mapping[bytes, tuple[int, int, int, int]]
) -> int:
    """**Unlink** the original ``name`` under ``dir_fd`` once its copy was verified (crossdev only).

    ``verified`` maps each entry's path relative to the item (``b""`` for the item itself,
    ``b"sub/file"`` below it) to the (dev, inode, size, mtime_ns) it had when its copy was
    verified (size and mtime_ns are -1 for directories). First every entry is checked: the tree
    must hold exactly those entries, regular files and directories only, each unchanged, no
    directory on another mount; only
    then are files unlinked and directories removed bottom-up. Nothing is opened but directories
    and no link is followed.

    Returns:
        The number of entries removed.

    Raises:
        OSError: the original differs from what was verified (``ESTALE``; nothing removed) or a
            removal failed partway (what is left stays; the verified copy holds all of it).
    """
    sys.audit("hygiene_nb.remove_original_after_verified_copy", dir_fd, name)
    # Check it where nobody else can reach it: a private staging directory beside it (same
    # filesystem), so nothing can be swapped in between the check and the removal.
    staging = b".hygiene-nb-removing-" + secrets.token_hex(6).encode()
    os.mkdir(staging, 0o700, dir_fd=dir_fd)
    stage_fd = open_dir_at(dir_fd, staging)
    try:
        if os.fstat(stage_fd).st_uid != os.geteuid():
            raise OSError(errno.EPERM, "the staging directory is not ours", staging)
        LocalFileOps().rename_noreplace(dir_fd, name, stage_fd, name)
        try:
            _check_verified(stage_fd, name, b"", verified)
        except OSError:
            # Not what was verified: put it back where it was, never remove it.
            LocalFileOps().rename_noreplace(stage_fd, name, dir_fd, name)
            raise
        removed = _remove_verified(stage_fd, name, b"", verified)
    finally:
        os.close(stage_fd)
    os.rmdir(staging, dir_fd=dir_fd)
    return removed


def _verified_stat(
    dir_fd: int, name: bytes, rel: bytes, verified: Mapping[bytes, tuple[int, int, int, int]]
) -> os.stat_result:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    want = verified.get(rel)
    if stat.S_ISREG(st.st_mode):
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    elif stat.S_ISDIR(st.st_mode):
        now = (st.st_dev, st.st_ino, -1, -1)
    else:
        now = None
    if want is None or now != want:
        shown = rel.decode("utf-8", "backslashreplace") or name.decode("utf-8", "backslashreplace")
        raise OSError(errno.ESTALE, "it changed after its copy was verified", shown)
    return st


def _check_verified(
    dir_fd: int, name: bytes, rel: bytes, verified: Mapping[bytes, tuple[int, int, int, int]]
) -> None:
    st = _verified_stat(dir_fd, name, rel, verified)
    if not stat.S_ISDIR(st.st_mode):
        return
    fd = open_dir_at(dir_fd, name)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, "it was replaced after its copy was verified", name)
        require_mount(fd, mount_id(dir_fd), name)  # a mount that arrived is never removed
        with os.scandir(fd) as entries:
            children = [os.fsencode(e.name) for e in entries]
        for child in children:
            _check_verified(fd, child, rel + b"/" + child if rel else child, verified)
    finally:
        os.close(fd)


def _remove_verified(
    dir_fd: int, name: bytes, rel: bytes, verified: Mapping[bytes, tuple[int, int, int, int]]
) -> int:
    st = _verified_stat(dir_fd, name, rel, verified)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return 1
    count = 0
    fd = open_dir_at(dir_fd, name)
    try:
        require_mount(fd, mount_id(dir_fd), name)
        with os.scandir(fd) as entries:
            children = [os.fsencode(e.name) for e in entries]
        for child in children:
            count += _remove_verified(fd, child, rel + b"/" + child if rel else child, verified)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)  # ENOTEMPTY if anything new arrived: it stays
    return count + 1

"""The inventory of a tree to copy to another filesystem: every entry, and whether it can be.

Taken by lstat only, before a copy and again to verify it (``crossdev``): kind, identity, size,
times, permission bits, owner and extended attributes of each entry. A tree holding a symlink,
a hard link, a special file, a mount or (unless we are root) another user's entry is not
verifiable (``Unverifiable``), nor one whose extended attributes cannot be read.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from hygiene_nb.executor.fileops import open_dir_at
from hygiene_nb.fs.mounts import MountInside, mount_id, require_mount

__all__ = ["Entry", "Unverifiable", "inventory"]


class Unverifiable(Exception):
    """A tree whose copy could not be verified (a link, a special file, a mount)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a tree to copy: kind, identity, size, times, permission bits, owner, xattrs.

    ``xattrs`` are its extended attributes (``user.*``, ``security.*``, ``trusted.*`` and the
    ACLs, ``system.posix_acl_access``/``_default``) as sorted (name, value) pairs; ``digest`` is
    the SHA-256 of a file's bytes once a copy of it was verified ("" before).
    """

    is_dir: bool
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    uid: int = -1
    gid: int = -1
    ctime_ns: int = -1
    xattrs: tuple[tuple[str, bytes], ...] = ()
    digest: str = ""


def inventory(dir_fd: int, name: bytes, dev: int) -> dict[bytes, Entry]:
    """Every entry of ``name`` (``b""``) and below it (``b"a/b"``), by lstat only.

    Raises:
        Unverifiable: a symlink, special file, hard-linked file or other filesystem inside,
            or a directory on another mount than ``dir_fd`` (a bind mount counts).
        OSError: it cannot be read.
    """
    out: dict[bytes, Entry] = {}
    _inventory(dir_fd, name, b"", dev, out)
    return out


def _inventory(dir_fd: int, name: bytes, rel: bytes, dev: int, out: dict[bytes, Entry]) -> None:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    shown = (rel or name).decode("utf-8", "backslashreplace")
    if stat.S_ISLNK(st.st_mode):
        raise Unverifiable(f"{shown} is a symlink")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise Unverifiable(f"{shown} is a special file")
    if st.st_dev != dev:
        raise Unverifiable(f"{shown} is on another filesystem")
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise Unverifiable(f"{shown} has {st.st_nlink} hard links")
    if st.st_uid != os.geteuid() and os.geteuid() != 0:
        # only root can give a copy its owner back; a copy owned by us would lock them out
        raise Unverifiable(f"{shown} belongs to another user")
    is_dir = stat.S_ISDIR(st.st_mode)
    out[rel] = Entry(
        is_dir=is_dir,
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size if not is_dir else -1,
        mtime_ns=st.st_mtime_ns if not is_dir else -1,
        mode=stat.S_IMODE(st.st_mode),
        uid=st.st_uid,
        gid=st.st_gid,
        ctime_ns=st.st_ctime_ns,
        xattrs=_xattrs(dir_fd, name, shown),
    )
    if not is_dir:
        return
    fd = open_dir_at(dir_fd, name)
    try:
        try:
            require_mount(fd, mount_id(dir_fd), name)  # the same mount all the way down
        except MountInside as exc:
            raise Unverifiable(f"{shown} is a mount point ({exc.strerror})") from exc
        with os.scandir(fd) as entries:
            children = sorted(os.fsencode(e.name) for e in entries)
        for child in children:
            _inventory(fd, child, rel + b"/" + child if rel else child, dev, out)
    finally:
        os.close(fd)


def _xattrs(dir_fd: int, name: bytes, shown: str) -> tuple[tuple[str, bytes], ...]:
    """Every extended attribute of ``name`` under ``dir_fd`` (no link followed), sorted.

    Read through ``/proc/self/fd`` so that nothing needs to be opened (a link is never followed:
    the last component is looked up with ``follow_symlinks=False``).

    Raises:
        Unverifiable: they cannot be read (then a copy could not be shown to keep them).
    """
    path = os.fsencode(f"/proc/self/fd/{dir_fd}/") + name
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return tuple(sorted((n, os.getxattr(path, n, follow_symlinks=False)) for n in names))
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return ()  # a filesystem without extended attributes: the entry has none
        raise Unverifiable(
            f"the extended attributes of {shown} cannot be read ({exc.strerror})"
        ) from exc

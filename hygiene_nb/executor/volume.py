"""The quarantine at the top of an item's own filesystem (docs/executor.md).

First choice for an item on another filesystem than the store: a quarantine directory
``.hygiene-nb-quarantine`` at the top of the item's own mount, so that the move stays a
no-replace rename (a rename never crosses a mount, not even a bind mount of the same
filesystem). The top is found by walking up from the item's parent handle through ``..`` until
the mount (its mount id, or the device) changes; the directory is created 0700, or if it exists
it must be a real directory (never a symlink) on that mount, owned by us and closed to group and
others (else ``quarantine-untrusted``). Only when it cannot be used, and the person passed
``--allow-copy``, is the item copied into the store's quarantine instead (``crossdev``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, FileOps, open_dir_at
from hygiene_nb.fs.mounts import MountInside, mount_id
from hygiene_nb.store import FLEET_MARKER, fleet_marker_above

__all__ = [
    "QuarantineUntrusted",
    "VolumeQuarantine",
    "open_volume_quarantine",
    "predict_volume_quarantine",
]


class QuarantineUntrusted(Exception):
    """The quarantine at the top of a filesystem exists but must not be used."""


@dataclass
class VolumeQuarantine:
    """An open, checked ``.hygiene-nb-quarantine`` at the top of one filesystem."""

    path: Path
    fd: int
    dev: int

    def close(self) -> None:
        """Close its directory handle."""
        os.close(self.fd)


def _top_of_filesystem(parent_fd: int) -> tuple[int, int]:
    """(a handle on the top directory of ``parent_fd``'s mount, levels climbed).

    Raises:
        MountInside: the mount of a directory on the way cannot be told.
    """
    fd = os.dup(parent_fd)
    levels = 0
    try:
        mount = mount_id(fd)
        if mount is None:
            raise MountInside(b".", "it cannot be told which mount it is on")
        while True:
            here = os.fstat(fd)
            up = os.open(b"..", DIR_FLAGS, dir_fd=fd)
            there = os.fstat(up)
            if there.st_dev != here.st_dev or there.st_ino == here.st_ino or mount_id(up) != mount:
                os.close(up)
                return fd, levels
            os.close(fd)
            fd = up
            levels += 1
    except BaseException:
        os.close(fd)
        raise


def open_volume_quarantine(parent_fd: int, parent_path: bytes, ops: FileOps) -> VolumeQuarantine:
    """Open (creating it 0700 if absent) the quarantine at the top of ``parent_fd``'s filesystem.

    ``parent_path`` is the absolute path of ``parent_fd`` (reached from the plan's root without
    following a link); the quarantine's path is derived from it and checked against the handle.

    Raises:
        QuarantineUntrusted: it exists but is a symlink, not a directory, not on that
            filesystem, not ours or open to group or others; or the top is writable by others
            without the sticky bit; or its path does not lead to it.
        OSError: it cannot be created or opened (read-only, no permission…): unusable.
    """
    path, qfd, top = _volume_quarantine(parent_fd, parent_path, ops)
    assert qfd is not None  # with ops, it exists now or OSError was raised
    return VolumeQuarantine(path, qfd, top.st_dev)


def predict_volume_quarantine(parent_fd: int, parent_path: bytes) -> Path:
    """Where ``open_volume_quarantine`` would put an item, found without changing anything.

    For the dry run: the quarantine at the top of ``parent_fd``'s filesystem, if it exists and
    is trusted, or if it could be created there (the top is writable by us on a writable
    filesystem).

    Raises:
        QuarantineUntrusted: as ``open_volume_quarantine`` would.
        OSError: no batch could be made there (``EROFS``, ``EACCES``).
    """
    path, qfd, _ = _volume_quarantine(parent_fd, parent_path, None)
    if qfd is not None:
        os.close(qfd)
    return path


def _volume_quarantine(
    parent_fd: int, parent_path: bytes, ops: FileOps | None
) -> tuple[Path, int | None, os.stat_result]:
    """(path, handle, the top's stat) of the quarantine at the top of the filesystem.

    With ``ops`` None nothing is changed, and a missing quarantine that could be made gives no
    handle.
    """
    top_fd, levels = _top_of_filesystem(parent_fd)
    try:
        top = os.fstat(top_fd)
        top_mount = mount_id(top_fd)
        top_path = parent_path
        for _ in range(levels):
            top_path = os.path.dirname(top_path)
        if top.st_mode & 0o002 and not top.st_mode & stat.S_ISVTX:
            raise QuarantineUntrusted(f"{os.fsdecode(top_path)} is writable by anyone, not sticky")
        name = QUARANTINE_NAME.encode()
        path = Path(os.fsdecode(os.path.join(top_path, name)))
        fleet = fleet_marker_above(path)
        if fleet is not None:  # published evidence: nothing is ever moved into one
            raise QuarantineUntrusted(
                f"{path} lies inside the fleet dataset {fleet} (it has {FLEET_MARKER})"
            )
        if ops is not None:
            with contextlib.suppress(FileExistsError):
                ops.make_dir(top_fd, name)
        elif os.fstatvfs(top_fd).f_flag & os.ST_RDONLY:  # no batch could be made in it
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        try:
            qfd = open_dir_at(top_fd, name)
        except FileNotFoundError:
            if ops is not None:
                raise
            if not os.access(".", os.W_OK | os.X_OK, dir_fd=top_fd, effective_ids=True):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), path) from None
            return path, None, top
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise QuarantineUntrusted(
                    f"{QUARANTINE_NAME} is a symlink or not a directory"
                ) from exc
            raise
    finally:
        os.close(top_fd)
    try:
        _check_quarantine(qfd, top, path, top_mount)
        if ops is None and not os.access(".", os.W_OK | os.X_OK, dir_fd=qfd, effective_ids=True):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)  # no batch fits in
    except BaseException:
        os.close(qfd)
        raise
    return path, qfd, top


def _check_quarantine(qfd: int, top: os.stat_result, path: Path, top_mount: int | None) -> None:
    st = os.fstat(qfd)
    if st.st_dev != top.st_dev or top_mount is None or mount_id(qfd) != top_mount:
        raise QuarantineUntrusted(f"{path} is on another filesystem or mount than its top")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise QuarantineUntrusted(f"{path} is not owned by you or is open to group or others")
    try:
        by_path = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        raise QuarantineUntrusted(f"{path} cannot be reached by its path ({exc.strerror})") from exc
    if (by_path.st_dev, by_path.st_ino) != (st.st_dev, st.st_ino):
        raise QuarantineUntrusted(f"{path} does not lead to the quarantine that was opened")

"""Which filesystem a directory is on, told by what survives a remount (not ``st_dev``).

A device number is handed out at mount time: an overlay, btrfs subvolume, NFS or FUSE mount,
or an image on another loop device, gets a new one after a remount, and a tmpfs mounted over a
directory gets one too. So a filesystem is identified by ``f_fsid`` (from ``fstatvfs``; most
disk filesystems derive it from their UUID) when it is non-zero, and by the mount that
``/proc/self/mountinfo`` lists for the directory (type, source, root inside the filesystem and
mount point). Both are recorded; ``same_filesystem`` compares a recorded identity with the
current one and answers True, False or None (cannot tell — callers refuse on None).
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Any

from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.fs.mounts import mount_id, mount_table

__all__ = ["birth_ns", "fs_identity", "same_filesystem"]

_LIBC = ctypes.CDLL(None, use_errno=True)
_STATX = getattr(_LIBC, "statx", None)
_STATX_BTIME = 0x800
_AT_SYMLINK_NOFOLLOW = 0x100
_STATX_SIZE = 256
_BTIME_OFFSET = 80  # struct statx: stx_btime {s64 tv_sec; u32 tv_nsec; s32 reserved}

_MOUNT_KEYS = ("fstype", "source", "root", "mount_point")
_PLACE_KEYS = ("fstype", "root", "mount_point")


def fs_identity(fd: int) -> dict[str, Any] | None:
    """The identity of the filesystem holding the directory (or file) open at ``fd``.

    Keys: ``dev`` (the device number now, a hint only), ``fsid`` (hex, when non-zero) and,
    when ``/proc/self/mountinfo`` lists the mount, ``fstype``, ``source``, ``root`` and
    ``mount_point``. None when neither ``f_fsid`` nor the mount can be read.
    """
    try:
        dev = signed64(os.fstat(fd).st_dev)
        fsid = os.fstatvfs(fd).f_fsid
    except OSError:
        return None
    out: dict[str, Any] = {"dev": dev}
    if fsid:
        out["fsid"] = f"{fsid & 0xFFFFFFFFFFFFFFFF:x}"
    mount = _mount_of(fd)
    if mount is not None:
        out.update(mount)
    if "fsid" not in out and mount is None:
        return None
    return out


def birth_ns(dir_fd: int, name: bytes) -> int | None:
    """When the entry ``name`` under ``dir_fd`` was created (``statx`` btime), or None.

    An inode number is reused as soon as it is freed, so a file removed and written anew can
    come back with the very number; only its birth time tells it apart. None where the
    filesystem or the C library does not say.
    """
    if _STATX is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if _STATX(dir_fd, name, _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, buf) != 0:
        return None
    (mask,) = struct.unpack_from("I", buf.raw, 0)
    if not mask & _STATX_BTIME:
        return None
    sec, nsec = struct.unpack_from("qI", buf.raw, _BTIME_OFFSET)
    return int(sec) * 1_000_000_000 + int(nsec)


def _mount_of(fd: int) -> dict[str, str] | None:
    """The mountinfo fields of the mount ``fd`` is on (by its mount id), or None."""
    found = mount_id(fd)
    table = mount_table()
    if found is None or table is None:
        return None
    mnt_id = str(found).encode()
    for line in table.splitlines():
        fields = line.split(b" ")
        if fields[0] != mnt_id or b"-" not in fields[6:]:
            continue
        tail = fields[fields.index(b"-", 6) + 1 :]
        if len(tail) < 2:
            return None
        values = (tail[0], tail[1], fields[3], fields[4])
        return {
            k: v.decode("utf-8", "backslashreplace")
            for k, v in zip(_MOUNT_KEYS, values, strict=True)
        }
    return None


def same_filesystem(then: dict[str, Any] | None, now: dict[str, Any] | None) -> bool | None:
    """Whether ``now`` is the filesystem recorded as ``then``: True, False, or None (unknown).

    A non-zero ``f_fsid`` on both sides decides, unless the mount differs (the same filesystem
    mounted elsewhere, or another of its directories bound over the place, is refused) or the
    fsids differ on an otherwise identical mount under a new device number (None). Else the
    mount decides: another type, source, root or mount point is another filesystem; the same
    mount with the same device number is the same one; the same mount under a new device number
    is the same only when its source names something durable (a device path or a remote
    ``host:path``) — two tmpfs mounts both called ``tmpfs`` cannot be told apart.
    """
    if not then or not now:
        return None
    if then.get("fsid") and now.get("fsid"):
        if then["fsid"] != now["fsid"]:
            # some filesystems derive f_fsid from the device number: the very same mount
            # under a new device number cannot be told from another filesystem by it
            remounted = then.get("dev") != now.get("dev") and all(
                k in then and k in now and then[k] == now[k] for k in _MOUNT_KEYS
            )
            return None if remounted else False
        # the same filesystem mounted elsewhere, or another part of it bound over the place
        # (its source may change: the same image on another loop device)
        return not any(k in then and k in now and then[k] != now[k] for k in _PLACE_KEYS)
    if not all(k in then and k in now for k in _MOUNT_KEYS):
        return None
    if any(then[k] != now[k] for k in _MOUNT_KEYS):
        return False
    if then.get("dev") == now.get("dev"):
        return True
    source = str(now["source"])
    return True if source.startswith("/") or ":" in source else None

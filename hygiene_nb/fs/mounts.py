"""Which mount a directory is on: mount ids, never device numbers (read-only).

A bind mount of another directory of the *same* filesystem has the same ``st_dev`` as its
surroundings, so a device check alone cannot see it. The kernel names every mount with a mount
id: ``statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID)`` gives it for an open handle (Linux 5.8), and
``/proc/self/fdinfo/FD`` (its ``mnt_id:`` line, the ids of ``/proc/self/mountinfo``) where
``statx`` cannot. When neither can tell, the answer is ``None``: callers treat that as "another
mount may be here" and refuse, never as "the same mount".

Every recursive walk that must stay on one mount (fingerprints, the executor's copies, purge)
compares the mount id of each directory it opens with the id of the directory it started
from, and stops with ``MountInside`` at the first difference, before reading anything below it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select

__all__ = [
    "AT_FDCWD",
    "MountInside",
    "mount_id",
    "mount_id_at",
    "mount_points_below",
    "mount_table",
    "mounted_inside",
    "require_mount",
    "same_mount",
]

AT_FDCWD = -100  # a dir_fd meaning "relative to the working directory" (absolute paths)
STATX_MNT_ID = 0x1000
STATX_ATTR_MOUNT_ROOT = 0x2000
_AT_EMPTY_PATH = 0x1000
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_NO_AUTOMOUNT = 0x800
_STATX_SIZE = 256  # struct statx, with its spare room
_MASK_OFFSET = 0
_ATTRIBUTES_OFFSET = 8
_ATTRIBUTES_MASK_OFFSET = 56
_MNT_ID_OFFSET = 144

_LIBC = ctypes.CDLL(None, use_errno=True)
_STATX = getattr(_LIBC, "statx", None)
if _STATX is not None:
    _STATX.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
    _STATX.restype = ctypes.c_int


class MountInside(OSError):
    """A directory on the way is on another mount than where the walk began (or cannot tell)."""

    def __init__(
        self, where: bytes | str, why: str = "another filesystem is mounted there"
    ) -> None:
        super().__init__(errno.EXDEV, why, os.fsdecode(where))


def _statx_mount_id(dir_fd: int, name: bytes, flags: int) -> int | None:
    if _STATX is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if _STATX(dir_fd, name, flags | _AT_NO_AUTOMOUNT, STATX_MNT_ID, buf) != 0:
        return None
    raw = buf.raw
    mask = int.from_bytes(raw[_MASK_OFFSET : _MASK_OFFSET + 4], "little")
    if not mask & STATX_MNT_ID:
        return None  # a kernel older than 5.8: it does not say
    return int.from_bytes(raw[_MNT_ID_OFFSET : _MNT_ID_OFFSET + 8], "little")


def _fdinfo_mount_id(fd: int) -> int | None:
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as info:
            for line in info:
                if line.startswith(b"mnt_id:"):
                    return int(line.split(b":", 1)[1])
    except (OSError, ValueError):
        return None
    return None


def mount_id(fd: int) -> int | None:
    """The mount id of what ``fd`` is open on, or None when it cannot be told."""
    found = _statx_mount_id(fd, b"", _AT_EMPTY_PATH)
    return found if found is not None else _fdinfo_mount_id(fd)


def mount_id_at(dir_fd: int, name: bytes) -> int | None:
    """The mount id of entry ``name`` under ``dir_fd`` (a mount on it counts; no link followed).

    ``dir_fd`` may be ``AT_FDCWD`` for an absolute ``name``. None when it cannot be told.
    """
    found = _statx_mount_id(dir_fd, name, _AT_SYMLINK_NOFOLLOW)
    if found is not None:
        return found
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return _fdinfo_mount_id(fd)
    finally:
        os.close(fd)


def require_mount(fd: int, expected: int | None, where: bytes | str) -> None:
    """Raise ``MountInside`` unless the handle ``fd`` is on the mount ``expected``.

    An unknown mount id on either side is "cannot tell", which refuses too.
    """
    here = mount_id(fd)
    if expected is None or here is None:
        raise MountInside(where, "it cannot be told whether another filesystem is mounted there")
    if here != expected:
        raise MountInside(where)


def _unescape(field: bytes) -> bytes:
    """A mountinfo path field with its octal escapes (a space is written as 040) undone."""
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i : i + 1] == b"\\" and len(field) >= i + 4 and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


_TABLE: tuple[int, bytes] | None = None  # (an open handle on the table, what it held)


def mount_table() -> bytes | None:
    """The text of ``/proc/self/mountinfo`` as it is now (None: it cannot be read).

    Read again only when the kernel says the mount table changed since it was last read: a
    handle kept open on it polls ``POLLPRI``/``POLLERR`` after any mount or unmount in this
    mount namespace. So a restore of 100,000 items reads it once, and a mount made meanwhile
    is still seen by the next question.
    """
    global _TABLE
    if _TABLE is not None:
        fd, text = _TABLE
        watch = select.poll()
        watch.register(fd, select.POLLPRI | select.POLLERR)
        if not watch.poll(0):
            return text
        _TABLE = None
        os.close(fd)
    try:
        fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        os.close(fd)
        return None
    _TABLE = (fd, b"".join(chunks))
    return _TABLE[1]


def mount_points_below(path: bytes) -> list[bytes] | None:
    """Mount points at ``path`` or below it, from ``/proc/self/mountinfo`` (None: unreadable).

    Catches what a walk of directories cannot see: a file bind-mounted over a file.
    """
    table = mount_table()
    if table is None:
        return None
    lines = table.splitlines()
    top = path.rstrip(b"/") or b"/"
    prefix = top if top == b"/" else top + b"/"
    found = []
    for line in lines:
        fields = line.split(b" ")
        if len(fields) < 5:
            return None
        point = _unescape(fields[4])
        if point == top or point.startswith(prefix):
            found.append(point)
    return found


def kernel_path(fd: int) -> bytes | None:
    """The path the kernel knows the directory open at ``fd`` by (None when it cannot say).

    The mount table lists mount points by that path, with every symlink on the way resolved: a
    root reached through a symlinked ancestor (``~/link/R``) is compared by it, never by text.
    """
    try:
        path = os.readlink(f"/proc/self/fd/{fd}".encode())
    except OSError:
        return None
    if not path.startswith(b"/") or path.endswith(b" (deleted)"):
        return None
    return path


def mounts_below_fd(fd: int, given: bytes) -> list[bytes] | None:
    """``mount_points_below`` of the directory open at ``fd``, as paths below ``given``.

    ``given`` is the path the caller reached that directory by; the mount table is read by the
    kernel's path of it and its answers mapped back. None: cannot tell.
    """
    real = kernel_path(fd)
    if real is None:
        return None
    found = mount_points_below(real)
    if found is None:
        return None
    top, base = given.rstrip(b"/"), real.rstrip(b"/")
    return [(top + point[len(base) :]) or b"/" for point in found]


def same_mount(a_fd: int, b_fd: int) -> bool:
    """Whether two handles are on one mount (a rename between them can work); False if unknown."""
    a, b = mount_id(a_fd), mount_id(b_fd)
    return a is not None and a == b


def mounted_inside(dir_fd: int, name: bytes) -> str:
    """Why ``name`` under ``dir_fd`` may hold a mount (one at it or below it), or "" if none is.

    From ``/proc/self/mountinfo`` (by the kernel's path of ``dir_fd``, whatever symlinks the
    caller's path went through), so a file bind-mounted over a file counts too; an unreadable
    table or an unknown path is "cannot tell", which is a reason as well.
    """
    real = kernel_path(dir_fd)
    found = None if real is None else mount_points_below(os.path.join(real, name))
    if found is None:
        return "the mount table cannot be read, so it cannot be told whether a mount is inside"
    if not found:
        return ""
    shown = ", ".join(os.fsdecode(p) for p in sorted(found)[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return f"another filesystem is mounted at {shown}{more}"

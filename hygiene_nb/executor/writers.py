"""Is another program writing to a file right now? Asked with a read lease, changing nothing.

A read lease (``fcntl(F_SETLEASE, F_RDLCK)``) cannot be taken while anyone has the file open for
writing (``EAGAIN``). It is taken and released at once; while it is held another program's
open-for-write would wait for it, and the kernel would signal us (``SIGIO``), so ``SIGIO`` is
ignored for the moment of the probe. Anything that keeps the answer from being known — a
filesystem without leases (``EINVAL``), a file that is not ours without ``CAP_LEASE``
(``EACCES``), a probe off the main thread (``SIGIO`` cannot be set aside there) — is reported as
"cannot tell", which callers treat exactly like "in use".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import threading
from collections.abc import Iterator

__all__ = ["Probe", "tree_writer"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = _READ_FLAGS | os.O_DIRECTORY
_IN_USE = (errno.EAGAIN, errno.EBUSY)


class Probe:
    """Probes for writers, with ``SIGIO`` set aside while it is open (``with Probe() as p``)."""

    def __init__(self) -> None:
        self._old: object = None
        self.usable = threading.current_thread() is threading.main_thread()

    def __enter__(self) -> Probe:
        if self.usable:
            self._old = signal.signal(signal.SIGIO, signal.SIG_IGN)
        return self

    def __exit__(self, *_: object) -> None:
        if self.usable:
            signal.signal(signal.SIGIO, self._old)  # type: ignore[arg-type]

    def file(self, dir_fd: int, name: bytes, expect: os.stat_result | None = None) -> str:
        """Why ``name`` under ``dir_fd`` may be written to now ("" when nobody has it open so).

        ``expect`` is what the file must still be (device, inode, size, mtime, ctime); a file
        that differs is reported too.
        """
        if not self.usable:
            return "whether another program writes to it cannot be told off the main thread"
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            return f"it cannot be opened to ask whether it is in use ({exc.strerror})"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return "it is not a regular file any more"
            if expect is not None and _identity(st) != _identity(expect):
                return "it changed while it was checked"
            try:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
            except OSError as exc:
                if exc.errno in _IN_USE:
                    return "another program has it open for writing"
                return f"whether another program writes to it cannot be told ({exc.strerror})"
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            return ""
        finally:
            os.close(fd)


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def tree_writer(dir_fd: int, name: bytes) -> str:
    """Why something in ``name`` (a file, or every file below a directory) may be written to now.

    "" when no file of it is open for writing. Other filesystems below it are not entered.
    """
    with Probe() as probe:
        try:
            for parent, child, st in _files(dir_fd, name):
                why = probe.file(parent, child, st)
                if why:
                    return f"{os.fsdecode(child)}: {why}" if child != name else why
        except OSError as exc:
            return f"whether another program writes to it cannot be told ({exc.strerror})"
    return ""


def _files(dir_fd: int, name: bytes) -> Iterator[tuple[int, bytes, os.stat_result]]:
    """(parent handle, name, lstat) of every regular file of ``name``, depth first."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISREG(st.st_mode):
        yield dir_fd, name, st
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        if os.fstat(fd).st_dev != st.st_dev:
            return
        with os.scandir(fd) as entries:
            children = sorted(os.fsencode(e.name) for e in entries)
        for child in children:
            child_st = os.stat(child, dir_fd=fd, follow_symlinks=False)
            if child_st.st_dev != st.st_dev:
                continue
            if stat.S_ISDIR(child_st.st_mode):
                yield from _files(fd, child)
            elif stat.S_ISREG(child_st.st_mode):
                yield fd, child, child_st
    finally:
        os.close(fd)

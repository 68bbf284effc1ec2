"""The C heap of a scan: glibc's malloc arenas, bounded and given back.

The walker's threads (``scan.walk.cwalk``) allocate and free their row buffers through malloc.
glibc gives each contending thread an arena of its own (up to 8 per core) and keeps what was
freed in it, so a long scan's freed buffers pile up, scattered over 16 arenas: on the
benchmark's 5M-entry tree the scan's resident memory grew from about 225 MiB before its first
row group to about 315 before its last. With two arenas (one per core of that 2-core machine),
given back after each row group is written, it stayed at about 233 MiB from first to last.

``bound_arenas`` is process-wide, so only the ``hygiene-nb scan`` command calls it (before the
walk starts its threads); ``api.scan_root`` in a notebook's kernel leaves its settings as they
are. It allows one arena per core the process may run on (two at least), and leaves alone a
limit the user set (``MALLOC_ARENA_MAX``, or ``glibc.malloc.arena_max`` in ``GLIBC_TUNABLES``).
``give_back`` only returns free pages to the system, so every scan calls it. Both do nothing
where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["ARENAS", "arenas_wanted", "bound_arenas", "give_back"]

ARENAS = 2  # the fewest arenas a scan's threads share (measured on a 2-core machine)
_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's C library, when it is glibc (it has ``gnu_get_libc_version``)."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    needed = ("gnu_get_libc_version", "mallopt", "malloc_trim")
    return libc if all(hasattr(libc, name) for name in needed) else None


def arenas_wanted() -> int | None:
    """The arenas a scan allows: one per core it may run on, two at least (None: the user's)."""
    if os.environ.get("MALLOC_ARENA_MAX") or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return None
    return max(ARENAS, len(os.sched_getaffinity(0)))


def bound_arenas() -> bool:
    """Let at most ``arenas_wanted()`` malloc arenas be made from now on.

    Whether it was asked of glibc (glibc fixes its limit when it first needs one: a process
    that had already made its arenas keeps them).
    """
    libc = _glibc()
    wanted = arenas_wanted()
    return libc is not None and wanted is not None and libc.mallopt(_M_ARENA_MAX, wanted) == 1


def give_back() -> bool:
    """Return the free pages of every malloc arena to the system; whether any were."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(ctypes.c_size_t(0)) == 1

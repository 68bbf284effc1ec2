"""The C heap of a scan: glibc's malloc arenas, bounded and given back.

The walker's threads (``scan.walk.cwalk``) allocate and free their row buffers through malloc.
glibc gives each contending thread an arena of its own (up to 8 per core) and keeps what was
freed in it, so a long scan's freed buffers pile up, scattered over 16 arenas: on the
benchmark's trees the scan's resident memory grew from about 225 MiB before its first row group
to about 315 before its last at 5M entries (273 at 1M). With two arenas, given back after each
row group is written, it stayed at about 233 MiB from the first group to the last.

``bound_arenas`` is process-wide, so only the ``hygiene-nb scan`` command calls it (before the
walk starts its threads); a notebook's kernel keeps its own settings. ``give_back`` only returns
free pages to the system, so every scan calls it. Both do nothing where the C library is not
glibc.
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["ARENAS", "bound_arenas", "give_back"]

ARENAS = 2  # the arenas a scan's threads share: one per core of the 2-core benchmark machine
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


def bound_arenas(arenas: int = ARENAS) -> bool:
    """Let at most ``arenas`` malloc arenas be made from now on; whether glibc took it."""
    libc = _glibc()
    return libc is not None and libc.mallopt(_M_ARENA_MAX, int(arenas)) == 1


def give_back() -> bool:
    """Return the free pages of every malloc arena to the system; whether any were."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1

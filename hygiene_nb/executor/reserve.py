"""Room for a run's records, held from before the first move until they are written.

``execute`` moves items first and writes its receipt, its ledger rows and its ``cleanup.log``
line after. A store that fills up in between (another program, or the run's own copies) used
to leave moved items with no receipt and the plan ``executing`` forever. So before the plan is
claimed a file ``receipts/.reserve-PLAN_ID`` is allocated (``posix_fallocate``) with room for
them and locked; just before the records are written its space is given back (truncated), and
once they are written it is removed. Its lock also tells ``recover`` that a run is alive: a
reserve nobody locks belongs to a run that died.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets

from hygiene_nb.errors import PlanAlreadyExecuted, StoreError
from hygiene_nb.executor.fileops import DIR_FLAGS, remove_own_file
from hygiene_nb.store import Store

__all__ = ["RESERVE_PREFIX", "Reserve", "reserve_name", "reserved_by_a_live_run"]

RESERVE_PREFIX = ".reserve-"
_BASE = 256 * 1024  # the ledger's journal, the log line, the receipt's fixed part
_PER_ITEM = 2048  # a receipt item is well under 1 KiB; its ledger and manifest share the rest
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def reserve_name(plan_id: str) -> bytes:
    """The reserve file's name in ``receipts/`` for ``plan_id``."""
    return (RESERVE_PREFIX + plan_id).encode()


class Reserve:
    """A locked, allocated reserve file (``hold``), released and removed around the records."""

    def __init__(self, dir_fd: int, fd: int, name: bytes) -> None:
        self.dir_fd, self.fd, self.name = dir_fd, fd, name

    @classmethod
    def hold(cls, store: Store, plan_id: str, items: int) -> Reserve:
        """Allocate and lock room for the records of a run over ``items`` candidates.

        Raises:
            StoreError: the store has no room for them (nothing was moved or claimed).
            PlanAlreadyExecuted: another run of the plan holds its reserve.
        """
        size = _BASE + _PER_ITEM * items
        try:
            dir_fd = os.open(store.receipts, DIR_FLAGS)
        except OSError as exc:
            raise StoreError(
                f"{store.receipts} cannot be opened ({exc.strerror}); check the store. "
                "Nothing was moved."
            ) from exc
        name = reserve_name(plan_id)
        try:
            fd = _create(dir_fd, name)
        except OSError as exc:
            os.close(dir_fd)
            if exc.errno == errno.EEXIST:
                raise PlanAlreadyExecuted(
                    f"plan {plan_id} is being executed (its run holds "
                    f"{store.receipts / name.decode()}); a plan acts once. Nothing was moved."
                ) from exc
            raise StoreError(
                f"the space for plan {plan_id}'s receipt cannot be reserved in {store.receipts} "
                f"({exc.strerror}); nothing was moved and the plan can still be executed."
            ) from exc
        reserve = cls(dir_fd, fd, name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _allocate(fd, size)
        except OSError as exc:
            reserve.close()
            raise StoreError(
                f"the store {store.root} has no room for the records of this run ({size:,} "
                f"bytes: its receipt, ledger rows and log line; {exc.strerror}); free some "
                "space there and execute again. Nothing was moved and the plan can still be "
                "executed."
            ) from exc
        return reserve

    def release(self) -> None:
        """Give the reserved space back (the file and its lock stay until ``close``)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)

    def close(self) -> None:
        """Remove the reserve file (only if it is still this one) and let go of its lock."""
        with contextlib.suppress(OSError):
            mine, there = (
                os.fstat(self.fd),
                os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False),
            )
            if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                remove_own_file(self.dir_fd, self.name)
        os.close(self.fd)
        os.close(self.dir_fd)


def _create(dir_fd: int, name: bytes) -> int:
    """Create the reserve; one a dead run left (nobody locks it) is replaced.

    Raises:
        OSError: ``EEXIST`` while a live run holds it, or it cannot be created.
    """
    # Made and locked under a name of its own first, then linked to ``name`` (no-replace): no
    # other run can ever see it by ``name`` unlocked and take it for a dead run's.
    tmp = name + b".new-" + secrets.token_hex(6).encode()
    fd = os.open(tmp, _FLAGS, 0o600, dir_fd=dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            _link(dir_fd, tmp, name)
        except FileExistsError:
            if reserved_by_a_live_run(dir_fd, name):
                raise
            with contextlib.suppress(FileNotFoundError):
                remove_own_file(dir_fd, name)  # a run that died before claiming left it
            _link(dir_fd, tmp, name)  # EEXIST again: another run made one meanwhile
    except BaseException:
        os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):
            remove_own_file(dir_fd, tmp)
    return fd


def _link(dir_fd: int, tmp: bytes, name: bytes) -> None:
    os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)


def _allocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
            raise
        block = b"\0" * 65536  # a filesystem without fallocate: write the room out
        for start in range(0, size, len(block)):
            os.pwrite(fd, block[: size - start], start)
        os.fsync(fd)


def reserved_by_a_live_run(dir_fd: int, name: bytes) -> bool | None:
    """Whether the reserve ``name`` is locked by a running execution (None: there is none).

    Raises:
        OSError: it cannot be opened to tell.
    """
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)

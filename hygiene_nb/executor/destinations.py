"""Where each item goes: the store's quarantine, its own filesystem's, a verified copy, or nowhere.

A rename works only within one mount, so an item on the store's mount goes to the store's
quarantine; an item on another filesystem goes to the quarantine at the top of that filesystem
(``.hygiene-nb-quarantine``); only when that one cannot be used and ``allow_copy`` is set is it
copied into the store's batch, verified, and only then removed from its place; else it is
skipped (``cross-device``, ``read-only-filesystem``, ``quarantine-untrusted``). ``Destinations``
answers for the dry run, read-only; the run (``moves.Run``) decides with the same rules and
claims the batches.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from hygiene_nb.executor.batches import Batch
from hygiene_nb.executor.crossdev import crossdev_skip
from hygiene_nb.executor.fileops import DIR_FLAGS
from hygiene_nb.executor.inventory import Entry, Unverifiable, inventory
from hygiene_nb.executor.records import Destination, Method, Skip
from hygiene_nb.executor.volume import QuarantineUntrusted, predict_volume_quarantine
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.fs.mounts import mount_id
from hygiene_nb.plan.records import Candidate
from hygiene_nb.store import Store

__all__ = [
    "Dest",
    "Destinations",
    "Mount",
    "copyable",
    "into_batch",
    "mount_of",
    "path_mount",
    "read_only",
    "same_mount",
    "unusable",
    "unusable_on_error",
]

Mount = tuple[int, int | None]  # (st_dev, mount id or None when it cannot be told)


def mount_of(fd: int) -> Mount:
    """Which mount a handle is on: (device, mount id).

    A rename works only within one mount (``EXDEV`` across two, even two bind mounts of the
    same filesystem, which share ``st_dev``).
    """
    return os.fstat(fd).st_dev, mount_id(fd)


def path_mount(path: Path) -> Mount:
    """Which mount the directory at ``path`` is on (as ``mount_of``)."""
    fd = os.open(path, DIR_FLAGS)
    try:
        return mount_of(fd)
    finally:
        os.close(fd)


def same_mount(a: Mount, b: Mount) -> bool:
    """Whether a rename between the two can work (not when a mount id cannot be told)."""
    return a == b and a[1] is not None


def read_only(fd: int) -> bool:
    """Whether the directory open at ``fd`` is on a read-only mount (nothing can leave it)."""
    return bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)


@dataclass
class Dest:
    """Where the items of one other filesystem go: its own batch, a copy, or nowhere (skip)."""

    batch: Batch | None = None
    copy: bool = False
    skip: tuple[str, str] | None = None  # (code, detail)


def unusable(detail: str, allow_copy: bool) -> Dest:
    """A volume quarantine that cannot be used: a verified copy if allowed, else a skip."""
    return Dest(copy=True) if allow_copy else Dest(skip=("cross-device", detail))


def unusable_on_error(exc: OSError, what: str, allow_copy: bool) -> Dest:
    """``unusable`` for an OSError, except that nothing leaves a read-only filesystem."""
    if exc.errno == errno.EROFS:
        return Dest(skip=("read-only-filesystem", ""))
    return unusable(f"{what} ({exc.strerror})", allow_copy)


def into_batch(batch: Batch, method: Method) -> Destination:
    """Where an item went: ``batch``, by ``method``."""
    return Destination(method, batch_id=batch.batch_id, batch_path=str(batch.path))


def copyable(parent: int, raw: bytes, cand: Candidate) -> tuple[dict[bytes, Entry], Skip | None]:
    """The item's inventory, if a copy of it can be verified (else a skip; nothing created)."""
    name = os.path.basename(raw)
    try:
        planned = inventory(parent, name, os.fstat(parent).st_dev)
    except Unverifiable as exc:
        return {}, crossdev_skip(cand.path, "copy-unverifiable", str(exc))
    except OSError as exc:
        return {}, crossdev_skip(cand.path, "copy-failed", exc.strerror or "unreadable")
    top = planned[b""]
    if (signed64(top.dev), signed64(top.ino)) != (cand.dev, cand.inode):
        return {}, Skip.of(cand.path, "changed-since-review", "it was replaced")
    return planned, None


class Destinations:
    """The dry run's answer to "which quarantine?", with the executor's rules, read-only.

    The store's quarantine for items on its filesystem; else the quarantine at the top of the
    item's filesystem if it exists and is trusted or could be made; else, with ``allow_copy``,
    a verified copy into the store's quarantine; else a ``cross-device`` skip.
    """

    def __init__(self, store: Store, allow_copy: bool) -> None:
        self.store, self.allow_copy = store, allow_copy
        here = store.quarantine if store.quarantine.exists() else store.root
        self.mount = path_mount(here)
        self.volumes: dict[Mount, tuple[Dest, str]] = {}  # mount → (choice, its quarantine)

    def where(
        self, parent: int, raw: bytes, cand: Candidate
    ) -> tuple[Destination | None, Skip | None]:
        """Where an item would move (quarantine and method), else why it would not."""
        if read_only(parent):  # as ``Run.dest_for``
            return None, crossdev_skip(cand.path, "read-only-filesystem")
        mount = mount_of(parent)
        if same_mount(mount, self.mount):
            return Destination("rename", quarantine=str(self.store.quarantine)), None
        if mount not in self.volumes:
            self.volumes[mount] = self._volume(parent, raw)
        dest, quarantine = self.volumes[mount]
        if dest.skip is not None:
            return None, crossdev_skip(cand.path, *dest.skip)
        if dest.copy:
            _, skip = copyable(parent, raw, cand)
            if skip is not None:
                return None, skip
            return Destination("copy", quarantine=str(self.store.quarantine)), None
        return Destination("rename", quarantine=quarantine), None

    def _volume(self, parent: int, raw: bytes) -> tuple[Dest, str]:
        try:
            return Dest(), str(predict_volume_quarantine(parent, os.path.dirname(raw)))
        except QuarantineUntrusted as exc:
            return Dest(skip=("quarantine-untrusted", str(exc))), ""
        except OSError as exc:
            return unusable_on_error(
                exc, "no quarantine at the top of its filesystem", self.allow_copy
            ), ""

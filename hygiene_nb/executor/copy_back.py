"""Restoring across filesystems: a verified copy back instead of a rename.

An item whose target is on another filesystem than the batch (copied in with ``--allow-copy``)
is copied beside the target under a private temporary name, verified, renamed onto its name
without replacing anything, recorded, and only then is the batch's copy removed
(``copy_back``). A copy-back interrupted before its rename leaves a named partial copy that is
never copied over (``no_leftover``); one interrupted after it is recognized by its recorded
identity and content (``copied_back_before``) and finished (``finish_copy_back``).
"""

from __future__ import annotations

import base64
import os
import secrets

from hygiene_nb.executor.batches import Batch, ManifestItem, write_manifest
from hygiene_nb.executor.crossdev import (
    CopyMismatch,
    copy_verified,
    verified_identities,
    verify_copy,
)
from hygiene_nb.executor.fileops import FileOps, remove_original_after_verified_copy
from hygiene_nb.executor.inventory import Entry, Unverifiable, inventory
from hygiene_nb.executor.restore_outcomes import OCCUPIED, Block, Left, record
from hygiene_nb.fs.fingerprint import signed64

__all__ = ["copied_back_before", "copy_back", "finish_copy_back", "no_leftover"]


def copy_back(
    batch: Batch, item: ManifestItem, where: tuple[int, int, bytes], ops: FileOps
) -> None:
    """Restore across filesystems: copy → verify → no-replace rename → record → remove.

    The target is on another filesystem than the batch (an item copied in with
    ``--allow-copy``, or a mount that changed). The batch's copy is copied beside the target
    under a private temporary name and verified (every entry, byte count and SHA-256), then
    renamed onto the original name without replacing anything. The item is recorded
    ``restored`` before the batch's copy is removed, with the same verified-copy removal the
    executor uses; if that removal fails, the batch keeps a duplicate until it is purged.
    A failure before the rename leaves the batch's copy as it was.

    Raises:
        Block: it could not be copied back (``restore-copy-failed``) or the target was taken
            meanwhile (``target-occupied``; the verified copy is left beside it and named).
    """
    src, dst, name = where
    no_leftover(batch, item, dst)
    temp = b".hygiene-nb-restoring-" + secrets.token_hex(6).encode()
    shown = os.fsdecode(os.path.join(os.path.dirname(item.original_raw), temp))
    item.restoring_at = temp.decode("ascii")
    write_manifest(batch)  # a crash mid-copy leaves a named, recorded partial copy
    try:
        planned = inventory(src, name, os.fstat(src).st_dev)
    except (Unverifiable, OSError) as exc:
        raise Block(
            "restore-copy-failed",
            f"{item.original} is on another filesystem than batch {batch.batch_id} and its "
            f"copy there cannot be copied back ({exc}); nothing was changed, inspect "
            f"{batch.path} by hand.",
        ) from exc
    try:
        # the bits the copy into the batch had to change come back (through the new handles)
        modes = {base64.b64decode(str(rel)): int(m) for rel, m in item.modes or []}
        verified = copy_verified(src, name, dst, planned, ops, dst_name=temp, modes=modes)
    except (CopyMismatch, Unverifiable, OSError) as exc:
        raise Block(
            "restore-copy-failed",
            f"copying {item.original} back from batch {batch.batch_id} failed ({exc}); the "
            f"batch still holds it. A partial copy may be left at {shown}: remove it, then "
            "run restore again.",
        ) from exc
    arrived = os.stat(temp, dir_fd=dst, follow_symlinks=False)
    # Recorded before the rename: after a crash between the rename and the manifest write, the
    # next restore recognizes the target as this very copy (and re-verifies it) instead of
    # calling it occupied.
    item.restored_as = [signed64(arrived.st_dev), signed64(arrived.st_ino)]
    write_manifest(batch)
    try:
        ops.rename_noreplace(dst, temp, dst, name)
    except OSError as exc:
        code = "target-occupied" if exc.errno in OCCUPIED else "restore-copy-failed"
        raise Block(
            code,
            f"{item.original} could not take the verified copy ({exc.strerror}; anything there "
            f"was left untouched); the copy is at {shown} and the batch still holds the item. "
            "Move one of them aside and run restore again.",
        ) from exc
    finish_copy_back(batch, item, src, name, verified)


def no_leftover(batch: Batch, item: ManifestItem, dst: int) -> None:
    """Refuse to copy again beside a partial copy an interrupted copy-back left (named)."""
    if not item.restoring_at:
        return
    left = item.restoring_at.encode("ascii")
    try:
        os.stat(left, dir_fd=dst, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError:
        pass
    shown = os.fsdecode(os.path.join(os.path.dirname(item.original_raw), left))
    raise Block(
        "restore-leftover",
        f"an interrupted restore left a copy (maybe partial) of {item.original} at {shown}; it is "
        f"only a duplicate (batch {batch.batch_id} holds the item): remove it, then run restore "
        "again.",
    )


def copied_back_before(
    batch: Batch, item: ManifestItem, src: int, dst: int, name: bytes
) -> dict[bytes, Entry] | None:
    """The batch copy's verified inventory if the target holds this item's own copy, else None.

    A restore that stopped between its rename and its manifest write left it: the occupant
    has the identity recorded in ``restored_as`` and the same content as the batch's copy.
    """
    if item.restored_as is None:
        return None
    try:
        st = os.stat(name, dir_fd=dst, follow_symlinks=False)
        if [signed64(st.st_dev), signed64(st.st_ino)] != list(item.restored_as):
            return None
        return verify_copy(src, name, dst, name, inventory(src, name, os.fstat(src).st_dev))
    except (CopyMismatch, Unverifiable, OSError):
        return None


def finish_copy_back(
    batch: Batch, item: ManifestItem, src: int, name: bytes, verified: dict[bytes, Entry]
) -> None:
    """Record the item back, then remove the batch's copy (it is a duplicate now).

    Raises:
        Left: the batch's copy could not be removed; it stays, recorded, until purged.
    """
    record(batch, item, "restored")
    item.restoring_at = None
    write_manifest(batch)  # recorded back before the batch's copy goes
    try:
        remove_original_after_verified_copy(src, name, verified_identities(verified))
    except OSError as exc:
        raise Left(
            f"{item.original} is back, but its copy in batch {batch.batch_id} could not be "
            f"removed ({exc.strerror}); it stays there, recorded, until you purge the batch."
        ) from exc

"""Carrying the moves out: one execution's batches, and each item moved into one of them.

``Run`` re-checks a group of candidates at the moment of acting, decides where each goes (the
rules of ``destinations``, claiming a batch on first use) and records every movable item
``pending`` in its batch's manifest before the first of them moves. Each move is then a
no-replace rename, checked where it arrived: anything other than what the plan described is put
back (never replacing) or, if it cannot be, held in the batch with its origin recorded. An item
that must be copied across filesystems is copied, verified and recorded ``moved`` before its
original is removed. The manifest is written again once the group is done.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from dataclasses import replace

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.batches import (
    TREE_NAME,
    Batch,
    ManifestItem,
    claim_batch,
    claim_batch_at,
    mirror_parent,
)
from hygiene_nb.executor.batches import write_manifest as write_batch_manifest
from hygiene_nb.executor.changes import note_arrival, note_origin
from hygiene_nb.executor.crossdev import (
    CopyMismatch,
    altered_modes,
    copy_verified,
    crossdev_skip,
    verified_identities,
)
from hygiene_nb.executor.destinations import (
    Dest,
    Mount,
    copyable,
    into_batch,
    mount_of,
    read_only,
    same_mount,
    unusable,
    unusable_on_error,
)
from hygiene_nb.executor.fileops import (
    DryRunFileOps,
    FileOps,
    RemovalRefused,
    open_dirs_at,
    remove_original_after_verified_copy,
)
from hygiene_nb.executor.guards import arrived_differs, check_candidate
from hygiene_nb.executor.hooks import checkpoint
from hygiene_nb.executor.inventory import Entry, Unverifiable
from hygiene_nb.executor.records import Destination, ItemOutcome, Skip
from hygiene_nb.executor.registry import register_quarantine
from hygiene_nb.executor.volume import QuarantineUntrusted, open_volume_quarantine
from hygiene_nb.executor.writers import tree_writer
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.plan.records import Candidate, Plan
from hygiene_nb.recheck import Rechecker
from hygiene_nb.store import Store, utc_now

__all__ = ["Run"]

_Done = tuple[Candidate, Skip | None, Destination | None]


class Run:
    """One execution's moving parts: its batches (each claimed on first use) and outcomes.

    Items on the store's filesystem go to the store's batch; items on another filesystem go to
    a batch in the quarantine at the top of that filesystem, or (only when that quarantine
    cannot be used and ``allow_copy``) are copied into the store's batch, verified, and only
    then removed from their place.
    """

    def __init__(
        self,
        store: Store,
        p: Plan,
        ops: FileOps,
        mount: Mount,
        allow_copy: bool,
    ) -> None:
        self.store, self.p, self.ops, self.mount = store, p, ops, mount
        self.allow_copy = allow_copy
        self.batch: Batch | None = None  # the store's batch
        self.batches: list[Batch] = []  # every batch claimed, in order
        self.dests: dict[Mount, Dest] = {}  # by the mount of the item's parent
        self.outcomes: list[ItemOutcome] = []
        self.untouched = False  # nothing moved, no batch kept: the plan stays usable

    def store_batch(self) -> Batch:
        """The store's batch, claimed on first use."""
        if self.batch is None:
            self.batch = _new_batch(self.store, self.p, self.ops)
            self.batches.append(self.batch)
        return self.batch

    def group(self, checker: Rechecker, cands: Sequence[Candidate]) -> list[_Done]:
        """Re-check a group, record the movable ones as pending, move them, record outcomes."""
        done: list[_Done] = []
        ready: list[tuple[Candidate, bytes, int, Batch | None]] = []
        copies: list[tuple[Candidate, bytes, int, dict[bytes, Entry]]] = []
        try:
            for cand in cands:
                raw = cand.raw
                parent, skip = check_candidate(checker, cand)
                dest = Dest()
                if skip is None:
                    try:
                        dest = self.dest_for(parent, raw)
                    except BaseException:
                        os.close(parent)
                        raise
                    if dest.skip is not None:
                        skip = crossdev_skip(cand.path, *dest.skip)
                    elif dest.copy:
                        planned, skip = copyable(parent, raw, cand)
                        if skip is None:
                            copies.append((cand, raw, parent, planned))
                            continue
                if skip is not None:
                    if parent >= 0:
                        os.close(parent)
                    done.append((cand, skip, None))
                    continue
                ready.append((cand, raw, parent, dest.batch))
            if ready:
                self._rename(ready, done)
            for cand, raw, parent, planned in copies:
                batch = self.store_batch()
                skip = _copy(batch, parent, raw, cand, planned, self.ops)
                where = into_batch(batch, "copy")  # a skipped copy too: verify looks for leftovers
                if not skip:  # where the copy is (the original's identity is in dev/inode)
                    item = batch.items[raw]
                    where = replace(where, batch_dev=item.dev, batch_inode=item.inode)
                done.append((cand, skip, where))
        finally:
            for _, _, parent, _ in ready:
                os.close(parent)
            for _, _, parent, _ in copies:
                os.close(parent)
        return done

    def _rename(
        self, ready: list[tuple[Candidate, bytes, int, Batch | None]], done: list[_Done]
    ) -> None:
        """Record every ready item as pending in its batch, move them, record the outcomes."""
        placed = [
            (cand, raw, parent, batch or self.store_batch()) for cand, raw, parent, batch in ready
        ]
        used = list({id(b): b for *_, b in placed}.values())
        for cand, raw, parent, batch in placed:
            batch.items[raw] = _pending(batch, raw, cand, parent)
        for batch in used:
            write_batch_manifest(batch)  # every item's origin is recorded before it moves
        checkpoint("after-intent")
        for cand, raw, parent, batch in placed:
            skip = _move(batch, parent, raw, cand, self.ops)
            where = None if skip else into_batch(batch, "rename")
            if where is not None and not isinstance(self.ops, DryRunFileOps):
                writing = _open_at_move(batch, raw)
                if writing:
                    where = replace(where, open_at_move=True, open_at_move_detail=writing)
            done.append((cand, skip, where))
        for batch in used:
            write_batch_manifest(batch)
        checkpoint("after-manifest")

    def dest_for(self, parent: int, raw: bytes) -> Dest:
        """Where an item whose parent is open at ``parent`` goes (decided once per mount)."""
        if read_only(parent):  # a read-only mount of part of a filesystem, too
            return Dest(skip=("read-only-filesystem", ""))
        mount = mount_of(parent)
        if same_mount(mount, self.mount):
            return Dest()
        if mount not in self.dests:
            self.dests[mount] = self._volume(parent, raw)
        return self.dests[mount]

    def _volume(self, parent: int, raw: bytes) -> Dest:
        """Claim a batch in the quarantine at the top of ``parent``'s filesystem, or say why not."""
        try:
            volume = open_volume_quarantine(parent, os.path.dirname(raw), self.ops)
        except QuarantineUntrusted as exc:
            return Dest(skip=("quarantine-untrusted", str(exc)))
        except OSError as exc:
            return unusable_on_error(
                exc, "no quarantine at the top of its filesystem", self.allow_copy
            )
        try:
            register_quarantine(self.store, volume.path)
            batch = claim_batch_at(
                volume.fd,
                volume.path,
                plan_id=self.p.plan_id,
                plan_digest=self.p.plan_digest,
                ops=self.ops,
            )
            batch.root = self.p.root.to_json()
        except StoreError as exc:
            detail = f"{volume.path} cannot be registered ({exc.message})"
            return unusable(detail, self.allow_copy)
        except OSError as exc:
            return unusable_on_error(exc, f"no batch can be made in {volume.path}", self.allow_copy)
        finally:
            volume.close()
        checkpoint("after-batch")
        self.batches.append(batch)
        return Dest(batch=batch)


def _new_batch(store: Store, p: Plan, ops: FileOps) -> Batch:
    batch = claim_batch(store.quarantine, plan_id=p.plan_id, plan_digest=p.plan_digest, ops=ops)
    batch.root = p.root.to_json()
    checkpoint("after-batch")
    return batch


def _pending(batch: Batch, raw: bytes, cand: Candidate, parent: int) -> ManifestItem:
    """The item's manifest record before it moves, with what restore needs (``note_origin``)."""
    item = ManifestItem(
        original=cand.path,
        original_b64=base64.b64encode(raw).decode("ascii"),
        kind=cand.kind,
        size=cand.size,
        tree_bytes=cand.tree_bytes,
        dev=cand.dev,
        inode=cand.inode,
        mtime_ns=cand.mtime_ns,
        plan_id=batch.plan_id,
        rule=cand.rule,
        note=cand.note,
        state="pending",
        at=utc_now().isoformat(),
    )
    note_origin(batch, item, parent)
    return item


def _move(batch: Batch, parent: int, raw: bytes, cand: Candidate, ops: FileOps) -> Skip | None:
    """Move with no replace and check what arrived (the caller records the outcome)."""
    name = os.path.basename(raw)
    item = batch.items[raw]
    try:
        target = mirror_parent(batch, raw, ops)
    except OSError as exc:
        item.state = "returned"
        return Skip.of(cand.path, "move-failed", exc.strerror or "")
    try:
        try:
            ops.rename_noreplace(parent, name, target, name)
        except OSError as exc:
            item.state = "returned"
            return Skip.of(cand.path, "move-failed", exc.strerror or "")
        checkpoint("after-move")
        code, problem = arrived_differs(target, name, cand)
        if problem:
            return _put_back(item, cand, (code, problem), (target, parent, name), ops)
        item.state = "moved"
        item.at = utc_now().isoformat()
        note_arrival(item, target, name)  # our rename changed its ctime: compare with this
        return None
    finally:
        os.close(target)


def _open_at_move(batch: Batch, raw: bytes) -> str:
    """Why a moved item may still be written to by another program ("" if nobody writes).

    A rename takes an open file along (its writer keeps writing into the batch, nothing is
    lost), but its space is not freed while it is open: the receipt says so.
    """
    parts = (TREE_NAME + raw).split(b"/")
    try:
        fd = open_dirs_at(batch.fd, parts[:-1])
    except OSError as exc:
        return f"it cannot be reached in the batch to ask ({exc.strerror})"
    try:
        return tree_writer(fd, parts[-1])
    finally:
        os.close(fd)


def _put_back(
    item: ManifestItem,
    cand: Candidate,
    why: tuple[str, str],
    where: tuple[int, int, bytes],
    ops: FileOps,
) -> Skip:
    """Move an unplanned arrival back (never replacing); if impossible, hold it, recorded."""
    code, problem = why
    target, parent, name = where
    try:
        ops.rename_noreplace(target, name, parent, name)
    except OSError as exc:
        item.state = "held"  # in the batch with its origin recorded; a person decides
        held = (
            f"{problem}; it could not be put back ({exc.strerror}) and is held in the batch "
            "with its origin recorded: check it, then restore it by hand"
        )
        return Skip.of(cand.path, code, held)
    item.state = "returned"
    return Skip.of(cand.path, code, f"{problem}; it was put back")


def _copy(
    batch: Batch,
    parent: int,
    raw: bytes,
    cand: Candidate,
    planned: dict[bytes, Entry],
    ops: FileOps,
) -> Skip | None:
    """Copy into the store's batch, verify, record, and only then remove the original.

    The item is recorded ``pending`` before the first byte is copied (a crash mid-copy leaves
    the original in place and a partial copy recorded), ``moved`` (with the copy's identity)
    once the copy is verified, and only after that is the original removed.
    """
    name = os.path.basename(raw)
    item = batch.items[raw] = _pending(batch, raw, cand, parent)
    write_batch_manifest(batch)
    try:
        target = mirror_parent(batch, raw, ops)
    except OSError as exc:
        return _copy_kept(batch, item, cand, "copy-failed", exc.strerror or "")
    try:
        try:
            verified = copy_verified(parent, name, target, planned, ops)
        except Unverifiable as exc:
            return _copy_kept(batch, item, cand, "copy-unverifiable", str(exc))
        except CopyMismatch as exc:
            return _copy_kept(batch, item, cand, "copy-failed", str(exc))
        except OSError as exc:
            return _copy_kept(batch, item, cand, "copy-failed", exc.strerror or "")
        arrived = os.stat(name, dir_fd=target, follow_symlinks=False)
    finally:
        os.close(target)
    item.dev, item.inode = signed64(arrived.st_dev), signed64(arrived.st_ino)
    item.size, item.state, item.at = arrived.st_size, "moved", utc_now().isoformat()
    item.ctime_ns = arrived.st_ctime_ns  # the copy's, once its modes and times were set
    item.modes = altered_modes(verified) or None  # for a restore to give them back
    write_batch_manifest(batch)  # the verified copy is recorded before the original goes
    checkpoint("before-removal")
    try:
        remove_original_after_verified_copy(parent, name, verified_identities(verified))
    except RemovalRefused as exc:
        # put back whole: the original is the item again; the copy is a duplicate, not moved
        item.state, item.at = "returned", utc_now().isoformat()
        write_batch_manifest(batch)
        detail = (
            f"{exc.strerror} ({exc.filename}); it was put back in its place and stays there, "
            f"and its verified copy in batch {batch.batch_id} is not counted as moved (it "
            "goes when the batch is purged)"
        )
        if exc.code == "in-use":
            return crossdev_skip(cand.path, "in-use", detail)
        return Skip.of(cand.path, exc.code, detail)
    except OSError as exc:
        return Skip(
            cand.path,
            "copy-failed",
            f"A verified copy is in batch {batch.batch_id}, but the original could not be "
            f"removed ({exc.strerror}); what is left of it stays in place and the batch holds "
            "all of it. Compare them before removing either.",
        )
    return None


def _copy_kept(batch: Batch, item: ManifestItem, cand: Candidate, code: str, detail: str) -> Skip:
    """The copy failed: the original is in place; the (partial) copy stays recorded."""
    item.state = "returned"
    item.at = utc_now().isoformat()
    write_batch_manifest(batch)
    where = f"a partial copy may stay in batch {batch.batch_id} until purged"
    return crossdev_skip(cand.path, code, f"{detail}; {where}" if detail else where)

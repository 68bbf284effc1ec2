"""Put quarantined items back at their original paths, never overwriting (docs/executor.md).

A dry run (the default) only looks: it changes nothing, not even the manifest. With ``execute``
each selected item is checked and moved back with ``rename_noreplace``:

* the item in the batch must still be the entry that was moved there (kind, inode, and its
  filesystem: the same device number, or after a remount the same recorded filesystem
  identity), else ``batch-item-changed``; absent → ``missing-from-batch``. The very entry,
  written to since (size, mtime, ctime, or inside a directory), is restored all the same and
  reported ``changed-in-quarantine``;
* the target is reached from the plan's root one component at a time, never through a symlink
  (a link or a file on the way → ``target-unusable``); each existing directory on the way must
  be owned by the item's owner or root, or have the owner, group and mode recorded for it, and
  not be writable by others without the sticky bit (else ``target-unsafe-parent``); a missing
  directory is recreated with its recorded owner and mode (0700 ours if none was recorded);
* the item goes back only onto the filesystem it came from: where its parent (or the deepest
  directory that exists) is now on another filesystem, a mount over the place say, it is
  ``target-other-filesystem`` (``target-filesystem-unknown`` when that cannot be told), and
  nothing is created there;
* anything at the target name (a file, an empty directory, a dangling link) → ``target-occupied``,
  and the kernel's no-replace rename closes the window between that check and the move;
* a target on another filesystem than the batch (an item copied in with ``--allow-copy``) is
  restored by a verified copy instead of a rename (``copy_back``).

Each restore is recorded (``restored``) in the manifest at once. An item already back (recorded
``restored``/``returned``, or gone from the batch while its original path holds the same device
and inode) is reported in ``blocked`` with the code ``already``; that alone leaves the status
``done``. Once every item is back, the empty batch is removed: its empty mirror directories
bottom-up, the manifest, the batch directory; never anything non-empty.

This module holds the entry and the run over the items; the walk to the target and its checks
are in ``restore_target``, the copy back across filesystems in ``copy_back``, the opening and
locking of a batch in ``batch_access``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hygiene_nb.executor.batch_access import load_batch, lock_batch, open_batch
from hygiene_nb.executor.batches import (
    MANIFEST_NAME,
    TREE_NAME,
    Batch,
    ManifestItem,
    remove_empty_dir_below,
    write_manifest,
)
from hygiene_nb.executor.copy_back import copy_back, no_leftover
from hygiene_nb.executor.fileops import (
    FileOps,
    LocalFileOps,
    remove_own_empty_dir,
    remove_own_file,
)
from hygiene_nb.executor.restore_outcomes import OCCUPIED, Block, Left, record
from hygiene_nb.executor.restore_target import (
    absent_from_batch,
    check_target,
    check_unchanged,
    components,
    locate_in_batch,
    occupied,
    open_target_parent,
)
from hygiene_nb.fs.mounts import same_mount
from hygiene_nb.pathnames import path_b64
from hygiene_nb.store import Store

__all__ = ["Blocked", "RestoreResult", "lock_batch", "open_batch", "restore_batch"]

_BACK = frozenset({"restored", "returned"})
# reported in ``blocked`` although the item is back (or would be): not a failure
_NOT_FAILED = frozenset({"already", "changed-in-quarantine"})


@dataclass(frozen=True)
class Blocked:
    """An item that was not restored: its original path, a stable code and the next step."""

    path: str
    code: str
    message: str
    path_b64: str | None = None  # the exact bytes, where ``path`` (text) cannot give them back


@dataclass(frozen=True)
class RestoreResult:
    """What ``restore`` did, or would do.

    Attributes:
        status: ``dry-run``; ``done`` (nothing blocked but ``already``); or ``partial``.
        batch_id: the batch.
        restored: original paths put back (or that would be, in a dry run).
        blocked: items left where they are, each with a code (``already`` is not a failure).
        restored_b64: for each of ``restored``, its exact bytes in base64 where the text path
            cannot give them back (a name that is not valid UTF-8), else None.
    """

    status: str
    batch_id: str
    restored: list[str]
    blocked: list[Blocked]
    restored_b64: list[str | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb restore --json`` prints (``path_b64`` only where text is not exact)."""
        return {
            "status": self.status,
            "batch_id": self.batch_id,
            "restored": [
                {"path": p, **({"path_b64": e} if e else {})}
                for p, e in zip(self.restored, self.restored_b64, strict=True)
            ],
            "blocked": [
                {
                    "path": b.path,
                    "code": b.code,
                    "message": b.message,
                    **({"path_b64": b.path_b64} if b.path_b64 else {}),
                }
                for b in self.blocked
            ],
        }

    @property
    def exit_code(self) -> int:
        """4 when ``partial`` (blocked for a reason other than already back or changed)."""
        return 4 if self.status == "partial" else 0


_GROUP = 256  # at least this many items are restored between manifest writes
_MAX_GROUPS = 64


def restore_batch(
    store: Store,
    batch_id: str,
    *,
    items: Sequence[bytes] | None = None,
    execute: bool = False,
) -> RestoreResult:
    """Restore the items of a quarantine batch (a dry run unless ``execute``).

    Args:
        store: the store whose ``quarantine/`` holds the batch.
        batch_id: the batch's directory name.
        items: exact original paths to restore; default every item not yet back.
        execute: really move; otherwise only report what would happen.

    Returns:
        The result; ``blocked`` names every item left in place and why.

    Raises:
        BatchNotFound: there is no such batch.
        BatchInvalid: its manifest is missing or invalid (nothing is touched).
        BatchBusy: another restore or purge is working on it.
        StoreError: the manifest could not be written back.
    """
    with open_batch(store, batch_id) as (qfd, fd, path):
        if execute:
            lock_batch(fd, batch_id)
        batch = load_batch(path, batch_id, fd)
        selected, blocked = _select(batch, items)
        ops = LocalFileOps() if execute else None
        restored: list[str] = []
        restored_b64: list[str | None] = []
        before = {key: item.state for key, item in batch.items.items()}
        try:
            for number, item in enumerate(selected, 1):
                exact = path_b64(item.original, item.original_raw)
                try:
                    note = _restore_one(batch, item, ops)
                except Block as block:
                    blocked.append(Blocked(item.original, block.code, block.message, exact))
                except Left as left:
                    restored.append(item.original)
                    restored_b64.append(exact)
                    blocked.append(Blocked(item.original, "batch-copy-left", str(left), exact))
                else:
                    restored.append(item.original)
                    restored_b64.append(exact)
                    if note:
                        blocked.append(Blocked(item.original, "changed-in-quarantine", note, exact))
                if execute and number % max(_GROUP, -(-len(selected) // _MAX_GROUPS)) == 0:
                    write_manifest(batch)
        finally:
            changed = any(item.state != before.get(key) for key, item in batch.items.items())
            if execute and changed:
                write_manifest(batch)  # whatever ended the loop, record what is back
        if execute:
            _remove_if_empty(batch, qfd)
    failed = any(b.code not in _NOT_FAILED for b in blocked)
    status = "dry-run" if not execute else "partial" if failed else "done"
    return RestoreResult(status, batch_id, restored, blocked, restored_b64)


def _select(
    batch: Batch, wanted: Sequence[bytes] | None
) -> tuple[list[ManifestItem], list[Blocked]]:
    """The items to restore, and a ``not-in-batch`` block for each named path it lacks."""
    if wanted is None:
        return [i for i in batch.items.values() if i.state not in _BACK], []
    chosen: list[ManifestItem] = []
    blocked: list[Blocked] = []
    for raw in dict.fromkeys(wanted):
        item = batch.items.get(raw)
        if item is None:
            path = raw.decode("utf-8", "backslashreplace")
            blocked.append(
                Blocked(
                    path,
                    "not-in-batch",
                    f"{path} is not an item of batch "
                    f"{batch.batch_id}; check the path against its manifest.",
                    path_b64(path, raw),
                )
            )
        else:
            chosen.append(item)
    return chosen, blocked


# -- one item --------------------------------------------------------------------------------


def _restore_one(batch: Batch, item: ManifestItem, ops: FileOps | None) -> str | None:
    """Restore ``item`` (or only check it when ``ops`` is None).

    Returns:
        What changed in it while it was in the batch (``changed-in-quarantine``), or None.

    Raises:
        Block: it cannot or need not be restored.
    """
    if item.state in _BACK:
        raise Block("already", f"{item.original} is already back at its original path.")
    parts = components(item)
    src = locate_in_batch(batch, parts)
    if src is None:
        absent_from_batch(batch, item, parts, ops)
    try:
        changed = check_unchanged(batch, item, src, parts[-1])
        owner = (
            item.uid
            if item.uid is not None
            else os.stat(parts[-1], dir_fd=src, follow_symlinks=False).st_uid
        )
        dst, complete = open_target_parent(batch, item, parts, ops, (src, owner))
        try:
            if complete:
                check_target(batch, item, (src, dst, parts[-1]), ops)
                if ops is not None:
                    _move(batch, item, (src, dst, parts[-1]), ops)
                elif not same_mount(src, dst):  # a rename fails across mounts: a copy-back
                    no_leftover(batch, item, dst)  # what a copy-back would refuse, said now
        finally:
            os.close(dst)
    finally:
        os.close(src)
    if not changed:
        return None
    return (
        f"{item.original} changed after it was quarantined ({', '.join(changed)}; a process "
        "that kept it open, say): it is back as it is now, check its content."
    )


def _move(batch: Batch, item: ManifestItem, where: tuple[int, int, bytes], ops: FileOps) -> None:
    src, dst, name = where
    try:
        ops.rename_noreplace(src, name, dst, name)
    except OSError as exc:
        if exc.errno in OCCUPIED:
            raise occupied(item) from exc
        if exc.errno != errno.EXDEV:
            raise Block(
                "restore-failed",
                f"{item.original} could not be moved back "
                f"({exc.strerror}); fix that and run restore again.",
            ) from exc
        copy_back(batch, item, where, ops)
        return
    record(batch, item, "restored")


# -- the empty batch -------------------------------------------------------------------------


def _remove_if_empty(batch: Batch, qfd: int) -> None:
    """Remove the batch once every item is back; stop at the first thing that is not empty."""
    if any(i.state not in _BACK for i in batch.items.values()):
        return
    mirrors = {
        p[:i] for p in batch.items for i in range(1, len(p)) if p[i : i + 1] == b"/"
    }  # the directories mirroring each original's parents, e.g. b"/home", b"/home/me"
    for mirror in sorted(mirrors, key=lambda m: m.count(b"/"), reverse=True):
        parts = [TREE_NAME, *mirror[1:].split(b"/")]
        if not remove_empty_dir_below(batch.fd, parts):
            return
    if not remove_empty_dir_below(batch.fd, [TREE_NAME]):
        return
    with os.scandir(batch.fd) as entries:
        if [e.name for e in entries] != [os.fsdecode(MANIFEST_NAME)]:
            return
    remove_own_file(batch.fd, MANIFEST_NAME)
    remove_own_empty_dir(qfd, batch.batch_id.encode("ascii"))

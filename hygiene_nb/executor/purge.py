"""Destroy a quarantine batch: the one door to permanent deletion (docs/executor.md).

Without ``execute`` purge only counts what it would destroy (items, regular files, bytes) by
walking the batch with ``lstat``: nothing but directories is opened and no link is followed.
With ``execute`` it refuses, touching nothing, unless the batch id is repeated exactly, the risk
is acknowledged as ``permanent-delete`` and the batch's manifest is ``ok`` (an ``incomplete``
or ``invalid`` batch needs ``include_incomplete``, and one whose items changed after they were
quarantined, a file a process kept open and wrote to say, needs ``include_changed``). Then
``fileops.remove_tree`` removes each top-level entry of ``tree/``, and the manifest and batch
directory go last. Only the ``purge``
command calls this; nothing purges automatically.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any

from hygiene_nb.errors import (
    AcknowledgementMissing,
    BatchChanged,
    BatchContainsMount,
    BatchIncomplete,
    BatchInvalid,
    ConfirmationMismatch,
    StoreError,
)
from hygiene_nb.executor.batch_access import lock_batch, open_batch
from hygiene_nb.executor.batches import MANIFEST_NAME, TREE_NAME
from hygiene_nb.executor.changes import changed_items
from hygiene_nb.executor.fileops import (
    open_dir_at,
    remove_own_empty_dir,
    remove_own_file,
    remove_tree,
)
from hygiene_nb.executor.listing import batch_state
from hygiene_nb.fs.mounts import MountInside, mount_id, mounted_inside, require_mount
from hygiene_nb.store import Store

__all__ = ["PURGE_ACKNOWLEDGEMENT", "PurgeResult", "purge_batch"]

PURGE_ACKNOWLEDGEMENT = "permanent-delete"
_TEMP_MANIFEST = re.compile(rb"\.manifest-[0-9a-f]{12}\.tmp")


@dataclass(frozen=True)
class PurgeResult:
    """What purge destroyed, or would destroy.

    Attributes:
        status: ``dry-run`` or ``done``.
        batch_id: the batch.
        would_destroy: ``items``, ``files`` (regular files) and ``bytes`` (hard links once),
            counted before anything was touched.
        manifest: the batch's manifest state (``ok``, ``incomplete``, ``invalid``).
        destroyed: after ``execute``: ``entries`` removed and ``bytes`` of regular files.
        changed: original paths of items that changed after they were quarantined.
    """

    status: str
    batch_id: str
    would_destroy: dict[str, int]
    manifest: str
    destroyed: dict[str, int] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb purge --json`` prints."""
        return {
            "status": self.status,
            "batch_id": self.batch_id,
            "would_destroy": self.would_destroy,
            "manifest": self.manifest,
            "changed_in_quarantine": self.changed,
        }

    @property
    def exit_code(self) -> int:
        """Always 0: a purge that cannot do all it showed refuses (raises) instead."""
        return 0


def purge_batch(
    store: Store,
    batch_id: str,
    *,
    execute: bool = False,
    confirm_batch_id: str | None = None,
    acknowledge_risk: str | None = None,
    include_incomplete: bool = False,
    confirm_bytes: int | None = None,
    include_changed: bool = False,
) -> PurgeResult:
    """Show what purging ``batch_id`` would destroy, or (with every confirmation) destroy it.

    Args:
        store: the store whose ``quarantine/`` holds the batch.
        batch_id: the batch's directory name.
        execute: really destroy; otherwise only count.
        confirm_batch_id: must equal ``batch_id``.
        acknowledge_risk: must be ``permanent-delete``.
        include_incomplete: also destroy a batch whose manifest is incomplete or invalid.
        confirm_bytes: if given, must equal the bytes counted now (what the dry run showed).
        include_changed: also destroy items that changed after they were quarantined.

    Returns:
        The counts, and after ``execute`` what was removed.

    Raises:
        BatchNotFound: there is no such batch.
        BatchContainsMount: another filesystem is mounted inside the batch (nothing touched,
            dry run or not).
        BatchInvalid: it is not ours, holds unknown entries, or (without
            ``include_incomplete``) its manifest is invalid.
        ConfirmationMismatch: the batch id (or byte count) was not confirmed exactly.
        AcknowledgementMissing: ``acknowledge_risk`` is not ``permanent-delete``.
        BatchIncomplete: the batch holds unrecorded items and ``include_incomplete`` is unset.
        BatchChanged: items changed after they were quarantined and ``include_changed`` is unset.
        BatchBusy: another restore or purge is working on it.
        StoreError: the removal failed partway (run purge again).
    """
    with open_batch(store, batch_id) as (qfd, fd, _):
        if execute:
            lock_batch(fd, batch_id)
        temps = _check_layout(fd, batch_id)
        state, recorded, changed = _state(fd, batch_id)
        counts = _count(fd, batch_id, recorded)
        if not execute:
            return PurgeResult("dry-run", batch_id, counts, state, changed=changed)
        _authorize(
            batch_id,
            state,
            counts,
            confirm_batch_id,
            acknowledge_risk,
            include_incomplete,
            confirm_bytes,
        )
        if changed and not include_changed:
            raise BatchChanged(
                f"purge of batch {batch_id} refused: {len(changed)} of its items changed after "
                f"they were quarantined (first: {changed[0]}; a process may still be writing "
                "them); nothing was touched. Restore them to look (`hygiene-nb restore "
                f"{batch_id}`), or add --include-changed to destroy them as they are."
            )
        destroyed = _destroy(qfd, fd, batch_id, temps)
    return PurgeResult("done", batch_id, counts, state, destroyed, changed)


def _invalid(batch_id: str, why: str) -> BatchInvalid:
    return BatchInvalid(f"batch {batch_id}: {why}; nothing was touched, inspect it by hand.")


def _check_layout(fd: int, batch_id: str) -> list[bytes]:
    """The batch holds only ``tree/``, its manifest and leftover temp manifests (returned)."""
    with os.scandir(fd) as entries:
        found = [(os.fsencode(e.name), e.stat(follow_symlinks=False).st_mode) for e in entries]
    temps: list[bytes] = []
    for name, mode in found:
        if (name == TREE_NAME and stat.S_ISDIR(mode)) or (
            name == MANIFEST_NAME and stat.S_ISREG(mode)
        ):
            continue
        if _TEMP_MANIFEST.fullmatch(name) and stat.S_ISREG(mode):
            temps.append(name)
            continue
        shown = name.decode("utf-8", "backslashreplace")
        raise _invalid(batch_id, f"it holds {shown!r}, which hygiene-nb never puts in a batch")
    return temps


def _state(fd: int, batch_id: str) -> tuple[str, set[bytes], list[str]]:
    """The manifest state, the original paths it records and those of items that changed."""
    try:
        state, doc, _ = batch_state(fd)
        changed = [item.original for item, _ in changed_items(fd, doc, writers=True)]
    except OSError as exc:
        raise _invalid(batch_id, f"it cannot be read ({exc.strerror})") from exc
    return state, _recorded(doc), changed


def _recorded(doc: dict[str, Any] | None) -> set[bytes]:
    if doc is None:
        return set()
    return {base64.b64decode(i["original_b64"]) for i in doc["items"]}


class _Tally:
    """Counts items, regular files and bytes below ``tree/`` with lstat only."""

    def __init__(self, recorded: set[bytes], mount: int | None) -> None:
        self.recorded = recorded
        self.mount = mount  # the batch's mount: every directory counted must be on it
        self.prefixes = {p[:i] for p in recorded for i in range(1, len(p)) if p[i : i + 1] == b"/"}
        self.items = self.files = self.bytes = 0
        self.seen: set[tuple[int, int]] = set()

    def _is_item(self, path: bytes, is_dir: bool) -> bool:
        """The same rule as the batch's own listing: recorded, a non-directory, or unknown."""
        if path in self.recorded or not is_dir:
            return True
        return bool(self.recorded) and path not in self.prefixes

    def walk(self, fd: int, prefix: bytes, inside: bool) -> None:
        """Count what lies below the directory open at ``fd`` (``inside`` an item or not)."""
        with os.scandir(fd) as entries:
            found = [(os.fsencode(e.name), e.stat(follow_symlinks=False)) for e in entries]
        for name, st in found:
            path = prefix + b"/" + name
            is_dir = stat.S_ISDIR(st.st_mode)
            item = inside or self._is_item(path, is_dir)
            self.items += item and not inside
            if stat.S_ISREG(st.st_mode):
                self.files += 1
                if (st.st_dev, st.st_ino) not in self.seen:
                    self.seen.add((st.st_dev, st.st_ino))
                    self.bytes += st.st_size
            if is_dir:
                child = open_dir_at(fd, name)
                try:
                    require_mount(child, self.mount, path)  # purge never reaches through
                    self.walk(child, path, item)
                finally:
                    os.close(child)


def _count(fd: int, batch_id: str, recorded: set[bytes]) -> dict[str, int]:
    tally = _Tally(recorded, mount_id(fd))
    try:
        tree = open_dir_at(fd, TREE_NAME)
    except FileNotFoundError:
        return {"items": 0, "files": 0, "bytes": 0}
    except OSError as exc:
        raise _invalid(batch_id, f"its tree cannot be opened ({exc.strerror})") from exc
    try:
        require_mount(tree, tally.mount, b"")
        tally.walk(tree, b"", False)
    except MountInside as exc:
        where = os.fsdecode(exc.filename) or "its tree"
        raise BatchContainsMount(
            f"batch {batch_id} holds a mount at {where!r} inside its tree ({exc.strerror}); "
            "purge would delete the mounted files, so nothing was touched. Unmount it "
            "(`umount PATH`, see `findmnt`), then run purge again."
        ) from exc
    except OSError as exc:
        raise _invalid(batch_id, f"its tree cannot be read ({exc.strerror})") from exc
    finally:
        os.close(tree)
    return {"items": tally.items, "files": tally.files, "bytes": tally.bytes}


def _authorize(
    batch_id: str,
    state: str,
    counts: dict[str, int],
    confirm_batch_id: str | None,
    acknowledge_risk: str | None,
    include_incomplete: bool,
    confirm_bytes: int | None,
) -> None:
    """Refuse (nothing touched) unless every confirmation matches."""
    show = f"run `hygiene-nb purge {batch_id}` to see what it would destroy"
    if confirm_batch_id != batch_id or confirm_bytes not in (None, counts["bytes"]):
        raise ConfirmationMismatch(
            f"purge of batch {batch_id} refused: --confirm-batch-id must repeat its id exactly "
            f"(and a confirmed byte count must match {counts['bytes']}); nothing was touched, "
            f"{show}."
        )
    if acknowledge_risk != PURGE_ACKNOWLEDGEMENT:
        raise AcknowledgementMissing(
            f"purge of batch {batch_id} refused: it destroys data for good; nothing was touched. "
            f"Add --acknowledge-risk {PURGE_ACKNOWLEDGEMENT} if that is what you want."
        )
    if include_incomplete:
        return
    if state == "invalid":
        raise _invalid(batch_id, "its manifest is invalid (add --include-incomplete to purge)")
    if state == "incomplete":
        raise BatchIncomplete(
            f"batch {batch_id} holds items its manifest does not record; nothing was touched. "
            "Inspect it (`hygiene-nb quarantine list`), then add --include-incomplete to purge."
        )


def _destroy(qfd: int, fd: int, batch_id: str, temps: list[bytes]) -> dict[str, int]:
    """Remove ``tree/`` entry by entry, then the manifest, then the batch directory."""
    try:
        entries, size = _empty_tree(fd)
        for name in [*temps, MANIFEST_NAME]:
            with contextlib.suppress(FileNotFoundError):
                remove_own_file(fd, name)
        remove_own_empty_dir(qfd, batch_id.encode("ascii"))
    except MountInside as exc:
        # the removal knows the mount's name only: the mount table says where it is
        where = mounted_inside(qfd, batch_id.encode("ascii")) or (
            f"at {os.fsdecode(exc.filename)!r} ({exc.strerror})"
        )
        raise BatchContainsMount(
            f"purge of batch {batch_id} stopped at a mount that appeared after it was counted "
            f"({where}); nothing under the mount was touched. Unmount it (`umount PATH`), then "
            f"run `hygiene-nb purge {batch_id}` to see what is left."
        ) from exc
    except OSError as exc:
        raise StoreError(
            f"purge of batch {batch_id} stopped partway ({exc.strerror}); "
            f"run `hygiene-nb purge {batch_id}` again to see what is left."
        ) from exc
    return {"entries": entries, "bytes": size}


def _empty_tree(fd: int) -> tuple[int, int]:
    """Destroy everything in ``tree/`` and the directory itself: (entries, bytes)."""
    try:
        return remove_tree(fd, TREE_NAME)
    except FileNotFoundError:
        return 0, 0

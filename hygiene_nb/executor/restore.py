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
  restored by a verified copy instead of a rename (``_copy_back``).

Each restore is recorded (``restored``) in the manifest at once. An item already back (recorded
``restored``/``returned``, or gone from the batch while its original path holds the same device
and inode) is reported in ``blocked`` with the code ``already``; that alone leaves the status
``done``. Once every item is back, the empty batch is removed: its empty mirror directories
bottom-up, the manifest, the batch directory; never anything non-empty.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from hygiene_nb.errors import BatchBusy, BatchInvalid, BatchNotFound
from hygiene_nb.executor.batches import (
    MANIFEST_NAME,
    TREE_NAME,
    Batch,
    ManifestItem,
    read_manifest,
    remove_empty_dir_below,
    write_manifest,
)
from hygiene_nb.executor.changes import check_held
from hygiene_nb.executor.crossdev import (
    CopyMismatch,
    Entry,
    Unverifiable,
    copy_verified,
    inventory,
    verified_identities,
    verify_copy,
)
from hygiene_nb.executor.fileops import (
    DIR_FLAGS,
    FileOps,
    LocalFileOps,
    open_dir_at,
    open_dirs_at,
    remove_original_after_verified_copy,
    remove_own_empty_dir,
    remove_own_file,
)
from hygiene_nb.executor.filesystems import fs_identity, same_filesystem
from hygiene_nb.executor.registry import known_quarantines, registry_error
from hygiene_nb.fs.fingerprint import kind_of_mode, signed64
from hygiene_nb.fs.mounts import same_mount
from hygiene_nb.scan.snapshot import path_b64
from hygiene_nb.store import Store

__all__ = ["Blocked", "RestoreResult", "lock_batch", "open_batch", "restore_batch"]

_BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_STATES = frozenset({"pending", "moved", "restored", "returned", "held"})
_BACK = frozenset({"restored", "returned"})
_OCCUPIED = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR})
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


class _Left(Exception):
    """The item is back, but a duplicate stays in the batch (internal; ``batch-copy-left``)."""


class _Block(Exception):
    """One item cannot be restored (internal; becomes a ``Blocked``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@contextlib.contextmanager
def open_batch(store: Store, batch_id: str) -> Iterator[tuple[int, int, Path]]:
    """Handles on the quarantine directory holding ``batch_id`` and on the batch, and its path.

    The handles are closed after; the path is the batch's real one, in whichever quarantine
    it was found.
    The store's ``quarantine/`` is searched first, then the quarantines at the top of other
    filesystems that the store registered (``known_quarantines``).

    Raises:
        BatchNotFound: no such batch, or ``batch_id`` is not a batch id.
        BatchInvalid: the batch is a symlink, unreadable, not ours or writable by others, or
            its quarantine directory is not private to us.
        StoreError: the batch is not in the store's quarantine nor any readable registered one,
            and the store's quarantine registry cannot be (fully) read.
    """
    name = _batch_name(batch_id)
    qfd, quarantine = _find_quarantine(store, name, batch_id)
    try:
        fd = _open_batch_dir(qfd, name, batch_id)
        try:
            yield qfd, fd, quarantine / batch_id
        finally:
            os.close(fd)
    finally:
        os.close(qfd)


def _find_quarantine(store: Store, name: bytes, batch_id: str) -> tuple[int, Path]:
    """A handle on (and the path of) the first known quarantine that holds an entry ``name``."""
    for index, quarantine in enumerate(known_quarantines(store)):
        try:
            qfd = os.open(quarantine, DIR_FLAGS)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if index == 0:
                raise _invalid(
                    batch_id, f"its quarantine cannot be opened ({exc.strerror})"
                ) from exc
            continue  # another filesystem's quarantine, unreachable now
        try:
            os.stat(name, dir_fd=qfd, follow_symlinks=False)
        except FileNotFoundError:
            os.close(qfd)
            continue
        except OSError:
            pass  # _open_batch_dir says what is wrong with it
        st = os.fstat(qfd)
        if index > 0 and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            os.close(qfd)
            raise _invalid(batch_id, f"its quarantine {quarantine} is not private to you")
        return qfd, quarantine
    unknown = registry_error(store)  # not found where we could look: unknown is not absent
    raise unknown if unknown is not None else _not_found(batch_id)


def lock_batch(fd: int, batch_id: str) -> None:
    """Take the batch's exclusive lock (held until ``fd`` is closed).

    Raises:
        BatchBusy: another restore or purge holds it.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BatchBusy(
            f"batch {batch_id} is being restored or purged by another process; "
            "wait for it to finish and run the command again."
        ) from None


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
        batch = _load_batch(path, batch_id, fd)
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
                except _Block as block:
                    blocked.append(Blocked(item.original, block.code, block.message, exact))
                except _Left as left:
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


# -- the batch -------------------------------------------------------------------------------


def _batch_name(batch_id: str) -> bytes:
    if not _BATCH_ID.fullmatch(batch_id) or batch_id in (".", ".."):
        raise _not_found(batch_id)
    return batch_id.encode("ascii")


def _not_found(batch_id: str) -> BatchNotFound:
    return BatchNotFound(
        f"there is no quarantine batch {batch_id!r}; list them with `hygiene-nb quarantine list`."
    )


def _invalid(batch_id: str, why: str) -> BatchInvalid:
    return BatchInvalid(f"batch {batch_id}: {why}; nothing was touched, inspect it by hand.")


def _open_batch_dir(qfd: int, name: bytes, batch_id: str) -> int:
    try:
        fd = open_dir_at(qfd, name)
    except FileNotFoundError:
        raise _not_found(batch_id) from None
    except OSError as exc:
        raise _invalid(batch_id, f"it is not a directory we can open ({exc.strerror})") from exc
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise _invalid(batch_id, "it is not owned by you or is writable by others")
    return fd


def _load_batch(path: Path, batch_id: str, fd: int) -> Batch:
    """The batch with its manifest items.

    Raises:
        BatchInvalid: no manifest, or one that does not parse into valid items.
    """
    try:
        doc = read_manifest(fd)
        if doc is None:
            raise _invalid(batch_id, "it has no manifest, so nothing says where its items belong")
        items = [ManifestItem(**d) for d in doc["items"]]
        by_path = {i.original_raw: i for i in items}
        if len(by_path) != len(items) or any(i.state not in _STATES for i in items):
            raise ValueError("duplicate items or an unknown item state")
        root = doc.get("root")
        if not (
            isinstance(root, dict)
            and isinstance(root.get("path"), str)
            and root["path"].startswith("/")
            and isinstance(root.get("dev"), int)
            and isinstance(root.get("inode"), int)
        ):
            raise ValueError("it does not record the root its items came from")
        return Batch(
            path,
            batch_id,
            fd,
            str(doc["created_at"]),
            str(doc["plan_id"]),
            str(doc["plan_digest"]),
            by_path,
            root=root,
            fs=doc.get("fs") if isinstance(doc.get("fs"), dict) else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise _invalid(batch_id, f"its manifest is invalid ({exc})") from exc


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
        _Block: it cannot or need not be restored.
    """
    if item.state in _BACK:
        raise _Block("already", f"{item.original} is already back at its original path.")
    parts = _components(item)
    src = _locate_in_batch(batch, parts)
    if src is None:
        _absent_from_batch(batch, item, parts, ops)
    try:
        changed = _check_unchanged(batch, item, src, parts[-1])
        owner = (
            item.uid
            if item.uid is not None
            else os.stat(parts[-1], dir_fd=src, follow_symlinks=False).st_uid
        )
        dst, complete = _open_target_parent(batch, item, parts, ops, (src, owner))
        try:
            if complete:
                _check_target(batch, item, (src, dst, parts[-1]), ops)
                if ops is not None:
                    _move(batch, item, (src, dst, parts[-1]), ops)
                elif not same_mount(src, dst):  # a rename fails across mounts: a copy-back
                    _no_leftover(batch, item, dst)  # what a copy-back would refuse, said now
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


def _check_target(
    batch: Batch, item: ManifestItem, where: tuple[int, int, bytes], ops: FileOps | None
) -> None:
    """The target must be free, unless it holds this item's own copy from a copy-back.

    A copy-back interrupted between its rename and its record left that copy there; it is
    recorded back now and the batch's duplicate removed.

    Raises:
        _Block: ``target-occupied`` (or ``target-unusable``); ``already`` for the own copy.
    """
    src, dst, name = where
    try:
        _check_free(item, dst, name)
        return
    except _Block as block:
        if block.code != "target-occupied":
            raise
        verified = _copied_back_before(batch, item, src, dst, name)
        if verified is None:
            raise
    if ops is not None:
        _finish_copy_back(batch, item, src, name, verified)
    raise _Block("already", f"{item.original} is already back at its original path.")


def _components(item: ManifestItem) -> list[bytes]:
    raw = item.original_raw
    parts = raw[1:].split(b"/") if raw.startswith(b"/") else []
    if not parts or any(p in (b"", b".", b"..") for p in parts):
        raise _Block(
            "target-unusable",
            f"{item.original} is not a clean absolute path; restore it by hand from the batch.",
        )
    return parts


def _locate_in_batch(batch: Batch, parts: list[bytes]) -> int | None:
    """A handle on the item's parent inside the batch, or None if the item is not there."""
    try:
        parent = open_dirs_at(batch.fd, [TREE_NAME, *parts[:-1]])
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Block(
            "batch-item-changed",
            f"the way to it inside the batch is no longer a plain "
            f"directory ({exc.strerror}); inspect {batch.path} by hand.",
        ) from exc
    try:
        os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        os.close(parent)
        return None
    return parent


def _absent_from_batch(
    batch: Batch, item: ManifestItem, parts: list[bytes], ops: FileOps | None
) -> NoReturn:
    """The item is not in the batch: already back (recorded so), or missing."""
    if _is_back(batch, item, parts):
        if ops is not None:
            _record(batch, item, "restored")
        raise _Block("already", f"{item.original} is already back at its original path.")
    raise _Block(
        "missing-from-batch",
        f"{item.original} is no longer in batch {batch.batch_id} "
        "nor at its original path; look for it by hand (`hygiene-nb verify` on the "
        "receipt).",
    )


def _is_back(batch: Batch, item: ManifestItem, parts: list[bytes]) -> bool:
    """Whether the entry at the item's original path is the item (inode and filesystem).

    Reached from the plan's root (the way restore goes), so a root below a symlinked ancestor
    is found as it was when the item left.
    """
    try:
        root, relative = _open_root(batch, item, parts)
    except _Block:
        return False
    try:
        parent = open_dirs_at(root, relative[:-1])
    except OSError:
        return False
    finally:
        os.close(root)
    try:
        st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        if signed64(st.st_ino) != item.inode or kind_of_mode(st.st_mode) != item.kind:
            return False
        if signed64(st.st_dev) == item.dev:
            return True
        return same_filesystem(item.fs, fs_identity(parent)) is True  # after a remount
    except OSError:
        return False
    finally:
        os.close(parent)


def _check_unchanged(batch: Batch, item: ManifestItem, parent: int, name: bytes) -> list[str]:
    """What changed in the item since it was moved (empty if nothing did).

    Raises:
        _Block: ``batch-item-changed``: it is not (or cannot be told to be) the entry moved.
    """
    state, what = check_held(parent, name, item, batch.fs)
    if state == "replaced":
        raise _Block(
            "batch-item-changed",
            f"{item.original} in the batch is not what was moved "
            f"there ({', '.join(what)}); inspect it by hand in {batch.path}.",
        )
    return what


def _open_root(batch: Batch, item: ManifestItem, parts: list[bytes]) -> tuple[int, list[bytes]]:
    """The plan's root, checked to be the same directory, and ``parts`` relative to it.

    Raises:
        _Block: the item lies outside the root, or the root was replaced.
    """
    assert batch.root is not None  # _load_batch refuses a manifest without one
    root = batch.root["path"].encode("utf-8", "surrogateescape")
    root_parts = [p for p in root.split(b"/") if p]
    if parts[: len(root_parts)] != root_parts or len(parts) <= len(root_parts):
        raise _Block(
            "target-unusable",
            f"{item.original} is not inside {batch.root['path']}, the root the plan acted on; "
            "the manifest was altered. Nothing was restored.",
        )
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise _Block(
            "target-unusable",
            f"the plan's root {batch.root['path']} cannot be opened ({exc.strerror}); "
            "restore by hand or recreate it.",
        ) from exc
    st = os.fstat(fd)
    same_dev = signed64(st.st_dev) == batch.root["dev"]
    if signed64(st.st_ino) != batch.root["inode"] or not (
        same_dev or same_filesystem(batch.root.get("fs"), fs_identity(fd)) is True  # remounted
    ):
        os.close(fd)
        raise _Block(
            "target-unusable",
            f"{batch.root['path']} is not the directory the items came from (it was replaced); "
            "restore them by hand.",
        )
    return fd, parts[len(root_parts) :]


def _open_target_parent(
    batch: Batch,
    item: ManifestItem,
    parts: list[bytes],
    ops: FileOps | None,
    held: tuple[int, int],
) -> tuple[int, bool]:
    """A handle on the target's parent, walked from the plan's root with no symlink followed.

    ``parts`` are the item's absolute path components; ``held`` is the item's parent in the
    batch and the item's owner. Each directory on the way is checked (``_check_parent``) and,
    before anything is created and at the end, that it is on the item's own filesystem
    (``_check_filesystem``). A missing directory is recreated with its recorded owner and mode
    when ``ops`` is given; in a dry run the walk stops there and returns the deepest directory
    that exists with False (the target is free), else the parent with True.
    """
    current, relative = _open_root(batch, item, parts)
    parts = relative[:-1]
    path = batch.root["path"] if batch.root else ""
    try:
        _check_parent(item, current, 0, (path, held[1]))
        for depth, part in enumerate(parts, 1):
            path = f"{path}/{part.decode('utf-8', 'backslashreplace')}"
            nxt = _step(item, current, part, None)
            if nxt is None:
                _check_filesystem(item, current, held[0], path)
                if ops is None:
                    return current, False
                nxt = _step(item, current, part, ops)
                assert nxt is not None  # with ops, a step creates or refuses
                _give_recorded(item, nxt, depth)
            os.close(current)
            current = nxt
            _check_parent(item, current, depth, (path, held[1]))
        _check_filesystem(item, current, held[0], path)
    except BaseException:
        os.close(current)
        raise
    return current, True


def _check_parent(item: ManifestItem, fd: int, depth: int, who: tuple[str, int]) -> None:
    """A directory the item goes into must be one its owner (or root) controls.

    Owned by the item's owner or root, or with the very owner, group and mode recorded for it
    at quarantine time (a shared group directory); and not writable by others unless sticky.

    Raises:
        _Block: ``target-unsafe-parent``.
    """
    path, owner = who
    st = os.fstat(fd)
    now = [st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)]
    recorded = item.parents[depth] if item.parents and depth < len(item.parents) else None
    if st.st_uid not in (0, owner) and now != recorded:
        why = f"it is owned by uid {st.st_uid}, not by the item's owner ({owner}) or root"
    elif st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        why = "anyone may write to it and it has no sticky bit"
    else:
        return
    raise _Block(
        "target-unsafe-parent",
        f"{path}, on the way to {item.original}, is not a safe place for it ({why}: another "
        "user could remove or replace it); fix its owner or mode, or move it aside, and run "
        "restore again.",
    )


def _check_filesystem(item: ManifestItem, fd: int, src: int, path: str) -> None:
    """The item goes back only onto the filesystem it came from (recorded at quarantine).

    A version-1 item has no record: going back by rename (the batch's filesystem) is safe,
    and anything else cannot be told.

    Raises:
        _Block: ``target-other-filesystem`` or ``target-filesystem-unknown``.
    """
    if item.fs is None:
        if os.fstat(fd).st_dev == os.fstat(src).st_dev:
            return
        same = None
    else:
        same = same_filesystem(item.fs, fs_identity(fd))
    if same:
        return
    if same is False:
        raise _Block(
            "target-other-filesystem",
            f"{path} is now on another filesystem than the one {item.original} came from "
            "(something is mounted over it, or it was replaced); it stays in the batch. Unmount "
            "what is there (or restore it by hand) and run restore again.",
        )
    raise _Block(
        "target-filesystem-unknown",
        f"it cannot be told whether {path} is on the filesystem {item.original} came from "
        "(no record of it, or the filesystem cannot be identified); it stays in the batch. "
        "Check the mount, then restore it by hand.",
    )


def _give_recorded(item: ManifestItem, fd: int, depth: int) -> None:
    """A directory restore re-created gets the owner and mode recorded for it (if any)."""
    recorded = item.parents[depth] if item.parents and depth < len(item.parents) else None
    if recorded is None:
        return  # nothing recorded (version 1): it stays ours, 0700
    uid, gid, mode = recorded
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (uid, gid):
        with contextlib.suppress(PermissionError):  # not root: it stays ours
            os.fchown(fd, uid, gid)  # before chmod: chown may clear setgid
    os.fchmod(fd, mode)


def _step(item: ManifestItem, fd: int, part: bytes, ops: FileOps | None) -> int | None:
    try:
        try:
            return open_dir_at(fd, part)
        except FileNotFoundError:
            if ops is None:
                return None
            with contextlib.suppress(FileExistsError):
                ops.make_dir(fd, part)
            return open_dir_at(fd, part)  # refuses whatever raced in that is not a directory
    except OSError as exc:
        where = part.decode("utf-8", "backslashreplace")
        raise _Block(
            "target-unusable",
            f"{where!r} on the way to {item.original} is a symlink, "
            f"not a directory or unusable ({exc.strerror}); move it aside and run "
            "restore again.",
        ) from exc


def _check_free(item: ManifestItem, parent: int, name: bytes) -> None:
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _Block(
            "target-unusable",
            f"{item.original} cannot be checked ({exc.strerror}); fix that and run restore again.",
        ) from exc
    raise _occupied(item)


def _occupied(item: ManifestItem) -> _Block:
    return _Block(
        "target-occupied",
        f"something already exists at {item.original} (left "
        "untouched); move it aside and run restore again.",
    )


def _move(batch: Batch, item: ManifestItem, where: tuple[int, int, bytes], ops: FileOps) -> None:
    src, dst, name = where
    try:
        ops.rename_noreplace(src, name, dst, name)
    except OSError as exc:
        if exc.errno in _OCCUPIED:
            raise _occupied(item) from exc
        if exc.errno != errno.EXDEV:
            raise _Block(
                "restore-failed",
                f"{item.original} could not be moved back "
                f"({exc.strerror}); fix that and run restore again.",
            ) from exc
        _copy_back(batch, item, where, ops)
        return
    _record(batch, item, "restored")


def _copy_back(
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
        _Block: it could not be copied back (``restore-copy-failed``) or the target was taken
            meanwhile (``target-occupied``; the verified copy is left beside it and named).
    """
    src, dst, name = where
    _no_leftover(batch, item, dst)
    temp = b".hygiene-nb-restoring-" + secrets.token_hex(6).encode()
    shown = os.fsdecode(os.path.join(os.path.dirname(item.original_raw), temp))
    item.restoring_at = temp.decode("ascii")
    write_manifest(batch)  # a crash mid-copy leaves a named, recorded partial copy
    try:
        planned = inventory(src, name, os.fstat(src).st_dev)
    except (Unverifiable, OSError) as exc:
        raise _Block(
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
        raise _Block(
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
        code = "target-occupied" if exc.errno in _OCCUPIED else "restore-copy-failed"
        raise _Block(
            code,
            f"{item.original} could not take the verified copy ({exc.strerror}; anything there "
            f"was left untouched); the copy is at {shown} and the batch still holds the item. "
            "Move one of them aside and run restore again.",
        ) from exc
    _finish_copy_back(batch, item, src, name, verified)


def _no_leftover(batch: Batch, item: ManifestItem, dst: int) -> None:
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
    raise _Block(
        "restore-leftover",
        f"an interrupted restore left a copy (maybe partial) of {item.original} at {shown}; it is "
        f"only a duplicate (batch {batch.batch_id} holds the item): remove it, then run restore "
        "again.",
    )


def _copied_back_before(
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


def _finish_copy_back(
    batch: Batch, item: ManifestItem, src: int, name: bytes, verified: dict[bytes, Entry]
) -> None:
    """Record the item back, then remove the batch's copy (it is a duplicate now).

    Raises:
        _Left: the batch's copy could not be removed; it stays, recorded, until purged.
    """
    _record(batch, item, "restored")
    item.restoring_at = None
    write_manifest(batch)  # recorded back before the batch's copy goes
    try:
        remove_original_after_verified_copy(src, name, verified_identities(verified))
    except OSError as exc:
        raise _Left(
            f"{item.original} is back, but its copy in batch {batch.batch_id} could not be "
            f"removed ({exc.strerror}); it stays there, recorded, until you purge the batch."
        ) from exc


def _record(batch: Batch, item: ManifestItem, state: str) -> None:
    """Mark an item back; the manifest is written once per group (``restore_batch``).

    A crash before that write is safe: the item is at its original path with its recorded
    identity, which the next restore reports as ``already`` and records.
    """
    item.state = state
    item.at = datetime.now(UTC).isoformat(timespec="microseconds")


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

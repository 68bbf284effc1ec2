"""The way back to a restore target, and what is checked on it before anything moves.

The target's parent is reached from the plan's root one component at a time with no symlink
followed (``open_target_parent``), each directory on the way checked to be one the item's owner
controls and on the item's own filesystem; the item in the batch must be the entry that was
moved there (``check_unchanged``) and the target name free (``check_target``). An item gone
from the batch is told apart from one already back (``absent_from_batch``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import NoReturn

from hygiene_nb.executor.batches import TREE_NAME, Batch, ManifestItem
from hygiene_nb.executor.changes import check_held
from hygiene_nb.executor.copy_back import copied_back_before, finish_copy_back
from hygiene_nb.executor.fileops import DIR_FLAGS, FileOps, open_dir_at, open_dirs_at
from hygiene_nb.executor.filesystems import fs_identity, same_filesystem
from hygiene_nb.executor.restore_outcomes import Block, record
from hygiene_nb.fs.fingerprint import kind_of_mode, signed64

__all__ = [
    "absent_from_batch",
    "check_target",
    "check_unchanged",
    "components",
    "locate_in_batch",
    "occupied",
    "open_target_parent",
]


def check_target(
    batch: Batch, item: ManifestItem, where: tuple[int, int, bytes], ops: FileOps | None
) -> None:
    """The target must be free, unless it holds this item's own copy from a copy-back.

    A copy-back interrupted between its rename and its record left that copy there; it is
    recorded back now and the batch's duplicate removed.

    Raises:
        Block: ``target-occupied`` (or ``target-unusable``); ``already`` for the own copy.
    """
    src, dst, name = where
    try:
        _check_free(item, dst, name)
        return
    except Block as block:
        if block.code != "target-occupied":
            raise
        verified = copied_back_before(batch, item, src, dst, name)
        if verified is None:
            raise
    if ops is not None:
        finish_copy_back(batch, item, src, name, verified)
    raise Block("already", f"{item.original} is already back at its original path.")


def components(item: ManifestItem) -> list[bytes]:
    """The components of the item's original path, refused unless it is clean and absolute."""
    raw = item.original_raw
    parts = raw[1:].split(b"/") if raw.startswith(b"/") else []
    if not parts or any(p in (b"", b".", b"..") for p in parts):
        raise Block(
            "target-unusable",
            f"{item.original} is not a clean absolute path; restore it by hand from the batch.",
        )
    return parts


def locate_in_batch(batch: Batch, parts: list[bytes]) -> int | None:
    """A handle on the item's parent inside the batch, or None if the item is not there."""
    try:
        parent = open_dirs_at(batch.fd, [TREE_NAME, *parts[:-1]])
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Block(
            "batch-item-changed",
            f"the way to it inside the batch is no longer a plain "
            f"directory ({exc.strerror}); inspect {batch.path} by hand.",
        ) from exc
    try:
        os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        os.close(parent)
        return None
    except OSError as exc:  # a name the filesystem cannot look up (too long, say): this item only
        os.close(parent)
        raise Block(
            "batch-item-changed",
            f"it cannot be looked up inside the batch ({exc.strerror}); inspect {batch.path} "
            "by hand.",
        ) from exc
    return parent


def absent_from_batch(
    batch: Batch, item: ManifestItem, parts: list[bytes], ops: FileOps | None
) -> NoReturn:
    """The item is not in the batch: already back (recorded so), or missing."""
    if _is_back(batch, item, parts):
        if ops is not None:
            record(batch, item, "restored")
        raise Block("already", f"{item.original} is already back at its original path.")
    raise Block(
        "missing-from-batch",
        f"{item.original} is no longer in batch {batch.batch_id} "
        "nor at its original path; look for it by hand (`hygiene-nb verify` on the "
        "receipt).",
    )


def _is_back(batch: Batch, item: ManifestItem, parts: list[bytes]) -> bool:
    """Whether the entry at the item's original path is the item (inode and filesystem).

    A freed inode number is given to the next file made, so a file or link must also keep the
    mtime (and a file the size) it left with: a rename back by hand keeps both, a new file
    that happens to get the number does not.

    Reached from the plan's root (the way restore goes), so a root below a symlinked ancestor
    is found as it was when the item left.
    """
    try:
        root, relative = _open_root(batch, item, parts)
    except Block:
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
        if item.kind != "dir" and st.st_mtime_ns != item.mtime_ns:
            return False
        if item.kind == "file" and st.st_size != item.size:
            return False
        if signed64(st.st_dev) == item.dev:
            return True
        return same_filesystem(item.fs, fs_identity(parent)) is True  # after a remount
    except OSError:
        return False
    finally:
        os.close(parent)


def check_unchanged(batch: Batch, item: ManifestItem, parent: int, name: bytes) -> list[str]:
    """What changed in the item since it was moved (empty if nothing did).

    Raises:
        Block: ``batch-item-changed``: it is not (or cannot be told to be) the entry moved.
    """
    state, what = check_held(parent, name, item, batch.fs)
    if state == "replaced":
        raise Block(
            "batch-item-changed",
            f"{item.original} in the batch is not what was moved "
            f"there ({', '.join(what)}); inspect it by hand in {batch.path}.",
        )
    return what


def _open_root(batch: Batch, item: ManifestItem, parts: list[bytes]) -> tuple[int, list[bytes]]:
    """The plan's root, checked to be the same directory, and ``parts`` relative to it.

    Raises:
        Block: the item lies outside the root, or the root was replaced.
    """
    assert batch.root is not None  # load_batch refuses a manifest without one
    root = batch.root["path"].encode("utf-8", "surrogateescape")
    root_parts = [p for p in root.split(b"/") if p]
    if parts[: len(root_parts)] != root_parts or len(parts) <= len(root_parts):
        raise Block(
            "target-unusable",
            f"{item.original} is not inside {batch.root['path']}, the root the plan acted on; "
            "the manifest was altered. Nothing was restored.",
        )
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as exc:
        raise Block(
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
        raise Block(
            "target-unusable",
            f"{batch.root['path']} is not the directory the items came from (it was replaced); "
            "restore them by hand.",
        )
    return fd, parts[len(root_parts) :]


def open_target_parent(
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
        Block: ``target-unsafe-parent``.
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
    raise Block(
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
        Block: ``target-other-filesystem`` or ``target-filesystem-unknown``.
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
        raise Block(
            "target-other-filesystem",
            f"{path} is now on another filesystem than the one {item.original} came from "
            "(something is mounted over it, or it was replaced); it stays in the batch. Unmount "
            "what is there (or restore it by hand) and run restore again.",
        )
    raise Block(
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
        raise Block(
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
        raise Block(
            "target-unusable",
            f"{item.original} cannot be checked ({exc.strerror}); fix that and run restore again.",
        ) from exc
    raise occupied(item)


def occupied(item: ManifestItem) -> Block:
    """The ``target-occupied`` block: something is at the item's original path."""
    return Block(
        "target-occupied",
        f"something already exists at {item.original} (left "
        "untouched); move it aside and run restore again.",
    )

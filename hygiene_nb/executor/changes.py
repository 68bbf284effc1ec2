"""What version 2 records of an item when it moves, and what it is compared with after.

At the move: where the item comes from (its owner, its parent's filesystem, the owner, group
and mode of each directory from the plan's root down to its parent) and its ctime once it
arrived in the batch. After: whether the batch still holds the very entry that was moved, and
unchanged (restore and verify ask of one item, purge of every item it would destroy).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Any

from hygiene_nb.executor.batches import TREE_NAME, Batch, ManifestItem
from hygiene_nb.executor.fileops import DIR_FLAGS, open_dir_at, open_dirs_at
from hygiene_nb.executor.filesystems import birth_ns, fs_identity, same_filesystem
from hygiene_nb.executor.listing import held_items
from hygiene_nb.executor.writers import tree_writer
from hygiene_nb.fs.fingerprint import kind_of_mode, signed64

__all__ = [
    "changed_items",
    "check_held",
    "note_arrival",
    "note_origin",
]


def note_origin(batch: Batch, item: ManifestItem, parent: int) -> None:
    """Record where ``item`` comes from, before it moves (its parent is open at ``parent``).

    Its owner, its parent's filesystem identity, and the owner, group and mode of each
    directory from the plan's root down to its parent; the root's filesystem once per batch.
    What cannot be read stays None (unknown to restore, which then refuses).
    """
    raw = item.original_raw
    with contextlib.suppress(OSError):
        item.uid = os.stat(os.path.basename(raw), dir_fd=parent, follow_symlinks=False).st_uid
    where = os.path.dirname(raw)
    key = b"\0fs" + where  # no path holds a NUL
    if key not in batch.origins:
        batch.origins[key] = fs_identity(parent)
    item.fs = batch.origins[key]
    if batch.root is None:
        return
    root = os.fsencode(str(batch.root["path"]))
    if "fs" not in batch.root:
        with contextlib.suppress(OSError):
            fd = os.open(root, DIR_FLAGS)
            try:
                batch.root["fs"] = fs_identity(fd)
            finally:
                os.close(fd)
    if not where.startswith(root) or where[len(root) : len(root) + 1] not in (b"", b"/"):
        return
    chain = [
        root,
        *(
            root + b"/" + b"/".join(where[len(root) + 1 :].split(b"/")[: i + 1])
            for i in range(where[len(root) :].count(b"/"))
        ),
    ]
    try:
        item.parents = [_owner_mode(batch, p) for p in chain]
    except OSError:
        item.parents = None


def _owner_mode(batch: Batch, path: bytes) -> list[int]:
    if path not in batch.origins:
        st = os.stat(path, follow_symlinks=False)
        batch.origins[path] = [st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)]
    return list(batch.origins[path])


def note_arrival(item: ManifestItem, target: int, name: bytes) -> None:
    """Record the ctime of ``item`` in the batch right after it arrived (our move changed it)."""
    with contextlib.suppress(OSError):
        item.ctime_ns = os.stat(name, dir_fd=target, follow_symlinks=False).st_ctime_ns


def check_held(
    parent: int, name: bytes, item: ManifestItem, batch_fs: dict[str, Any] | None
) -> tuple[str, list[str]]:
    """Whether the batch still holds ``item`` at ``name`` under ``parent``, and as moved.

    Returns ``("same", [])``; ``("changed", what)``: the very entry that was moved (same
    filesystem, kind and inode) but written to or altered since (a process that kept it open,
    say); or ``("replaced", what)``: another entry, or one that cannot be told to be the same.
    The filesystem is the same if the device number is, or else if the batch's recorded
    filesystem identity matches (a remount gives a new device number); where that cannot be
    told (a version-1 batch has no identity) only the same inode with the size, mtime and
    recorded ctime all unchanged vouches for it.

    Raises:
        OSError: it cannot be examined (``FileNotFoundError``: it is not there).
    """
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    same_fs = signed64(st.st_dev) == item.dev or same_filesystem(batch_fs, fs_identity(parent))
    who = (
        [f"kind {item.kind} → {kind_of_mode(st.st_mode)}"]
        if kind_of_mode(st.st_mode) != item.kind
        else []
    )
    if signed64(st.st_ino) != item.inode:
        who.append(f"inode {item.inode} → {signed64(st.st_ino)}")
    else:  # the number may be reused: one born after the move is another entry
        born, moved = birth_ns(parent, name), item.ctime_ns  # (version 1: not recorded)
        if born is not None and moved is not None and born > moved:
            who.append("a new entry with the same inode number (born after the move)")
    what = [f"size {item.size} → {st.st_size}"] if st.st_size != item.size else []
    if stat.S_ISREG(st.st_mode) and st.st_mtime_ns != item.mtime_ns:
        what.append(f"mtime {item.mtime_ns} → {st.st_mtime_ns}")
    if item.ctime_ns is not None and st.st_ctime_ns != item.ctime_ns:
        what.append(f"ctime {item.ctime_ns} → {st.st_ctime_ns}")
    if same_fs is False:
        who.append("it is on another filesystem than the batch")
    elif same_fs is None and what:  # cannot tell: only an untouched inode (and ctime) vouches
        who.append(f"device {item.dev} → {signed64(st.st_dev)}")
    if who:
        return "replaced", who + what
    if not what and stat.S_ISDIR(st.st_mode) and item.ctime_ns is not None:
        inner = _changed_inside(parent, name, st.st_dev, item.ctime_ns)
        if inner is not None:
            what.append(f"{os.fsdecode(inner)} inside it changed")
    return ("changed", what) if what else ("same", [])


def _changed_inside(parent: int, name: bytes, dev: int, since: int) -> bytes | None:
    """The first entry below the directory ``name`` whose ctime is after ``since``, if any.

    Our rename changed only the top directory's ctime; anything written, created, removed or
    altered inside it since shows a later ctime on the entry or on its directory.
    """
    stack = [(open_dir_at(parent, name), b"")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    found = [(os.fsencode(e.name), e.stat(follow_symlinks=False)) for e in entries]
                for child, st in found:
                    path = prefix + b"/" + child if prefix else child
                    if st.st_ctime_ns > since:
                        return path
                    if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                        stack.append((open_dir_at(fd, child), path))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return None


def changed_items(
    dir_fd: int, doc: dict[str, Any] | None, *, writers: bool = False
) -> list[tuple[ManifestItem, list[str]]]:
    """The items the batch open at ``dir_fd`` holds that changed after they were quarantined.

    Only entries that are still the very items moved there count (``check_held`` says
    ``changed``); a replaced or missing one is the listing's and restore's business. One that
    cannot be examined counts as changed (cannot tell is never "unchanged"), and so, with
    ``writers``, does one a program still has open for writing (a purge would lose its next
    writes), or of which that cannot be told.
    """
    if doc is None:
        return []
    out: list[tuple[ManifestItem, list[str]]] = []
    for record in held_items(doc, dir_fd):
        item = ManifestItem(**record)
        parts = item.original_raw.strip(b"/").split(b"/")
        try:
            parent = open_dirs_at(dir_fd, [TREE_NAME, *parts[:-1]])
        except FileNotFoundError:
            continue  # missing from the batch: nothing of it to destroy
        except OSError as exc:
            out.append((item, [f"it cannot be examined ({exc.strerror})"]))
            continue
        try:
            state, what = check_held(parent, parts[-1], item, doc.get("fs"))
            if state == "same" and writers:
                why = tree_writer(parent, parts[-1])
                if why:
                    state, what = "changed", [why]
        except FileNotFoundError:
            continue
        except OSError as exc:
            state, what = "changed", [f"it cannot be examined ({exc.strerror})"]
        finally:
            os.close(parent)
        if state == "changed":
            out.append((item, what))
    return out

"""Quarantine batches: where moved items wait, and the manifest that says where they came from.

A batch is a directory claimed per operation with a non-recursive ``mkdir`` (never reusing one
of unknown content). Items land under ``tree/`` at their original absolute path (the layout is
the backup of the manifest). ``manifest.json`` is versioned JSON, written atomically (temp,
fsync, rename, fsync dir, read back) and merged, never overwritten: an item is recorded
``pending`` before its move and ``moved`` after, so a crash at any instant leaves every item at
its original path or in the batch with its origin recorded.

Quarantine directories live in the store (``quarantine/``) and, for items on other filesystems,
at the top of those filesystems (``.hygiene-nb-quarantine``); the store's ``quarantines.json``
registers the latter so that listing, restore and purge find their batches.

Manifest version 2 (version 1 is still read) also records, per item, what restore needs to put
it back safely and what purge and verify need to see it changed: the filesystem identity of
its original parent (``fs``, see ``filesystems``), its owner (``uid``), the owner, group and
mode of each directory from the plan's root down to its parent (``parents``) and its ctime
right after the move (``ctime_ns``); and, per batch, the identity of the batch's own
filesystem (``fs``) and of the root (``root.fs``). Fields a version-1 manifest lacks read as
unknown, never as "unchanged".

How those fields are taken and compared is ``changes``; what ``quarantine list`` shows of a
batch, ``listing``; what a stopped run left beside the batches, ``leftovers``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.fileops import (
    DIR_FLAGS,
    FileOps,
    open_dir_at,
    open_dirs_at,
    remove_own_empty_dir,
    remove_own_file,
    replace_own_file,
)
from hygiene_nb.executor.filesystems import fs_identity
from hygiene_nb.store import QUARANTINE_NAME, no_duplicate_keys

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MANIFEST_SCHEMAS",
    "QUARANTINE_NAME",
    "TREE_NAME",
    "Batch",
    "ManifestItem",
    "claim_batch",
    "claim_batch_at",
    "mirror_parent",
    "read_manifest",
    "remove_empty_dir_below",
    "remove_unused_batch",
    "write_manifest",
]

MANIFEST_SCHEMA = "hygiene-nb/quarantine-manifest@2"
MANIFEST_SCHEMAS = frozenset({"hygiene-nb/quarantine-manifest@1", MANIFEST_SCHEMA})
MANIFEST_NAME = b"manifest.json"
TREE_NAME = b"tree"
_MAX_MANIFEST = 512 * 1024 * 1024


@dataclass
class ManifestItem:
    """One item of a batch: where it was, what it was, and where it is now."""

    original: str
    original_b64: str
    kind: str
    size: int
    tree_bytes: int | None
    dev: int
    inode: int
    mtime_ns: int
    plan_id: str
    rule: str | None = None
    note: str | None = None
    state: str = "pending"  # pending → moved → restored (or returned: moved back at once)
    at: str = ""
    restored_as: list[int] | None = None  # (dev, inode) of a copy restored across filesystems
    modes: list[list[str | int]] | None = None  # a copy's entries whose original bits differ
    restoring_at: str | None = None  # the temporary name of a copy-back under way, beside it
    # version 2: recorded at quarantine time (None in version-1 manifests: unknown)
    uid: int | None = None  # the item's owner
    fs: dict[str, Any] | None = None  # the filesystem of its original parent (fs_identity)
    parents: list[list[int]] | None = None  # [uid, gid, mode] from the root down to its parent
    ctime_ns: int | None = None  # its ctime in the batch right after the move (or copy)

    @property
    def original_raw(self) -> bytes:
        """The exact original path bytes."""
        return base64.b64decode(self.original_b64)


@dataclass
class Batch:
    """An open batch: its directory handle, id and manifest items by original path bytes."""

    path: Path
    batch_id: str
    fd: int
    created_at: str
    plan_id: str
    plan_digest: str
    items: dict[bytes, ManifestItem] = field(default_factory=dict)
    merged: bool = False  # the manifest on disk was merged into ``items``
    root: dict[str, Any] | None = None  # the plan's root: restore never goes outside it
    fs: dict[str, Any] | None = None  # the batch directory's filesystem (fs_identity)
    origins: dict[bytes, Any] = field(default_factory=dict, repr=False)  # lookups, per run

    def close(self) -> None:
        """Close the batch's directory handle."""
        os.close(self.fd)


def _ensure_private_dir(parent_fd: int, name: bytes, ops: FileOps) -> int:
    """Open ``name`` under ``parent_fd``, creating it 0700 if absent; it must be ours."""
    with contextlib.suppress(FileExistsError):
        ops.make_dir(parent_fd, name)
    fd = open_dir_at(parent_fd, name)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise StoreError(
            f"the quarantine directory {os.fsdecode(name)} is not private to you; "
            "fix its owner and mode (0700) before anything is moved there."
        )
    return fd


def claim_batch(quarantine: Path, *, plan_id: str, plan_digest: str, ops: FileOps) -> Batch:
    """Claim a new batch directory (never one that exists) under ``quarantine``.

    Raises:
        StoreError: the quarantine is not a private directory of ours.
    """
    parent_fd = os.open(quarantine.parent, DIR_FLAGS)
    try:
        qfd = _ensure_private_dir(parent_fd, os.fsencode(quarantine.name), ops)
    finally:
        os.close(parent_fd)
    try:
        return claim_batch_at(qfd, quarantine, plan_id=plan_id, plan_digest=plan_digest, ops=ops)
    finally:
        os.close(qfd)


def claim_batch_at(
    qfd: int, quarantine: Path, *, plan_id: str, plan_digest: str, ops: FileOps
) -> Batch:
    """Claim a new batch directory under the quarantine open at ``qfd`` (left open).

    The caller has checked that the quarantine is a private directory of ours.
    """
    while True:
        stamp = datetime.now(UTC)
        batch_id = f"batch-{stamp:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
        try:
            ops.make_dir(qfd, batch_id.encode())
        except FileExistsError:
            continue  # never reuse a directory of unknown content
        fd = open_dir_at(qfd, batch_id.encode())
        fcntl.flock(fd, fcntl.LOCK_EX)  # held while this run fills it (until close)
        batch = Batch(quarantine / batch_id, batch_id, fd, stamp.isoformat(), plan_id, plan_digest)
        batch.fs = fs_identity(fd)
        return batch


def mirror_parent(batch: Batch, original: bytes, ops: FileOps) -> int:
    """A handle on the batch directory that will hold ``original`` (created as needed)."""
    parts = original.strip(b"/").split(b"/")
    fd = _ensure_private_dir(batch.fd, TREE_NAME, ops)
    try:
        for part in parts[:-1]:
            nxt = _ensure_private_dir(fd, part, ops)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


# Written only when set, so a manifest that does not need them reads as before.
_OPTIONAL_FIELDS = ("restored_as", "modes", "restoring_at", "uid", "fs", "parents", "ctime_ns")


def _item_doc(item: ManifestItem) -> dict[str, Any]:
    doc = dict(vars(item))
    for key in _OPTIONAL_FIELDS:
        if doc[key] is None:
            del doc[key]
    return doc


def _manifest_doc(batch: Batch) -> dict[str, Any]:
    doc = {
        "schema": MANIFEST_SCHEMA,
        "batch_id": batch.batch_id,
        "created_at": batch.created_at,
        "plan_id": batch.plan_id,
        "plan_digest": batch.plan_digest,
        "root": batch.root,
        "items": [_item_doc(i) for i in sorted(batch.items.values(), key=lambda i: i.original_b64)],
    }
    if batch.fs is not None:
        doc["fs"] = batch.fs
    return doc


def remove_unused_batch(batch: Batch) -> bool:
    """Remove a batch this run claimed that holds nothing (every item ``returned`` or none).

    Only empty directories and hygiene-nb's own manifest are removed: the mirror directories
    of the items' parents (``rmdir``, which fails on anything inside), then ``tree/``, then the
    manifest once the batch holds nothing else, then the batch directory. A partial copy, or
    anything else inside, keeps the batch as it is.

    Returns:
        Whether the batch is gone.
    """
    if any(i.state != "returned" for i in batch.items.values()):
        return False
    mirrors = {p[:i] for p in batch.items for i in range(1, len(p)) if p[i : i + 1] == b"/"}
    for mirror in sorted(mirrors, key=lambda m: m.count(b"/"), reverse=True):
        if not remove_empty_dir_below(batch.fd, [TREE_NAME, *mirror[1:].split(b"/")]):
            return False
    if not remove_empty_dir_below(batch.fd, [TREE_NAME]):
        return False
    with os.scandir(batch.fd) as entries:
        left = {os.fsencode(e.name) for e in entries}
    if not left <= {MANIFEST_NAME}:
        return False
    if left:
        remove_own_file(batch.fd, MANIFEST_NAME)
    qfd = os.open(batch.path.parent, DIR_FLAGS)
    try:
        st, here = os.stat(batch.batch_id, dir_fd=qfd, follow_symlinks=False), os.fstat(batch.fd)
        if (st.st_dev, st.st_ino) != (here.st_dev, here.st_ino):
            return False
        remove_own_empty_dir(qfd, batch.batch_id.encode("ascii"))
    except OSError:
        return False
    finally:
        os.close(qfd)
    return True


def remove_empty_dir_below(fd: int, parts: list[bytes]) -> bool:
    """Remove the empty directory ``parts`` below ``fd``; True if it is gone (or never was)."""
    try:
        parent = open_dirs_at(fd, parts[:-1])
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        remove_own_empty_dir(parent, parts[-1])
    except FileNotFoundError:
        return True
    except OSError:
        return False
    finally:
        os.close(parent)
    return True


def write_manifest(batch: Batch) -> None:
    """Merge ``batch.items`` into the manifest on disk and write it atomically, then read back.

    Items already on disk and absent from ``batch.items`` are kept (a union, never a loss).

    Raises:
        StoreError: the manifest cannot be written or does not read back identical.
    """
    if not batch.merged:  # union with what is on disk once; this process owns the batch after
        for key, item in _read_items(batch.fd).items():
            batch.items.setdefault(key, item)
        batch.merged = True
    data = json.dumps(_manifest_doc(batch), separators=(",", ":"), ensure_ascii=True).encode()
    tmp = b".manifest-" + secrets.token_hex(6).encode() + b".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=batch.fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        replace_own_file(batch.fd, tmp, MANIFEST_NAME)
    except BaseException:
        # A half-written temp file must not linger; the old manifest stays whole.
        with contextlib.suppress(OSError):
            remove_own_file(batch.fd, tmp)
        raise
    os.fsync(batch.fd)
    if _read_bytes(batch.fd) != data:
        raise StoreError(f"the manifest of {batch.path} did not read back as written; stop here.")


def _read_bytes(dir_fd: int) -> bytes:
    fd = os.open(MANIFEST_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("the manifest is not a regular file")
        data = handle.read(_MAX_MANIFEST + 1)
    if len(data) > _MAX_MANIFEST:
        raise ValueError("the manifest is absurdly large")
    return data


def read_manifest(dir_fd: int) -> dict[str, Any] | None:
    """The manifest of the batch open at ``dir_fd`` (None if there is none).

    Raises:
        ValueError: it exists but is not a valid manifest of a known version.
    """
    try:
        data = _read_bytes(dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"unreadable manifest ({exc.strerror})") from exc

    doc = json.loads(data, object_pairs_hook=no_duplicate_keys)
    if not isinstance(doc, dict) or doc.get("schema") not in MANIFEST_SCHEMAS:
        raise ValueError("unknown manifest version")
    items = doc.get("items")
    if not isinstance(items, list):
        raise ValueError("items is not a list")
    known = ManifestItem.__dataclass_fields__
    for item in items:
        if not isinstance(item, dict) or set(item) - set(known):
            raise ValueError("an item has an unknown shape")
        raw = base64.b64decode(item["original_b64"], validate=True)
        if (
            not raw.startswith(b"/")
            or b"\0" in raw
            or b"/../" in raw + b"/"
            or raw.endswith(b"/..")
        ):
            raise ValueError("an item's original path is not a clean absolute path")
    return doc


def _read_items(dir_fd: int) -> dict[bytes, ManifestItem]:
    doc = read_manifest(dir_fd)
    if doc is None:
        return {}
    items = [ManifestItem(**i) for i in doc["items"]]
    return {i.original_raw: i for i in items}

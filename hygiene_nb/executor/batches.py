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
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.fileops import (
    DIR_FLAGS,
    REMOVING_PREFIX,
    FileOps,
    open_dir_at,
    open_dirs_at,
    remove_own_empty_dir,
    remove_own_file,
    replace_own_file,
)
from hygiene_nb.executor.filesystems import birth_ns, fs_identity, same_filesystem
from hygiene_nb.executor.writers import tree_writer
from hygiene_nb.fs.fingerprint import kind_of_mode, signed64
from hygiene_nb.store import no_duplicate_keys, utc_now

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MANIFEST_SCHEMAS",
    "QUARANTINE_NAME",
    "TREE_NAME",
    "Batch",
    "BatchInfo",
    "ManifestItem",
    "batch_dirs",
    "changed_items",
    "check_held",
    "claim_batch",
    "claim_batch_at",
    "find_removal_leftovers",
    "list_batches",
    "note_arrival",
    "note_origin",
    "read_manifest",
    "remove_empty_dir_below",
    "remove_unused_batch",
    "write_manifest",
]

MANIFEST_SCHEMA = "hygiene-nb/quarantine-manifest@2"
MANIFEST_SCHEMAS = frozenset({"hygiene-nb/quarantine-manifest@1", MANIFEST_SCHEMA})
MANIFEST_NAME = b"manifest.json"
TREE_NAME = b"tree"
QUARANTINE_NAME = ".hygiene-nb-quarantine"
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

    @property
    def relative(self) -> bytes:
        """Where it lives inside the batch (``tree/`` + the original absolute path)."""
        return TREE_NAME + self.original_raw


@dataclass
class BatchInfo:
    """What ``quarantine list`` shows of a batch."""

    batch_id: str
    path: str
    created_at: str
    items: int
    bytes: int
    manifest: str  # ok | incomplete | invalid
    plan_id: str | None = None
    problems: list[str] = field(default_factory=list)
    # what a run that stopped while removing an original after its verified copy left beside it
    leftovers: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The batch's row in ``hygiene-nb quarantine list --json`` (problems when invalid)."""
        return {
            "batch_id": self.batch_id,
            "path": self.path,
            "created_at": self.created_at,
            "items": self.items,
            "bytes": self.bytes,
            "manifest": self.manifest,
            "leftovers": self.leftovers,
            **({"problems": self.problems} if self.manifest == "invalid" else {}),
        }


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


def _now() -> str:
    return utc_now().isoformat(timespec="microseconds")


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


def _by_origin(item: ManifestItem) -> str:
    return item.original_b64


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


def batch_state(dir_fd: int) -> tuple[str, dict[str, Any] | None, list[str]]:
    """The batch's manifest state: ok, incomplete (unrecorded items, or none) or invalid."""
    try:
        doc = read_manifest(dir_fd)
    except (ValueError, KeyError, TypeError) as exc:
        return "invalid", None, [str(exc)]
    problems: list[str] = []
    recorded = set()
    if doc is not None:
        recorded = {base64.b64decode(i["original_b64"]) for i in doc["items"]}
    for path in _leaf_items(dir_fd, recorded):
        if path not in recorded:
            problems.append(f"{os.fsdecode(path)} is in the batch but not in its manifest")
    if doc is None:
        return ("incomplete" if problems else "ok"), None, problems or ["no manifest"]
    return ("incomplete" if problems else "ok"), doc, problems


def _leaf_items(dir_fd: int, recorded: set[bytes]) -> list[bytes]:
    """Paths in ``tree/`` that are items: recorded ones, and non-directories elsewhere."""
    try:
        tree = open_dir_at(dir_fd, TREE_NAME)
    except FileNotFoundError:
        return []
    out: list[bytes] = []
    prefixes = {p[:i] for p in recorded for i in range(1, len(p)) if p[i : i + 1] == b"/"}

    def walk(fd: int, prefix: bytes) -> None:
        with os.scandir(fd) as entries:
            names = [(os.fsencode(e.name), e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in names:
            path = prefix + b"/" + name
            if path in recorded or not is_dir:
                out.append(path)
            elif path in prefixes or not recorded:
                child = open_dir_at(fd, name)
                try:
                    walk(child, path)
                finally:
                    os.close(child)
            else:
                out.append(path)  # a directory nobody recorded: an unrecorded item

    try:
        walk(tree, b"")
    finally:
        os.close(tree)
    return out


def _held(doc: dict[str, Any] | None, fd: int) -> list[dict[str, Any]]:
    """The items the batch holds: moved ones, and any other recorded item found inside it."""
    if doc is None:
        return []
    out = []
    for item in doc["items"]:
        state = item.get("state")
        if state == "moved":
            out.append(item)
        elif state in ("pending", "held") or (state == "restored" and item.get("restored_as")):
            # a move a stopped run never recorded (its original gone: not a partial copy), or
            # a copy-back's duplicate: held if it is there
            original = base64.b64decode(item["original_b64"])
            if state != "restored" and os.path.lexists(original):
                continue
            with contextlib.suppress(OSError):
                os.stat(TREE_NAME + original, dir_fd=fd, follow_symlinks=False)
                out.append(item)
    return out


def _item_bytes(items: list[dict[str, Any]]) -> int:
    return sum(
        (i.get("tree_bytes") if i.get("tree_bytes") is not None else i.get("size", 0)) or 0
        for i in items
    )


def batch_dirs(quarantines: list[Path]) -> Iterator[tuple[int, Path, str]]:
    """(handle on the quarantine, its path, a batch directory's name) for every batch in them.

    The handle is open while its batches are handed out; a quarantine that cannot be opened
    is passed over (its batches cannot be reached either).
    """
    for quarantine in quarantines:
        try:
            qfd = os.open(quarantine, DIR_FLAGS)
        except OSError:
            continue
        try:
            with os.scandir(qfd) as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
            for name in names:
                yield qfd, quarantine, name
        finally:
            os.close(qfd)


def list_batches(quarantines: list[Path]) -> list[BatchInfo]:
    """Every batch in the given quarantine directories, oldest first."""
    out = [_describe(qfd, quarantine, name) for qfd, quarantine, name in batch_dirs(quarantines)]
    return sorted(out, key=lambda b: (b.created_at, b.batch_id))


def _describe(qfd: int, quarantine: Path, name: str) -> BatchInfo:
    try:
        fd = open_dir_at(qfd, os.fsencode(name))
    except OSError as exc:
        return BatchInfo(
            name,
            str(quarantine / name),
            "",
            0,
            0,
            "invalid",
            problems=[exc.strerror or "unreadable"],
        )
    try:
        state, doc, problems = batch_state(fd)
        created = (
            doc["created_at"]
            if doc
            else datetime.fromtimestamp(os.fstat(fd).st_mtime, UTC).isoformat()
        )
        held = _held(doc, fd)
        extra = len([p for p in problems if p.endswith("not in its manifest")])
        info = BatchInfo(
            name,
            str(quarantine / name),
            created,
            len(held) + extra,
            _item_bytes(held),
            state,
            doc.get("plan_id") if doc else None,
            problems,
        )
        if doc is not None:
            info.leftovers = _leftovers_of(name, doc) + _copies_not_moved(
                fd, name, str(quarantine / name), doc
            )
        return info
    finally:
        os.close(fd)


REMOVAL_INTERRUPTED = "removal-interrupted"


def find_removal_leftovers(originals: list[bytes]) -> dict[bytes, bytes]:
    """Original path → the staging entry holding it, for originals whose removal was cut short.

    ``remove_original_after_verified_copy`` renames an original into a private
    ``.hygiene-nb-removing-*`` directory beside it before removing it; a run killed then leaves
    it there, a duplicate of the verified copy. Read-only: each parent is listed once.
    """
    by_parent: dict[bytes, list[bytes]] = {}
    for raw in originals:
        by_parent.setdefault(os.path.dirname(raw), []).append(os.path.basename(raw))
    found: dict[bytes, bytes] = {}
    for parent, names in by_parent.items():
        try:
            fd = os.open(parent, DIR_FLAGS)
        except OSError:
            continue
        try:
            with os.scandir(fd) as entries:
                stagings = sorted(
                    os.fsencode(e.name)
                    for e in entries
                    if os.fsencode(e.name).startswith(REMOVING_PREFIX)
                )
            for staging in stagings:
                for name in names:
                    with contextlib.suppress(OSError):
                        os.stat(staging + b"/" + name, dir_fd=fd, follow_symlinks=False)
                        found.setdefault(
                            os.path.join(parent, name), os.path.join(parent, staging, name)
                        )
        finally:
            os.close(fd)
    return found


def removal_leftover_message(original: str, staging: str, batch_id: str) -> str:
    """What ``removal-interrupted`` means and what to do about it."""
    return (
        f"a run stopped while it removed the original of {original} after its copy into "
        f"batch {batch_id} was verified: {staging} still holds the original (or, if the run "
        f"stopped between two unlinks, part of it), a duplicate of that copy: nothing is lost. "
        f"`hygiene-nb recover` puts it back in its place when it is whole (the batch's copy "
        f"then goes with the batch's purge); when it is not, the batch keeps the item and "
        f"{os.path.dirname(staging)} can be removed by hand once compared with the batch."
    )


def _leftovers_of(batch_id: str, doc: dict[str, Any]) -> list[dict[str, str]]:
    originals = [
        base64.b64decode(i["original_b64"])
        for i in doc["items"]
        if i.get("state") in ("moved", "pending")
    ]
    out = []
    for raw, staging in sorted(find_removal_leftovers(originals).items()):
        original, where = os.fsdecode(raw), os.fsdecode(staging)
        out.append(
            {
                "code": REMOVAL_INTERRUPTED,
                "original": original,
                "path": where,
                "message": removal_leftover_message(original, where, batch_id),
            }
        )
    return out


COPY_NOT_MOVED = "copy-not-moved"


def _copies_not_moved(
    fd: int, batch_id: str, batch_path: str, doc: dict[str, Any]
) -> list[dict[str, str]]:
    """Copies in the batch that are not the item: the original is in its place.

    The copy failed (a full store) or was cut short, or its original was kept (``in-use``).
    Only an item whose place is on another filesystem than the batch (a copy, never a rename)
    whose original is there and whose copy is in the batch counts.
    """
    out: list[dict[str, str]] = []
    here = os.fstat(fd).st_dev
    for item in doc["items"]:
        if item.get("state") not in ("pending", "returned"):
            continue
        raw = base64.b64decode(item["original_b64"])
        try:
            os.stat(TREE_NAME + raw, dir_fd=fd, follow_symlinks=False)
            if os.stat(os.path.dirname(raw)).st_dev == here or not os.path.lexists(raw):
                continue
        except OSError:
            continue
        original = os.fsdecode(raw)
        cut = "was cut short" if item["state"] == "pending" else "was not kept as the item"
        out.append(
            {
                "code": COPY_NOT_MOVED,
                "original": original,
                "path": os.fsdecode(os.fsencode(batch_path) + b"/" + TREE_NAME + raw),
                "message": f"a copy of {original} into batch {batch_id} {cut} (it failed, "
                "stopped, or its original had to stay): the original is in its place and "
                "was never removed; the copy in the batch is only a duplicate, not counted "
                "as an item, and goes when the batch is purged.",
            }
        )
    return out


# -- what version 2 records, and what it is compared with --------------------------------------


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
    for record in _held(doc, dir_fd):
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

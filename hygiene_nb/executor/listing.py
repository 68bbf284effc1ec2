"""What ``quarantine list`` shows of the batches: each one's items, bytes and manifest state.

A batch is described from what is on disk: its manifest (``ok``, ``incomplete`` when an entry
in its tree is not recorded or there is no manifest, ``invalid`` when it cannot be read), the
items it still holds, and what a stopped run left beside it (``leftovers``).
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hygiene_nb.executor.batches import TREE_NAME, read_manifest
from hygiene_nb.executor.fileops import DIR_FLAGS, open_dir_at
from hygiene_nb.executor.leftovers import copies_not_moved, leftovers_of

__all__ = [
    "BatchInfo",
    "batch_dirs",
    "batch_state",
    "held_items",
    "list_batches",
]


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


def held_items(doc: dict[str, Any] | None, fd: int) -> list[dict[str, Any]]:
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
        held = held_items(doc, fd)
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
            info.leftovers = leftovers_of(name, doc) + copies_not_moved(
                fd, name, str(quarantine / name), doc
            )
        return info
    finally:
        os.close(fd)

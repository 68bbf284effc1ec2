"""What a stopped run left beside the batches: an original half-removed, a copy not the item.

Across filesystems an item is copied into its batch, verified, and only then is its original
removed. A run stopped while it removed the original leaves that original in a staging
directory beside its place (``removal-interrupted``); a copy that failed, was cut short or whose
original had to stay leaves a duplicate in the batch (``copy-not-moved``). Neither is a loss;
both are shown with the batch and said plainly.
"""

from __future__ import annotations

import base64
import contextlib
import os
from typing import Any

from hygiene_nb.executor.batches import TREE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, REMOVING_PREFIX

__all__ = [
    "COPY_NOT_MOVED",
    "REMOVAL_INTERRUPTED",
    "copies_not_moved",
    "find_removal_leftovers",
    "leftovers_of",
    "removal_leftover_message",
]

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


def leftovers_of(batch_id: str, doc: dict[str, Any]) -> list[dict[str, str]]:
    """The ``removal-interrupted`` rows of the batch ``batch_id`` whose manifest is ``doc``."""
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


def copies_not_moved(
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

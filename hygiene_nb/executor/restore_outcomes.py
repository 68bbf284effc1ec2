"""How one item's restore ends, shared by the restore modules: blocked, back with a duplicate left.

``Block`` stops one item (it becomes a ``Blocked`` in the result, with its code); ``Left`` says
the item is back but the batch keeps a duplicate; ``record`` marks an item back in the manifest
(written by the caller). ``OCCUPIED`` are the errnos with which a no-replace rename says the
target name is taken.
"""

from __future__ import annotations

import errno
from datetime import UTC, datetime

from hygiene_nb.executor.batches import Batch, ManifestItem

__all__ = ["OCCUPIED", "Block", "Left", "record"]

OCCUPIED = frozenset({errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR})


class Left(Exception):
    """The item is back, but a duplicate stays in the batch (internal; ``batch-copy-left``)."""


class Block(Exception):
    """One item cannot be restored (internal; becomes a ``Blocked``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def record(batch: Batch, item: ManifestItem, state: str) -> None:
    """Mark an item back; the manifest is written once per group (``restore_batch``).

    A crash before that write is safe: the item is at its original path with its recorded
    identity, which the next restore reports as ``already`` and records.
    """
    item.state = state
    item.at = datetime.now(UTC).isoformat(timespec="microseconds")

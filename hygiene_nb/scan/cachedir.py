"""Cache directory tags (https://bford.info/cachedir/): which directories say they are caches.

A tool that keeps a cache (cargo's ``target``, pytest, mypy, ccache, borg, uv…) may write a
file named ``CACHEDIR.TAG`` in it whose first 43 bytes are the specification's signature. The
scan reads the first bytes of the regular files of that exact name (nothing else is opened)
and records the valid tags in the scan's metadata: the directory and, where the rest of the tag
says "created by TOOL", the tool. Classification makes such a directory a cache.

A tag is read from a handle on its directory reached from the root one component at a time,
never through a symlink, opened without following one, without blocking on a fifo, without
becoming a terminal's controlling process and, where permitted, without touching its atime;
at most ``_READ_BYTES`` are read. A tag that cannot be read is simply not valid.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.fs.cachedir_tag import MAX_TOOL_CHARS, SIGNATURE, TAG_NAME, read_tag, tool_named
from hygiene_nb.fs.fingerprint import DIR_FLAGS, open_dirs_at
from hygiene_nb.scan.arrays import binary_scalar, int_scalar
from hygiene_nb.scan.walk.spec import KIND_FILE

__all__ = [
    "MAX_TAGS",
    "MAX_TOOL_CHARS",
    "SIGNATURE",
    "TAG_NAME",
    "TagReader",
    "read_tag",
    "tool_named",
]

MAX_TAGS = 10_000  # recorded per scan; more are counted in the scan's options, not recorded


_TAG_NAME = binary_scalar(TAG_NAME.encode())  # no pandas import: scan.arrays
_KIND_FILE = int_scalar(KIND_FILE, pa.uint8())


class TagReader:
    """The valid tags of one scan, read as the walk's batches go by.

    ``note`` looks for regular files named ``CACHEDIR.TAG`` in a walk batch (one comparison of
    the name column: a tree without tags costs that and nothing more) and reads each.
    """

    def __init__(self, root: bytes) -> None:
        self.root = root
        self.tags: list[dict[str, str]] = []
        self.dropped = 0
        self._fd = -1

    def note(self, batch: pa.RecordBatch) -> None:
        """Read the tags among ``batch``'s rows (WALK_SCHEMA)."""
        named = pc.equal(batch.column("name"), _TAG_NAME)
        if not named.true_count:
            return
        hits = batch.filter(pc.and_(named, pc.equal(batch.column("kind"), _KIND_FILE)))
        for parent in hits.column("parent").to_pylist():
            self._read(parent)

    def _read(self, parent: bytes) -> None:
        rel = parent[len(self.root) :].strip(b"/")
        try:
            if self._fd < 0:
                self._fd = os.open(self.root, DIR_FLAGS)
            fd = open_dirs_at(self._fd, rel.split(b"/") if rel else [])
        except OSError:
            return  # replaced or gone since it was listed: no tag is read through that
        try:
            tool = read_tag(fd)
        finally:
            os.close(fd)
        if tool is None:
            return
        if len(self.tags) >= MAX_TAGS:
            self.dropped += 1
            return
        entry = {"dir": parent.decode("utf-8", "backslashreplace")}  # as snapshot paths are
        if tool:
            entry["tool"] = tool
        self.tags.append(entry)

    def close(self) -> None:
        """Close the root's handle (if one was opened)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

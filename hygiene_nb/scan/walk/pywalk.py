"""The pure-Python walker: the reference for ``spec``, used where the C core is absent.

Single-threaded; round-robin over the root's direct child directories so budgets are fair.
"""

from __future__ import annotations

import errno as errno_mod
import os
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from hygiene_nb.fs.mounts import AT_FDCWD, mount_id_at
from hygiene_nb.scan.walk.match import fnmatch_bytes, is_excluded
from hygiene_nb.scan.walk.spec import (
    FLAG_BUDGET_CUT,
    FLAG_EXCLUDED,
    FLAG_MOUNT_POINT,
    KIND_DIR,
    KIND_FILE,
    KIND_OTHER,
    KIND_SYMLINK,
    WALK_SCHEMA,
    WalkOptions,
    WalkStats,
)

__all__ = ["PyWalker", "fnmatch_bytes"]

_OPEN_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# What an entry that could not be stat-ed records as 0 (it is marked with its errno).
_STAT_COLUMNS = (
    "size",
    "alloc",
    "mtime_ns",
    "inode",
    "dev",
    "nlink",
    "ctime_ns",
    "uid",
    "gid",
    "mode",
)


@dataclass(eq=False)
class _Dir:
    """A directory listed but not yet finished: its identity and running sums."""

    path: bytes
    name: bytes
    parent: _Dir | None
    depth: int
    rel: bytes
    st: os.stat_result
    uid: int
    tb: int = 0
    ta: int = 0
    tf: int = 0
    tl: int = 0
    partial: bool = False
    err: int = 0
    flags: int = 0
    pending: int = 0
    listed: bool = False
    quiet: bool = False  # in a store/quarantine subtree: counted in the sums, never emitted
    quiet_below: bool = False  # what its listing holds is counted, never emitted


def _open_dir(path: bytes) -> int:
    """Open a directory for listing, never through a symlink (a seam tests race against)."""
    return os.open(path, _OPEN_FLAGS)


def _kind_of(mode: int) -> int:
    if stat.S_ISREG(mode):
        return KIND_FILE
    if stat.S_ISDIR(mode):
        return KIND_DIR
    if stat.S_ISLNK(mode):
        return KIND_SYMLINK
    return KIND_OTHER


def _join(parent: bytes, name: bytes) -> bytes:
    return parent + name if parent.endswith(b"/") else parent + b"/" + name


class PyWalker:
    """Walk ``options.root`` in pure Python; see ``hygiene_nb.scan.walk.spec`` for the rows."""

    name = "python"

    def __init__(self, options: WalkOptions) -> None:
        self.options = options
        self.stats = WalkStats()
        self._cols: dict[str, list[object]] = {f.name: [] for f in WALK_SCHEMA}
        self._links: dict[tuple[int, int], set[int]] = {}
        self._deadline = time.monotonic() + options.max_seconds if options.max_seconds > 0 else None
        self._stacks: list[list[_Dir]] = []
        self._turns: deque[int] = deque()
        self._uids = 0  # directory ids for hard-link bookkeeping (id() may be reused)
        self._root_dev = 0
        self._root_mnt: int | None = None  # mount id of the root (with one_file_system)

    # -- budget -------------------------------------------------------------------------------

    def _out_of_entries(self) -> bool:
        cap = self.options.max_entries
        return cap > 0 and self.stats.entries >= cap

    def _out_of_time(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    # -- rows ---------------------------------------------------------------------------------

    def _emit(
        self,
        parent: bytes,
        name: bytes,
        kind: int,
        st: os.stat_result | None,
        depth: int,
        sums: tuple[int, int, int, int],
        partial: bool,
        err: int,
        flags: int,
    ) -> None:
        c = self._cols
        c["parent"].append(parent)
        c["name"].append(name)
        c["kind"].append(kind)
        if st is None:
            for key in _STAT_COLUMNS:
                c[key].append(0)
        else:
            c["size"].append(st.st_size)
            c["alloc"].append(st.st_blocks * 512)
            c["mtime_ns"].append(st.st_mtime_ns)
            c["inode"].append(st.st_ino)
            c["dev"].append(st.st_dev)
            c["nlink"].append(st.st_nlink)
            c["ctime_ns"].append(st.st_ctime_ns)
            c["uid"].append(st.st_uid)
            c["gid"].append(st.st_gid)
            c["mode"].append(st.st_mode)
        c["depth"].append(depth)
        c["tree_bytes"].append(sums[0])
        c["tree_alloc"].append(sums[1])
        c["tree_files"].append(sums[2])
        c["tree_latest_mtime_ns"].append(sums[3])
        c["partial"].append(partial)
        c["errno"].append(err)
        c["flags"].append(flags)
        if err:
            self.stats.errors += 1

    def _flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_pydict(self._cols, schema=WALK_SCHEMA)
        for values in self._cols.values():
            values.clear()
        return batch

    def _full(self) -> bool:
        return len(self._cols["name"]) >= self.options.batch_rows

    # -- directories --------------------------------------------------------------------------

    def _finish(self, node: _Dir) -> None:
        """Emit a finished directory and fold its sums into its parent (post-order)."""
        while node is not None:
            parent = node.parent
            if not node.quiet:
                self._emit(
                    parent.path if parent else b"",
                    node.name,
                    KIND_DIR,
                    node.st,
                    node.depth,
                    (node.tb, node.ta, node.tf, node.tl),
                    node.partial,
                    node.err,
                    node.flags,
                )
            if parent is None:
                return
            parent.tb += node.tb
            parent.ta += node.ta
            parent.tf += node.tf
            parent.tl = max(parent.tl, node.tl)
            parent.partial = parent.partial or node.partial
            parent.pending -= 1
            if parent.pending or not parent.listed:
                return
            node = parent

    def _own(self, node: _Dir) -> None:
        st = node.st
        node.tb, node.ta, node.tl = st.st_size, st.st_blocks * 512, st.st_mtime_ns

    def _cut(self, node: _Dir) -> None:
        """The budget ran out before ``node`` was listed: record it as cut (unknown)."""
        self._own(node)
        node.flags |= FLAG_BUDGET_CUT
        node.partial = True
        node.listed = True
        self._finish(node)

    def _count_link(self, node: _Dir, st: os.stat_result, is_reg: bool) -> None:
        """Count a hard-linked inode once per directory, as ``du DIR`` would."""
        key = (st.st_dev, st.st_ino)
        counted = self._links.get(key)
        if counted is None:
            ids = set()
            n: _Dir | None = node
            while n is not None:
                ids.add(n.uid)
                n = n.parent
            self._links[key] = ids
            return
        n = node
        while n is not None and n.uid not in counted:
            counted.add(n.uid)
            n = n.parent
        if n is not None:  # n already counted this inode: take back what propagation adds
            n.tb -= st.st_size
            n.ta -= st.st_blocks * 512
            n.tf -= int(is_reg)

    def _list(self, node: _Dir) -> list[_Dir]:
        """List one directory: emit its non-directories, return its subdirectories to walk."""
        self._own(node)
        node.listed = True
        subdirs: list[_Dir] = []
        try:
            fd = _open_dir(node.path)
        except OSError as exc:
            node.err = exc.errno or errno_mod.EIO
            node.partial = True
            return subdirs
        try:
            here = os.fstat(fd)
            if (here.st_dev, here.st_ino) != (node.st.st_dev, node.st.st_ino):
                node.err = errno_mod.ENOENT
                node.partial = True
                return subdirs
            with os.scandir(fd) as it:
                for entry in it:
                    if not node.quiet_below and self._out_of_entries():
                        node.flags |= FLAG_BUDGET_CUT
                        node.partial = True
                        self.stats.budget_cut = True
                        break
                    child = self._entry(node, entry)
                    if child is not None:
                        subdirs.append(child)
        except OSError as exc:
            node.err = exc.errno or errno_mod.EIO
            node.partial = True
        finally:
            os.close(fd)
        return subdirs

    def _entry(self, node: _Dir, entry: os.DirEntry[str]) -> _Dir | None:
        quiet = node.quiet_below
        self.stats.entries += not quiet
        name = os.fsencode(entry.name)  # scandir(fd) yields str; surrogateescape is lossless
        depth = node.depth + 1
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            try:
                kind = KIND_DIR if entry.is_dir(follow_symlinks=False) else KIND_OTHER
                if entry.is_symlink():
                    kind = KIND_SYMLINK
                elif entry.is_file(follow_symlinks=False):
                    kind = KIND_FILE
            except OSError:
                kind = KIND_OTHER
            node.partial = True
            if quiet:
                return None
            self._emit(
                node.path,
                name,
                kind,
                None,
                depth,
                (0, 0, 0, 0),
                kind == KIND_DIR,
                exc.errno or errno_mod.EIO,
                0,
            )
            return None
        kind = _kind_of(st.st_mode)
        rel = node.rel + b"/" + name if node.rel else name
        flags = 0
        if self.options.excludes and is_excluded(
            self.options.excludes, name, rel, kind == KIND_DIR
        ):
            flags = FLAG_EXCLUDED
        if kind == KIND_DIR:
            if (
                self.options.one_file_system
                and not flags
                and (st.st_dev != self._root_dev or self._other_mount(_join(node.path, name)))
            ):
                flags = FLAG_MOUNT_POINT
            if not flags:
                # the store and quarantines: descended for their sums, nothing below emitted
                skip = (st.st_dev, st.st_ino) in self.options.skip_identities or (
                    name in self.options.skip_names
                )
                node.pending += 1
                self._uids += 1
                child = _Dir(_join(node.path, name), name, node, depth, rel, st, self._uids)
                child.quiet = quiet
                child.quiet_below = quiet or skip
                return child
            sums = (st.st_size, st.st_blocks * 512, 0, st.st_mtime_ns)
        else:
            is_reg = kind == KIND_FILE
            sums = (st.st_size, st.st_blocks * 512, int(is_reg), st.st_mtime_ns)
        if not flags & FLAG_EXCLUDED:  # an excluded entry is recorded, counted nowhere
            if kind != KIND_DIR and st.st_nlink > 1:
                self._count_link(node, st, kind == KIND_FILE)
            node.tb += sums[0]
            node.ta += sums[1]
            node.tf += sums[2]
            node.tl = max(node.tl, sums[3])
        if not quiet:
            self._emit(node.path, name, kind, st, depth, sums, False, 0, flags)
        return None

    def _other_mount(self, path: bytes) -> bool:
        """Whether directory ``path`` is on another mount than the root (or it cannot be told).

        A bind mount of the same filesystem has the root's ``st_dev``; its mount id differs.
        """
        here = mount_id_at(AT_FDCWD, path)
        return here is None or self._root_mnt is None or here != self._root_mnt

    # -- the walk -----------------------------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Yield the walk's rows in WALK_SCHEMA batches (post-order for directories)."""
        root = self.options.root
        st = os.lstat(root)
        self._root_dev = st.st_dev
        if self.options.one_file_system:
            self._root_mnt = mount_id_at(AT_FDCWD, root)
        self.stats.entries = 1
        top = _Dir(root, root, None, 0, b"", st, 0)
        for child in self._list(top):
            self._stacks.append([child])
            self._turns.append(len(self._stacks) - 1)
        if top.pending == 0:
            self._finish(top)
        while self._turns:
            index = self._turns.popleft()
            stack = self._stacks[index]
            node = stack.pop()
            if self._out_of_entries() or self._out_of_time():
                self.stats.budget_cut = True
                self._cut(node)
            else:
                subdirs = self._list(node)
                stack.extend(reversed(subdirs))
                if node.pending == 0:
                    self._finish(node)
            if stack:
                self._turns.append(index)
            if self._full():
                yield self._flush()
        if self._cols["name"]:
            yield self._flush()

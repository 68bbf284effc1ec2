"""The walker contract: what both walkers (C core and pure-Python fallback) emit, row for row.

A walker lists a tree without following symlinks and yields Arrow record batches in WALK_SCHEMA.
The snapshot stage turns those raw (bytes-level) batches into snapshot rows. Both walkers must
produce the same set of rows for the same tree; tests compare them.

Semantics every walker keeps:

* One row per entry, the root included. Non-directories are emitted when their parent is listed;
  a directory is emitted when its whole subtree is finished (post-order), carrying its rollups.
* ``parent`` is the parent directory's absolute path (bytes); the root row has ``parent == b""``
  and ``name`` = the root's absolute path. ``depth`` is 0 for the root.
* Each entry is ``lstat``-ed relative to its directory handle (``fstatat(dirfd, name,
  AT_SYMLINK_NOFOLLOW)``). A directory is opened with ``O_RDONLY|O_DIRECTORY|O_NOFOLLOW`` and its
  ``(st_dev, st_ino)`` checked against the listing's stat; a mismatch is ``errno = ENOENT``
  (the entry was replaced while we walked).
* ``kind``: 0 file, 1 dir, 2 symlink, 3 other (fifo, socket, device) - never opened.
* ``size`` = st_size, ``alloc`` = st_blocks * 512, ``mtime_ns`` = st_mtime in ns, ``ctime_ns`` =
  st_ctime in ns (the inode's change time, which no user can set: a rewrite with the mtime put
  back still moves it), ``uid``/``gid``/``mode`` = st_uid, st_gid, st_mode.
* Rollups (``tree_*``) for a directory cover the directory itself and everything below it that was
  read: ``tree_bytes`` = sum of ``size``, ``tree_alloc`` = sum of ``alloc`` (equal to GNU
  ``du -sb --apparent-size`` and ``du -sB1``), ``tree_files`` = number of regular files,
  ``tree_latest_mtime_ns`` = newest mtime. An inode with ``nlink > 1`` (not a directory) counts once
  in every directory's sums, exactly as ``du DIR`` run on that directory alone would count it.
  For a non-directory the ``tree_*`` fields are its own values (``tree_files`` = 1 for a regular
  file, else 0).
* ``errno`` != 0 marks an entry that could not be read: a directory that could not be opened or
  listed (EACCES, EPERM, ENOENT, EIO, ...), or an entry that vanished between listing and stat
  (ENOENT; its ``kind`` then comes from d_type, 3 when unknown, and its numbers are 0).
* ``partial`` (directories only) is true when the directory's own listing is incomplete (error or
  budget cut) or any descendant directory is partial or any entry below failed with ``errno``.
  What is partial is *unknown*, not empty.
* ``flags`` bit 1 = excluded (matched an exclude rule: not descended, ``tree_*`` = own values,
  not partial, and counted nowhere: not in any ancestor's ``tree_*`` nor in the hard-link
  bookkeeping, so every directory's sums equal ``du --exclude``'s); bit 2 = mount point under
  ``one_file_system`` (st_dev or the mount id differs from the root's, so a bind mount of the
  same filesystem counts, and so does a directory whose mount id cannot be told; recorded, not
  descended); bit 4 = budget cut (this directory was not listed, or not listed completely,
  because the budget ran out; it is partial).
* A skip identity or name (the store, quarantines) is a directory walked for its sums only: its
  row is emitted (no flag) with the ``tree_*`` of its whole subtree, as du counts it, and
  nothing below it is emitted or takes from ``max_entries``.
* Exclude rules are evaluated in order and the last match wins (gitignore): a rule matches an
  entry when (not ``dir_only`` or the entry is a directory) and the pattern matches the entry's
  name (``anchored`` false) or its path relative to the root without a leading slash (``anchored``
  true), with fnmatch(3) semantics in the C locale, ``FNM_PATHNAME`` when ``pathname`` is true.
  With ``globstar``, a path component of the pattern made of two or more ``*`` alone matches
  zero or more whole components of the path (one or more when it is the pattern's last), and
  the runs of other components between them match whole components with fnmatch(3) (git's
  ``**``). A rule with ``negate`` re-includes. The root itself is never excluded. Bracket
  expressions are fnmatch(3)'s, which git's matcher reads differently only where it cannot
  read them: an unterminated ``[`` is an ordinary character here and makes git's pattern match
  nothing (by design; see docs/excludes.md).
* Budgets: the direct child directories of the root are walked round-robin, one directory listing
  per turn, so no child starves the others. ``max_entries`` (0 = none) caps emitted rows (each
  entry counts once, when listed); a listing that would pass the cap is cut there. ``max_seconds``
  (0 = none) stops listing new directories once elapsed. Everything not listed because of a budget
  is emitted with flag 4 and ``partial``; ancestors are partial.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

__all__ = [
    "FLAG_BUDGET_CUT",
    "FLAG_EXCLUDED",
    "FLAG_MOUNT_POINT",
    "KIND_DIR",
    "KIND_FILE",
    "KIND_OTHER",
    "KIND_SYMLINK",
    "WALK_SCHEMA",
    "ExcludeRule",
    "WalkOptions",
    "WalkStats",
]

KIND_FILE, KIND_DIR, KIND_SYMLINK, KIND_OTHER = 0, 1, 2, 3
FLAG_EXCLUDED, FLAG_MOUNT_POINT, FLAG_BUDGET_CUT = 1, 2, 4

WALK_SCHEMA = pa.schema(
    [
        ("parent", pa.binary()),
        ("name", pa.binary()),
        ("kind", pa.uint8()),
        ("size", pa.int64()),
        ("alloc", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("inode", pa.uint64()),
        ("dev", pa.uint64()),
        ("nlink", pa.uint64()),
        ("depth", pa.int32()),
        ("tree_bytes", pa.int64()),
        ("tree_alloc", pa.int64()),
        ("tree_files", pa.int64()),
        ("tree_latest_mtime_ns", pa.int64()),
        ("partial", pa.bool_()),
        ("errno", pa.int32()),
        ("flags", pa.uint8()),
        ("ctime_ns", pa.int64()),
        ("uid", pa.uint32()),
        ("gid", pa.uint32()),
        ("mode", pa.uint32()),
    ]
)


@dataclass(frozen=True)
class ExcludeRule:
    """One translated exclude pattern (see the module docstring for how it matches)."""

    pattern: bytes
    anchored: bool = False
    dir_only: bool = False
    negate: bool = False
    pathname: bool = True
    globstar: bool = False


@dataclass(frozen=True)
class WalkOptions:
    """What to walk and how; ``root`` is an absolute, normalized path in bytes."""

    root: bytes
    one_file_system: bool = False
    excludes: tuple[ExcludeRule, ...] = ()
    skip_identities: frozenset[tuple[int, int]] = frozenset()  # (st_dev, st_ino) never descended
    skip_names: frozenset[bytes] = frozenset({b".hygiene-nb-quarantine"})
    max_entries: int = 0
    max_seconds: float = 0.0
    threads: int = 0  # 0 = the walker's default
    batch_rows: int = 16384  # smaller batches bound the walkers' buffers (peak RSS)


@dataclass
class WalkStats:
    """Counters a walker updates while it runs (read for progress, final when it ends)."""

    entries: int = 0
    errors: int = 0
    budget_cut: bool = False
    extra: dict[str, int] = field(default_factory=dict)

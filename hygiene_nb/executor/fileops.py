"""The only code in hygiene-nb that moves or removes a user's file.

Every operation is relative to directory handles and never follows a symlink. Moves use
``renameat2(RENAME_NOREPLACE)`` (a regular file may fall back to link + unlink, which can never
overwrite either); nothing here replaces an existing target. ``remove_tree`` is reachable only
from ``purge``; it never opens anything but directories and never follows a link.
``remove_original_after_verified_copy`` is reachable only from the cross-device copy
(``crossdev``), after the copy was verified, and removes only entries it was told were copied.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import secrets
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from hygiene_nb.executor.hooks import checkpoint
from hygiene_nb.executor.writers import Probe
from hygiene_nb.fs.fingerprint import DIR_FLAGS, open_dir_at, open_dirs_at
from hygiene_nb.fs.mounts import MountInside, mount_id, require_mount

__all__ = [
    "DIR_FLAGS",
    "REMOVING_PREFIX",
    "DryRunFileOps",
    "FileOps",
    "LocalFileOps",
    "RemovalRefused",
    "Verified",
    "open_dir_at",
    "open_dirs_at",
    "remove_original_after_verified_copy",
    "remove_own_empty_dir",
    "remove_own_file",
    "remove_tree",
    "replace_own_file",
]

REMOVING_PREFIX = b".hygiene-nb-removing-"  # the staging directory of an original being removed
_RENAME_NOREPLACE = 1
_LIBC = ctypes.CDLL(None, use_errno=True)
_RENAMEAT2 = getattr(_LIBC, "renameat2", None)
if _RENAMEAT2 is not None:  # pragma: no branch -- glibc 2.28 and later export renameat2
    _RENAMEAT2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    _RENAMEAT2.restype = ctypes.c_int


class FileOps(Protocol):
    """What the executor may do to files: one no-replace move, one tree removal."""

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Move ``src`` to ``dst`` (relative to the handles) unless ``dst`` exists."""
        ...

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Create a private directory (never following a link at ``name``)."""
        ...


class LocalFileOps:
    """The real thing."""

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Move without ever replacing ``dst`` (``EEXIST`` if it exists, even as a dangling link).

        Raises:
            OSError: the move failed (``EEXIST``, ``EXDEV``, ``ENOENT``, ``EPERM``…); nothing moved.
        """
        sys.audit("hygiene_nb.rename_noreplace", src_dir, src, dst_dir, dst)
        if _RENAMEAT2 is not None:
            if _RENAMEAT2(src_dir, src, dst_dir, dst, _RENAME_NOREPLACE) == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EINVAL):
                raise OSError(err, os.strerror(err), src)
        # No renameat2 here: link + unlink never overwrites, but only works for regular files.
        st = os.stat(src, dir_fd=src_dir, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ENOSYS, "no no-replace rename for directories here", src)
        os.link(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir, follow_symlinks=False)
        os.unlink(src, dir_fd=src_dir)

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Create directory ``name`` (0700); ``EEXIST`` if anything, even a link, is there."""
        os.mkdir(name, 0o700, dir_fd=dir_fd)


class DryRunFileOps:
    """Records what would be done and does nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes, bytes]] = []

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        """Record the move."""
        self.calls.append(("rename", src, dst))

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        """Record the directory."""
        self.calls.append(("mkdir", name, b""))


def remove_tree(dir_fd: int, name: bytes) -> tuple[int, int]:
    """**Destroy** ``name`` under ``dir_fd`` and everything below it (purge only).

    Directories are opened with ``O_NOFOLLOW|O_DIRECTORY``; everything else (files, links,
    fifos, sockets, devices) is unlinked by name without being opened. Every directory opened
    must be on the mount of ``dir_fd`` (mount ids, so a bind mount of the same filesystem
    counts): at another mount the removal stops before reading or removing anything under it.

    Returns:
        (entries removed, bytes of regular files removed).

    Raises:
        MountInside: a directory inside is on another mount (or it cannot be told); what was
            removed before stays removed, nothing under the mount was touched.
    """
    sys.audit("hygiene_nb.remove_tree", dir_fd, name)
    mount = mount_id(dir_fd)
    if mount is None:
        raise MountInside(name, "it cannot be told whether another filesystem is mounted there")
    return _remove_tree(dir_fd, name, mount)


def _remove_tree(dir_fd: int, name: bytes, mount: int) -> tuple[int, int]:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return 1, st.st_size if stat.S_ISREG(st.st_mode) else 0
    count = size = 0
    fd = open_dir_at(dir_fd, name)
    try:
        require_mount(fd, mount, name)  # never delete through a mount
        with os.scandir(fd) as entries:
            children = [os.fsencode(e.name) for e in entries]
        for child in children:
            removed, freed = _remove_tree(fd, child, mount)
            count += removed
            size += freed
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return count + 1, size


def replace_own_file(dir_fd: int, tmp: bytes, final: bytes) -> None:
    """Atomically put hygiene-nb's own metadata file ``tmp`` in place of ``final`` (a manifest).

    Only for files hygiene-nb wrote itself inside a batch it owns; never for user data.
    """
    os.replace(tmp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def remove_own_file(dir_fd: int, name: bytes) -> None:
    """Remove one of hygiene-nb's own files (a temp manifest that failed to write)."""
    os.unlink(name, dir_fd=dir_fd)


def remove_own_empty_dir(dir_fd: int, name: bytes) -> None:
    """Remove an empty directory hygiene-nb made (a restored batch's mirror); never non-empty."""
    os.rmdir(name, dir_fd=dir_fd)


class RemovalRefused(OSError):
    """The original was not removed: it was put back whole where it was.

    ``code`` says why: ``in-use`` (a program has a file of it open for writing, or that could
    not be told) or ``changed-since-review`` (it differs from what was verified).
    """

    def __init__(self, code: str, why: str, shown: str) -> None:
        super().__init__(errno.EBUSY if code == "in-use" else errno.ESTALE, why, shown)
        self.code = code


# (dev, inode, size, mtime_ns, ctime_ns, sha256): size and mtime are -1 for a directory; the
# digest is "" for a directory, and may be "" for a file (then its content is not read again)
Verified = tuple[int, int, int, int, int, str]
_Seen = tuple[int, int, int, int, int]  # what an entry was right after the rename into staging


def remove_original_after_verified_copy(
    dir_fd: int, name: bytes, verified: Mapping[bytes, Verified]
) -> int:
    """**Unlink** the original ``name`` under ``dir_fd`` once its copy was verified (crossdev only).

    ``verified`` maps each entry's path relative to the item (``b""`` for the item itself,
    ``b"sub/file"`` below it) to what it was when its copy was verified (``Verified``).

    The original is first renamed into a private staging directory beside it (same
    filesystem), where nobody can reach it by path. Then every entry is read again and must be
    what was verified: the same entries, identities, sizes, mtimes and ctimes (no user can set
    a ctime, so a rewrite with its mtime put back shows); the item itself, whose ctime our own
    rename changed, must still hold the verified bytes. Then, against what was read right
    after the rename, each entry is checked once more and each file for writers (a read lease,
    ``writers``); only then are files unlinked and directories removed bottom-up. Nothing is
    opened but directories and files read-only, no link is followed, and no directory on another
    mount is entered (``MountInside``).

    Returns:
        The number of entries removed.

    Raises:
        RemovalRefused: it differs from what was verified, or a file of it is (or may be) open
            for writing: it was put back where it was and nothing was removed.
        OSError: a removal failed partway; what is left was put back where it was (the
            verified copy holds all of it), or, if even that failed, stays in the staging
            directory the message names.
    """
    sys.audit("hygiene_nb.remove_original_after_verified_copy", dir_fd, name)
    shown = name.decode("utf-8", "backslashreplace")
    top = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if _seen(top) is None or not _same(_seen(top), verified.get(b""), ctime=True):
        raise RemovalRefused(
            "changed-since-review", "it changed after its copy was verified", shown
        )
    staging = REMOVING_PREFIX + secrets.token_hex(6).encode()
    os.mkdir(staging, 0o700, dir_fd=dir_fd)
    stage_fd = open_dir_at(dir_fd, staging)
    removal = _Removal(stage_fd, verified)
    try:
        if os.fstat(stage_fd).st_uid != os.geteuid():
            raise OSError(errno.EPERM, "the staging directory is not ours", staging)
        LocalFileOps().rename_noreplace(dir_fd, name, stage_fd, name)
        try:
            removal.read_after_rename(stage_fd, name, b"")
            checkpoint("during-removal")
            with Probe() as probe:
                removal.check_again(stage_fd, name, b"", probe)
                removal.remove(stage_fd, name, b"", probe)
        except BaseException as exc:
            _put_back(stage_fd, dir_fd, name, staging, exc)
            if isinstance(exc, RemovalRefused) and removal.removed:
                raise OSError(
                    exc.errno,
                    f"{exc.strerror} ({exc.filename}); {removal.removed} of its entries were "
                    "removed already and the rest was put back in its place",
                    shown,
                ) from exc
            raise
    finally:
        os.close(stage_fd)
    os.rmdir(staging, dir_fd=dir_fd)
    return removal.removed


def _put_back(stage_fd: int, dir_fd: int, name: bytes, staging: bytes, why: BaseException) -> None:
    """Move what is left of the original back to its name (never replacing anything).

    Then the (now empty) staging directory is removed.
    """
    try:
        os.stat(name, dir_fd=stage_fd, follow_symlinks=False)
        LocalFileOps().rename_noreplace(stage_fd, name, dir_fd, name)
    except FileNotFoundError:
        pass  # all of it was removed
    except OSError as exc:
        where = os.path.join(staging, name).decode("utf-8", "backslashreplace")
        raise OSError(
            exc.errno,
            f"{why}; what is left of the original could not be put back ({exc.strerror}) and "
            f"stays at {where} beside its place",
            where,
        ) from exc
    with contextlib.suppress(OSError):
        os.rmdir(staging, dir_fd=dir_fd)


def _seen(st: os.stat_result) -> _Seen | None:
    """What is compared of an entry (None for anything but a regular file or directory).

    A directory's own times are not: what it holds is compared entry by entry instead.
    """
    if stat.S_ISREG(st.st_mode):
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
    if stat.S_ISDIR(st.st_mode):
        return st.st_dev, st.st_ino, -1, -1, -1
    return None


def _same(now: _Seen | None, want: Sequence[int | str] | None, *, ctime: bool) -> bool:
    if now is None or want is None:
        return False
    is_file = now[2] != -1
    return tuple(now[:4]) == tuple(want[:4]) and (not ctime or not is_file or now[4] == want[4])


class _Removal:
    """The checks and the removal of one original in its staging directory."""

    def __init__(self, stage_fd: int, verified: Mapping[bytes, Verified]) -> None:
        self.stage_fd = stage_fd
        self.verified = verified
        self.after: dict[bytes, _Seen] = {}
        self.removed = 0

    def _changed(self, name: bytes, rel: bytes, why: str) -> RemovalRefused:
        shown = (rel or name).decode("utf-8", "backslashreplace")
        return RemovalRefused("changed-since-review", why, shown)

    def read_after_rename(self, dir_fd: int, name: bytes, rel: bytes) -> None:
        """Read every entry right after the rename; each must be what was verified."""
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        now, want = _seen(st), self.verified.get(rel)
        # our own rename changed the item's ctime: its bytes are compared instead
        if now is None or want is None or not _same(now, want, ctime=rel != b""):
            raise self._changed(name, rel, "it changed after its copy was verified")
        self.after[rel] = now
        if stat.S_ISREG(st.st_mode):
            if rel == b"" and want[5] and _sha256(dir_fd, name, now) != want[5]:
                raise self._changed(name, rel, "its bytes changed after its copy was verified")
            return
        for child, fd in _children(dir_fd, name, st):
            self.read_after_rename(fd, child, rel + b"/" + child if rel else child)
        if rel == b"" and set(self.after) != set(self.verified):
            raise self._changed(name, rel, "entries were removed after its copy was verified")

    def _recheck(self, dir_fd: int, name: bytes, rel: bytes, probe: Probe) -> os.stat_result:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if _seen(st) != self.after.get(rel):
            raise self._changed(name, rel, "it changed while it was being removed")
        if stat.S_ISREG(st.st_mode):
            why = probe.file(dir_fd, name, st)
            if why:
                shown = (rel or name).decode("utf-8", "backslashreplace")
                raise RemovalRefused("in-use", f"{why}, so its later writes would be lost", shown)
        return st

    def check_again(self, dir_fd: int, name: bytes, rel: bytes, probe: Probe) -> None:
        """Every entry is still what was read after the rename; no file is open for writing."""
        st = self._recheck(dir_fd, name, rel, probe)
        if stat.S_ISDIR(st.st_mode):
            for child, fd in _children(dir_fd, name, st):
                self.check_again(fd, child, rel + b"/" + child if rel else child, probe)

    def remove(self, dir_fd: int, name: bytes, rel: bytes, probe: Probe) -> None:
        """Unlink files and remove directories bottom-up, each checked just before."""
        st = self._recheck(dir_fd, name, rel, probe)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dir_fd)
            self.removed += 1
            checkpoint("between-unlinks")  # a run killed here leaves part of the original
            return
        for child, fd in _children(dir_fd, name, st):
            self.remove(fd, child, rel + b"/" + child if rel else child, probe)
        os.rmdir(name, dir_fd=dir_fd)  # ENOTEMPTY if anything new arrived: it stays
        self.removed += 1


def _children(dir_fd: int, name: bytes, st: os.stat_result) -> Iterator[tuple[bytes, int]]:
    """(name, handle on the directory) for each entry of directory ``name``, sorted."""
    fd = open_dir_at(dir_fd, name)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.ESTALE, "it was replaced after its copy was verified", name)
        require_mount(fd, mount_id(dir_fd), name)  # a mount that arrived is never removed
        with os.scandir(fd) as entries:
            children = sorted(os.fsencode(e.name) for e in entries)
        for child in children:
            yield child, fd
    finally:
        os.close(fd)


def _sha256(dir_fd: int, name: bytes, expect: _Seen) -> str:
    """SHA-256 of the regular file ``name`` (opened read-only, never through a link)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if _seen(os.fstat(fd)) != expect:
            return ""
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1024 * 1024):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)

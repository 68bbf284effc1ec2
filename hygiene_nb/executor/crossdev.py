"""Items on another filesystem than the store (docs/executor.md).

First choice: a quarantine directory ``.hygiene-nb-quarantine`` at the top of the item's own
mount, so that the move stays a no-replace rename (a rename never crosses a mount, not even a
bind mount of the same filesystem). The top is found by walking up from the item's parent
handle through ``..`` until the mount (its mount id, or the device) changes; the directory is
created 0700, or if it exists it must be a real directory (never a symlink) on that mount, owned
by us and closed to group and others (else ``quarantine-untrusted``).

Only when that quarantine cannot be used (not writable, read-only, not registrable) and the
person passed ``--allow-copy``, an item is copied into the store's quarantine instead: copy →
verify (count, bytes, extended attributes and ACLs, and a SHA-256 of every file, read back from
both sides) → only then unlink the original through
``fileops.remove_original_after_verified_copy`` (which refuses an original someone still
writes to, ``in-use``, or that changed since, ``changed-since-review``). A tree holding a symlink,
a hard link, a special file or a mount, or an extended attribute the copy's filesystem cannot
keep, is not verifiable and stays where it is (``copy-unverifiable``). There is never a moment
with zero copies.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from hygiene_nb.codes import texts_for
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, FileOps, Verified, open_dir_at
from hygiene_nb.executor.guards import Skip
from hygiene_nb.fs.mounts import MountInside, mount_id, require_mount

__all__ = [
    "CROSSDEV_HINTS",
    "CopyMismatch",
    "Entry",
    "QuarantineUntrusted",
    "Unverifiable",
    "VolumeQuarantine",
    "altered_modes",
    "copy_mode",
    "copy_verified",
    "crossdev_skip",
    "inventory",
    "open_volume_quarantine",
    "predict_volume_quarantine",
    "verified_identities",
    "verify_copy",
]

CROSSDEV_HINTS = texts_for("execute")  # the copy codes are among the execute codes
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024
_ACL_PREFIX = "system.posix_acl_"


def crossdev_skip(path: str, code: str, detail: str = "") -> Skip:
    """A skip with one of the ``CROSSDEV_HINTS`` codes (``detail`` first, if any)."""
    hint = CROSSDEV_HINTS[code]
    text = f"{detail}; {hint}" if detail else hint
    return Skip(path, code, text[:1].upper() + text[1:] + ".")


class QuarantineUntrusted(Exception):
    """The quarantine at the top of a filesystem exists but must not be used."""


class Unverifiable(Exception):
    """A tree whose copy could not be verified (a link, a special file, a mount)."""


class CopyMismatch(Exception):
    """The copy does not match the original, or the original changed while copying."""


@dataclass
class VolumeQuarantine:
    """An open, checked ``.hygiene-nb-quarantine`` at the top of one filesystem."""

    path: Path
    fd: int
    dev: int

    def close(self) -> None:
        """Close its directory handle."""
        os.close(self.fd)


def _top_of_filesystem(parent_fd: int) -> tuple[int, int]:
    """(a handle on the top directory of ``parent_fd``'s mount, levels climbed).

    Raises:
        MountInside: the mount of a directory on the way cannot be told.
    """
    fd = os.dup(parent_fd)
    levels = 0
    try:
        mount = mount_id(fd)
        if mount is None:
            raise MountInside(b".", "it cannot be told which mount it is on")
        while True:
            here = os.fstat(fd)
            up = os.open(b"..", DIR_FLAGS, dir_fd=fd)
            there = os.fstat(up)
            if there.st_dev != here.st_dev or there.st_ino == here.st_ino or mount_id(up) != mount:
                os.close(up)
                return fd, levels
            os.close(fd)
            fd = up
            levels += 1
    except BaseException:
        os.close(fd)
        raise


def open_volume_quarantine(parent_fd: int, parent_path: bytes, ops: FileOps) -> VolumeQuarantine:
    """Open (creating it 0700 if absent) the quarantine at the top of ``parent_fd``'s filesystem.

    ``parent_path`` is the absolute path of ``parent_fd`` (reached from the plan's root without
    following a link); the quarantine's path is derived from it and checked against the handle.

    Raises:
        QuarantineUntrusted: it exists but is a symlink, not a directory, not on that
            filesystem, not ours or open to group or others; or the top is writable by others
            without the sticky bit; or its path does not lead to it.
        OSError: it cannot be created or opened (read-only, no permission…): unusable.
    """
    path, qfd, top = _volume_quarantine(parent_fd, parent_path, ops)
    assert qfd is not None  # with ops, it exists now or OSError was raised
    return VolumeQuarantine(path, qfd, top.st_dev)


def predict_volume_quarantine(parent_fd: int, parent_path: bytes) -> Path:
    """Where ``open_volume_quarantine`` would put an item, found without changing anything.

    For the dry run: the quarantine at the top of ``parent_fd``'s filesystem, if it exists and
    is trusted, or if it could be created there (the top is writable by us on a writable
    filesystem).

    Raises:
        QuarantineUntrusted: as ``open_volume_quarantine`` would.
        OSError: no batch could be made there (``EROFS``, ``EACCES``).
    """
    path, qfd, _ = _volume_quarantine(parent_fd, parent_path, None)
    if qfd is not None:
        os.close(qfd)
    return path


def _volume_quarantine(
    parent_fd: int, parent_path: bytes, ops: FileOps | None
) -> tuple[Path, int | None, os.stat_result]:
    """(path, handle, the top's stat) of the quarantine at the top of the filesystem.

    With ``ops`` None nothing is changed, and a missing quarantine that could be made gives no
    handle.
    """
    top_fd, levels = _top_of_filesystem(parent_fd)
    try:
        top = os.fstat(top_fd)
        top_mount = mount_id(top_fd)
        top_path = parent_path
        for _ in range(levels):
            top_path = os.path.dirname(top_path)
        if top.st_mode & 0o002 and not top.st_mode & stat.S_ISVTX:
            raise QuarantineUntrusted(f"{os.fsdecode(top_path)} is writable by anyone, not sticky")
        name = QUARANTINE_NAME.encode()
        path = Path(os.fsdecode(os.path.join(top_path, name)))
        if ops is not None:
            with contextlib.suppress(FileExistsError):
                ops.make_dir(top_fd, name)
        elif os.fstatvfs(top_fd).f_flag & os.ST_RDONLY:  # no batch could be made in it
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        try:
            qfd = open_dir_at(top_fd, name)
        except FileNotFoundError:
            if ops is not None:
                raise
            if not os.access(".", os.W_OK | os.X_OK, dir_fd=top_fd, effective_ids=True):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), path) from None
            return path, None, top
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise QuarantineUntrusted(
                    f"{QUARANTINE_NAME} is a symlink or not a directory"
                ) from exc
            raise
    finally:
        os.close(top_fd)
    try:
        _check_quarantine(qfd, top, path, top_mount)
        if ops is None and not os.access(".", os.W_OK | os.X_OK, dir_fd=qfd, effective_ids=True):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)  # no batch fits in
    except BaseException:
        os.close(qfd)
        raise
    return path, qfd, top


def _check_quarantine(qfd: int, top: os.stat_result, path: Path, top_mount: int | None) -> None:
    st = os.fstat(qfd)
    if st.st_dev != top.st_dev or top_mount is None or mount_id(qfd) != top_mount:
        raise QuarantineUntrusted(f"{path} is on another filesystem or mount than its top")
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise QuarantineUntrusted(f"{path} is not owned by you or is open to group or others")
    try:
        by_path = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        raise QuarantineUntrusted(f"{path} cannot be reached by its path ({exc.strerror})") from exc
    if (by_path.st_dev, by_path.st_ino) != (st.st_dev, st.st_ino):
        raise QuarantineUntrusted(f"{path} does not lead to the quarantine that was opened")


@dataclass(frozen=True)
class Entry:
    """One entry of a tree to copy: kind, identity, size, times, permission bits, owner, xattrs.

    ``xattrs`` are its extended attributes (``user.*``, ``security.*``, ``trusted.*`` and the
    ACLs, ``system.posix_acl_access``/``_default``) as sorted (name, value) pairs; ``digest`` is
    the SHA-256 of a file's bytes once a copy of it was verified ("" before).
    """

    is_dir: bool
    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    uid: int = -1
    gid: int = -1
    ctime_ns: int = -1
    xattrs: tuple[tuple[str, bytes], ...] = ()
    digest: str = ""


def inventory(dir_fd: int, name: bytes, dev: int) -> dict[bytes, Entry]:
    """Every entry of ``name`` (``b""``) and below it (``b"a/b"``), by lstat only.

    Raises:
        Unverifiable: a symlink, special file, hard-linked file or other filesystem inside,
            or a directory on another mount than ``dir_fd`` (a bind mount counts).
        OSError: it cannot be read.
    """
    out: dict[bytes, Entry] = {}
    _inventory(dir_fd, name, b"", dev, out)
    return out


def _inventory(dir_fd: int, name: bytes, rel: bytes, dev: int, out: dict[bytes, Entry]) -> None:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    shown = (rel or name).decode("utf-8", "backslashreplace")
    if stat.S_ISLNK(st.st_mode):
        raise Unverifiable(f"{shown} is a symlink")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise Unverifiable(f"{shown} is a special file")
    if st.st_dev != dev:
        raise Unverifiable(f"{shown} is on another filesystem")
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise Unverifiable(f"{shown} has {st.st_nlink} hard links")
    if st.st_uid != os.geteuid() and os.geteuid() != 0:
        # only root can give a copy its owner back; a copy owned by us would lock them out
        raise Unverifiable(f"{shown} belongs to another user")
    is_dir = stat.S_ISDIR(st.st_mode)
    out[rel] = Entry(
        is_dir=is_dir,
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size if not is_dir else -1,
        mtime_ns=st.st_mtime_ns if not is_dir else -1,
        mode=stat.S_IMODE(st.st_mode),
        uid=st.st_uid,
        gid=st.st_gid,
        ctime_ns=st.st_ctime_ns,
        xattrs=_xattrs(dir_fd, name, shown),
    )
    if not is_dir:
        return
    fd = open_dir_at(dir_fd, name)
    try:
        try:
            require_mount(fd, mount_id(dir_fd), name)  # the same mount all the way down
        except MountInside as exc:
            raise Unverifiable(f"{shown} is a mount point ({exc.strerror})") from exc
        with os.scandir(fd) as entries:
            children = sorted(os.fsencode(e.name) for e in entries)
        for child in children:
            _inventory(fd, child, rel + b"/" + child if rel else child, dev, out)
    finally:
        os.close(fd)


def _xattrs(dir_fd: int, name: bytes, shown: str) -> tuple[tuple[str, bytes], ...]:
    """Every extended attribute of ``name`` under ``dir_fd`` (no link followed), sorted.

    Read through ``/proc/self/fd`` so that nothing needs to be opened (a link is never followed:
    the last component is looked up with ``follow_symlinks=False``).

    Raises:
        Unverifiable: they cannot be read (then a copy could not be shown to keep them).
    """
    path = os.fsencode(f"/proc/self/fd/{dir_fd}/") + name
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return tuple(sorted((n, os.getxattr(path, n, follow_symlinks=False)) for n in names))
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return ()  # a filesystem without extended attributes: the entry has none
        raise Unverifiable(
            f"the extended attributes of {shown} cannot be read ({exc.strerror})"
        ) from exc


def _set_xattrs(fd: int, entry: Entry, shown: str, *, acls: bool) -> None:
    """Give the copy open at ``fd`` the original's extended attributes: ACLs, or all others.

    With ``acls`` the ACLs, else all the others. The others go first, while the copy is still
    writable by us (``user.*`` needs that); the ACLs last, after its mode (an ACL sets the mode
    bits it implies, and a chmod afterwards would rewrite the ACL).

    Raises:
        Unverifiable: one cannot be kept on this filesystem (not supported, not permitted,
            too large): the copy would silently lose it, so it is refused.
    """
    for attr, value in entry.xattrs:
        if attr.startswith(_ACL_PREFIX) != acls:
            continue
        try:
            os.setxattr(fd, attr, value)
        except OSError as exc:
            raise Unverifiable(
                f"{shown} has the extended attribute {attr}, which its copy cannot keep on the "
                f"other filesystem ({exc.strerror})"
            ) from exc


def copy_mode(entry: Entry) -> int:
    """The permission bits a copy gets.

    The entry's own, never setuid or setgid, and enough for its owner to verify it (read a
    file; list, enter and fill a directory).
    """
    if entry.is_dir:
        return (entry.mode & 0o1777) | 0o700
    return (entry.mode & 0o777) | 0o400


def altered_modes(entries: dict[bytes, Entry]) -> list[list[str | int]]:
    """``[relative path (base64), original mode]`` of every entry whose copy has other bits.

    Kept in the manifest so that a restore by copy gives them back (a read-only directory,
    a setgid one).
    """
    return [
        [base64.b64encode(rel).decode("ascii"), e.mode]
        for rel, e in sorted(entries.items())
        if copy_mode(e) != e.mode
    ]


def verified_identities(entries: dict[bytes, Entry]) -> dict[bytes, Verified]:
    """What ``remove_original_after_verified_copy`` checks each original entry against."""
    return {
        rel: (e.dev, e.ino, e.size, e.mtime_ns, e.ctime_ns, e.digest) for rel, e in entries.items()
    }


def copy_verified(
    src_dir: int,
    name: bytes,
    dst_dir: int,
    planned: dict[bytes, Entry],
    ops: FileOps,
    *,
    dst_name: bytes | None = None,
    modes: dict[bytes, int] | None = None,
) -> dict[bytes, Entry]:
    """Copy ``name`` from ``src_dir`` into ``dst_dir`` (never replacing anything), then verify.

    The copy is named ``dst_name``, by default ``name``. Its entries get ``copy_mode`` bits,
    or the bits ``modes`` gives for their relative path (a restore giving back what the copy
    into quarantine had to change); either way through the handle that created them, never
    by path.

    ``planned`` is the original's inventory taken just before. Verification re-reads both
    sides: the original must be unchanged (same entries, identities, sizes, mtimes), the copy
    must hold the same entries, the same number of files and bytes, and every file the same
    SHA-256. Nothing of the original is touched here.

    Returns:
        The original's inventory as verified (for the removal of the original).

    Raises:
        CopyMismatch: the copy differs or the original changed (the partial copy stays).
        Unverifiable: the original now holds a link, special file or mount.
        OSError: the copy could not be made (the partial copy stays).
    """
    target = dst_name or name
    _copy(src_dir, name, dst_dir, b"", planned, _children(planned), ops, target, modes or {})
    os.fsync(dst_dir)
    return verify_copy(src_dir, name, dst_dir, target, planned)


def verify_copy(
    src_dir: int, name: bytes, dst_dir: int, dst_name: bytes, planned: dict[bytes, Entry]
) -> dict[bytes, Entry]:
    """Check that ``dst_name`` in ``dst_dir`` is a whole copy of ``name`` in ``src_dir``.

    The original must still match ``planned``; the copy must hold the same entries, the same
    number of bytes and every file the same SHA-256. Read-only.

    Returns:
        The original's inventory as verified.

    Raises:
        CopyMismatch, Unverifiable, OSError: as ``copy_verified``.
    """
    dev = planned[b""].dev
    now = inventory(src_dir, name, dev)
    if now != planned:
        raise CopyMismatch("the original changed while it was copied")
    copied = inventory(dst_dir, dst_name, os.fstat(dst_dir).st_dev)
    if set(copied) != set(now) or any(copied[r].is_dir != now[r].is_dir for r in now):
        raise CopyMismatch("the copy does not hold the same entries")
    for rel, entry in now.items():
        if copied[rel].xattrs != entry.xattrs:
            shown = (rel or name).decode("utf-8", "backslashreplace")
            lost = sorted({a for a, _ in entry.xattrs} ^ {a for a, _ in copied[rel].xattrs})
            which = ", ".join(lost) or "their values differ"
            raise Unverifiable(
                f"the extended attributes of {shown} could not be kept by its copy ({which})"
            )
    files = [r for r, e in now.items() if not e.is_dir]
    if sum(now[r].size for r in files) != sum(copied[r].size for r in files):
        raise CopyMismatch("the copy does not hold the same number of bytes")
    for rel in files:
        digest = _hash(src_dir, name, rel)
        if digest != _hash(dst_dir, dst_name, rel):
            shown = (rel or name).decode("utf-8", "backslashreplace")
            raise CopyMismatch(f"{shown} differs from its copy")
        now[rel] = replace(now[rel], digest=digest)
    return now


def _children(planned: dict[bytes, Entry]) -> dict[bytes, list[bytes]]:
    """Each directory's entries (by relative path) as names, sorted."""
    kids: dict[bytes, list[bytes]] = {rel: [] for rel, e in planned.items() if e.is_dir}
    for rel in sorted(planned):
        if rel:
            head, _, tail = rel.rpartition(b"/")
            kids[head].append(tail)
    return kids


def _mode_for(entry: Entry, rel: bytes, modes: dict[bytes, int]) -> int:
    if rel not in modes:
        return copy_mode(entry)
    # the recorded original bits; as another user than root, still enough to verify the copy
    return modes[rel] | (0 if os.geteuid() == 0 else 0o500 if entry.is_dir else 0o400)


def _copy(
    src_dir: int,
    name: bytes,
    dst_dir: int,
    rel: bytes,
    planned: dict[bytes, Entry],
    kids: dict[bytes, list[bytes]],
    ops: FileOps,
    dst_name: bytes,
    modes: dict[bytes, int],
) -> None:
    entry = planned[rel]
    if not entry.is_dir:
        _copy_file(src_dir, name, dst_dir, entry, dst_name, _mode_for(entry, rel, modes))
        return
    ops.make_dir(dst_dir, dst_name)  # EEXIST if anything is there: never merged into
    src = open_dir_at(src_dir, name)
    try:
        dst = open_dir_at(dst_dir, dst_name)
        try:
            opened = os.fstat(src)
            if (opened.st_dev, opened.st_ino) != (entry.dev, entry.ino):
                raise CopyMismatch("a directory was replaced while it was copied")
            try:
                require_mount(src, mount_id(src_dir), name)
            except MountInside as exc:
                raise Unverifiable(f"{os.fsdecode(name)} is a mount point now") from exc
            for child in kids[rel]:
                _copy(
                    src,
                    child,
                    dst,
                    rel + b"/" + child if rel else child,
                    planned,
                    kids,
                    ops,
                    child,
                    modes,
                )
            if os.geteuid() == 0:
                os.fchown(dst, entry.uid, entry.gid)  # before chmod: chown clears mode bits
            shown = (rel or name).decode("utf-8", "backslashreplace")
            _set_xattrs(dst, entry, shown, acls=False)
            os.chmod(dst, _mode_for(entry, rel, modes))  # through the handle
            _set_xattrs(dst, entry, shown, acls=True)
            os.fsync(dst)
            src_st = os.fstat(src)
            os.utime(dst, ns=(src_st.st_atime_ns, src_st.st_mtime_ns))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_file(
    src_dir: int, name: bytes, dst_dir: int, entry: Entry, dst_name: bytes, mode: int
) -> None:
    src = os.open(name, _READ_FLAGS, dir_fd=src_dir)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (entry.dev, entry.ino):
            raise CopyMismatch("a file was replaced while it was copied")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(dst_name, flags, 0o600, dir_fd=dst_dir)
        try:
            while chunk := os.read(src, _CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
            if os.geteuid() == 0:
                os.fchown(dst, entry.uid, entry.gid)  # its owner, as restore gives it back
            shown = name.decode("utf-8", "backslashreplace")
            _set_xattrs(dst, entry, shown, acls=False)
            os.fchmod(dst, mode)  # after fchown, which would clear setuid/setgid
            _set_xattrs(dst, entry, shown, acls=True)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _hash(dir_fd: int, name: bytes, rel: bytes) -> str:
    """SHA-256 of the regular file ``name/rel`` below ``dir_fd`` (no link followed)."""
    parts = [name, *rel.split(b"/")] if rel else [name]
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = open_dir_at(fd, part)
            os.close(fd)
            fd = nxt
        handle = os.open(parts[-1], _READ_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise CopyMismatch("not a regular file")
        while chunk := os.read(handle, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(handle)
    return digest.hexdigest()

"""Items on another filesystem, copied into the store's quarantine and verified (docs/executor.md).

Only when the quarantine at the top of the item's own filesystem (``volume``) cannot be used
(not writable, read-only, not registrable) and the person passed ``--allow-copy``, an item is
copied into the store's quarantine instead: copy → verify (count, bytes, extended attributes and
ACLs, and a SHA-256 of every file, read back from both sides) → only then unlink the original
through ``fileops.remove_original_after_verified_copy`` (which refuses an original someone still
writes to, ``in-use``, or that changed since, ``changed-since-review``). A tree holding a
symlink, a hard link, a special file or a mount (``inventory``), or an extended attribute the
copy's filesystem cannot keep, is not verifiable and stays where it is (``copy-unverifiable``).
There is never a moment with zero copies.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from dataclasses import replace

from hygiene_nb.codes import texts_for
from hygiene_nb.executor.fileops import FileOps, Verified, open_dir_at
from hygiene_nb.executor.guards import Skip
from hygiene_nb.executor.inventory import Entry, Unverifiable, inventory
from hygiene_nb.fs.mounts import MountInside, mount_id, require_mount

__all__ = [
    "CROSSDEV_HINTS",
    "CopyMismatch",
    "altered_modes",
    "copy_mode",
    "copy_verified",
    "crossdev_skip",
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


class CopyMismatch(Exception):
    """The copy does not match the original, or the original changed while copying."""


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

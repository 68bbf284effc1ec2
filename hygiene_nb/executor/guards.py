"""Per-candidate re-checks at the moment of acting: is it still exactly what the plan described?

Every check reaches the candidate from the root's handle one component at a time with no
symlink followed, and ends with an open handle on its parent for the move. A failed check is a
``Skip`` value with a stable code (the other candidates go on), never an exception.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hygiene_nb.codes import texts_for
from hygiene_nb.executor.fileops import open_dirs_at
from hygiene_nb.fingerprint import (
    Entry,
    Fingerprint,
    SymlinkOnPath,
    fingerprint,
    kind_of_mode,
    signed64,
    walk_subtree,
)
from hygiene_nb.mounts import MountInside, mount_id, mount_id_at, mounted_inside
from hygiene_nb.protect import (
    CREDENTIAL_DIRS,
    CREDENTIAL_EXTENSIONS,
    CREDENTIAL_FILES,
    CREDENTIAL_PREFIXES,
    KEEP_MARKER,
    VCS_DIRS,
    ProtectContext,
    Protection,
    account_homes,
    find_git_tracked,
    protect_dir,
    protect_file,
    protection_above,
)

__all__ = ["SKIP_HINTS", "Skip", "acting_protection", "check_candidate"]

SKIP_HINTS = texts_for("execute")  # code → what it means and what to do (``codes``)


@dataclass(frozen=True)
class Skip:
    """A candidate that was not moved: why, and what to do next."""

    path: str
    code: str
    message: str

    @classmethod
    def of(cls, path: str, code: str, detail: str = "") -> Skip:
        """A skip whose message is ``detail`` (if any) and the code's next step."""
        hint = SKIP_HINTS[code]
        text = f"{detail}; {hint}" if detail else hint
        return cls(path, code, text[:1].upper() + text[1:] + ".")


def _protected_name(name: bytes, is_dir: bool) -> bool:
    text = os.fsdecode(name)
    if text in VCS_DIRS or text == KEEP_MARKER:
        return True
    if is_dir:
        return text in CREDENTIAL_DIRS
    return (
        text in CREDENTIAL_FILES
        or text.startswith(CREDENTIAL_PREFIXES)
        or text.lower().endswith(CREDENTIAL_EXTENSIONS)
    )


@dataclass
class GitCache:
    """Tracked files of the git work trees met while checking (asked once per tree)."""

    tracked: dict[str, frozenset[str] | None]

    def is_tracked_or_unknown(self, tree: str, paths: list[str]) -> bool:
        """Whether git tracks any of ``paths`` in ``tree`` (True when git cannot tell)."""
        if tree not in self.tracked:
            info = find_git_tracked([tree])
            self.tracked[tree] = None if info.unreadable else info.tracked
        known = self.tracked[tree]
        return known is None or any(p in known for p in paths)


def _above(path: bytes) -> tuple[str | None, str | None]:
    """(keep-marker directory, enclosing git work tree) found above ``path`` on disk."""
    directory = os.path.dirname(path)
    tree = None
    while True:
        if os.path.lexists(os.path.join(directory, KEEP_MARKER.encode())):
            return os.fsdecode(directory), tree
        if tree is None and os.path.lexists(os.path.join(directory, b".git")):
            tree = directory.decode("utf-8", "backslashreplace")
        parent = os.path.dirname(directory)
        if parent == directory:
            return None, tree
        directory = parent


def acting_protection(root: str, homes: Iterable[str] = ()) -> ProtectContext:
    """What protection knows at the moment of acting, whatever a plan or the ledger says.

    The homes are yours (``$HOME``, links resolved), every account's home in or around
    ``root``, and ``homes`` (the store's ``config.toml`` names them), as at plan time.
    """
    home = os.path.realpath(os.path.expanduser("~"))
    named = frozenset(os.path.realpath(h) for h in homes)
    return ProtectContext("", home, "", other_homes=account_homes(root) | named)


def _protection_now(
    raw: bytes, is_dir: bool, entries: list[Entry],
    ctx: ProtectContext,
) -> Protection | None:  # fmt: skip
    """What protects the item now: something above it, its own name and place, or inside it.

    The rules are protection's own (``hygiene_nb.protect``): configuration in a home (a home's
    dot-files, ``~/.config``), keys, VCS data, keep markers, system directories.
    """
    path = raw.decode("utf-8", "backslashreplace")  # as snapshot paths and homes are written
    found = protection_above(os.path.dirname(path), ctx)
    if found is not None:
        return found
    found = _protected_entry(path, is_dir, ctx)
    for rel, kind, *_ in entries:
        if found is not None:
            break
        inside = f"{path}/{rel.decode('utf-8', 'backslashreplace')}"
        found = _protected_entry(inside, kind == "dir", ctx)
    return found


def _protected_entry(path: str, is_dir: bool, ctx: ProtectContext) -> Protection | None:
    parent, name = os.path.split(path)
    return protect_dir(path, name, ctx) if is_dir else protect_file(name, parent, ctx)


def check_candidate(
    root_fd: int,
    root: bytes,
    cand: dict[str, Any],
    raw: bytes,
    git: GitCache,
    protect: ProtectContext | None = None,
) -> tuple[int, Skip | None]:
    """Re-check one candidate; return (a handle on its parent, or -1) and a skip, if any.

    The caller closes the handle. Checks: a person or a remembered rule decided it (never an
    agent); no symlink on the way; no mount on it or inside it (``contains-mount``); same kind,
    device, inode, size, mtime and ctime; a directory's subtree fingerprint; not protected now
    (names inside, a keep marker or git tracking above, a home's configuration by ``protect``,
    which defaults to ``acting_protection`` of the root); not a symlink or special file.
    """
    path = cand["path"]
    if cand.get("decided_by") not in ("human", "rule"):  # whatever registered the plan
        return -1, Skip.of(path, "decided-by-agent", f"decided_by is {cand.get('decided_by')!r}")
    if protect is None:
        protect = acting_protection(os.fsdecode(root))
    rel = raw[len(root) :].strip(b"/").split(b"/")
    try:
        parent = open_dirs_at(root_fd, rel[:-1])
    except OSError as exc:
        return -1, _skip_for_oserror(path, exc)
    try:
        skip = _check_at(parent, rel[-1], root, raw, cand, git, protect)
    except OSError as exc:
        skip = _skip_for_oserror(path, exc)
    if skip is not None:
        os.close(parent)
        return -1, skip
    return parent, None


def _skip_for_oserror(path: str, exc: OSError) -> Skip:
    if isinstance(exc, MountInside):
        return Skip.of(path, "contains-mount", f"{exc.filename}: {exc.strerror}")
    if isinstance(exc, SymlinkOnPath) or exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Skip.of(path, "symlink-on-path")
    if exc.errno == errno.ENOENT:
        return Skip.of(path, "gone")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Skip.of(path, "permission-denied")
    return Skip.of(path, "changed-since-plan", exc.strerror or "it could not be read")


def _check_at(
    parent: int,
    name: bytes,
    root: bytes,
    raw: bytes,
    cand: dict[str, Any],
    git: GitCache,
    protect: ProtectContext,
) -> Skip | None:
    path = cand["path"]
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    mode = st.st_mode
    mounted = _mount_on_or_in(parent, name, stat.S_ISDIR(mode))
    if mounted:
        return Skip.of(path, "contains-mount", mounted)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        return Skip.of(path, "special-file")
    now = (kind_of_mode(mode), signed64(st.st_dev), signed64(st.st_ino), st.st_size,
           st.st_mtime_ns, st.st_ctime_ns)  # fmt: skip
    then = (cand["kind"], cand["dev"], cand["inode"], cand["size"], cand["mtime_ns"],
            cand["ctime_ns"])  # fmt: skip
    if now != then:
        return Skip.of(path, "changed-since-plan", _difference(then, now))
    entries: list[Entry] = []
    if stat.S_ISDIR(mode):
        entries = walk_subtree(root, raw, expect=(st.st_dev, st.st_ino))
        fresh = fingerprint(entries)
        planned = Fingerprint(**cand["fingerprint"])
        if fresh != planned:
            return Skip.of(path, "changed-since-plan", "its contents changed")
    if _protected_name(name, stat.S_ISDIR(mode)) or any(
        _protected_name(e[0].rsplit(b"/", 1)[-1], e[1] == "dir") for e in entries
    ):
        return Skip.of(path, "now-protected", "it holds keys, VCS data or a keep marker")
    found = _protection_now(raw, stat.S_ISDIR(mode), entries, protect)
    if found is not None:
        return Skip.of(path, "now-protected", f"{found.claim} ({found.rule})")
    keep, tree = _above(raw)
    if keep is not None:
        return Skip.of(path, "now-protected", f"{keep} holds a {KEEP_MARKER} marker")
    if tree is not None:
        below = [e[0].decode("utf-8", "backslashreplace") for e in entries if e[1] == "file"]
        inside = [path] + [f"{path}/{rel}" for rel in below]
        if git.is_tracked_or_unknown(tree, inside):
            return Skip.of(path, "now-protected", f"git in {tree} tracks it (or cannot tell)")
    return None


def _mount_on_or_in(parent: int, name: bytes, is_dir: bool) -> str:
    """Why ``name`` is (or may be) a mount point or hold one; "" when it is not.

    By mount id for the entry itself; for a directory also from the mount table (a file
    bind-mounted inside). The subtree walk checks the mount id of every directory it opens.
    """
    here, there = mount_id(parent), mount_id_at(parent, name)
    if here is None or there is None:
        return "it cannot be told whether it is a mount point"
    if here != there:
        return "it is a mount point"
    return mounted_inside(parent, name) if is_dir else ""


def _difference(then: tuple[Any, ...], now: tuple[Any, ...]) -> str:
    names = ("kind", "device", "inode", "size", "mtime", "ctime")
    return ", ".join(f"{n} {a} → {b}" for n, a, b in zip(names, then, now, strict=True) if a != b)

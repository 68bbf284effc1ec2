"""The one re-check: is an entry on disk still exactly what was reviewed, and may it go?

``hygiene-nb plan`` re-checks every candidate against the disk before it writes the plan, and
the executor re-checks every candidate again at the moment of acting. Both ask the same
questions, in this order, and answer with the same codes (``hygiene_nb.codes``, stage
``check``):

1. It is reached from the root's handle one component at a time, never through a symlink
   (``symlink-on-path``); it is still there (``gone``) and can be read (``permission-denied``,
   ``unreadable-now``).
2. It is no mount point and holds none, by mount id and from the mount table, so a bind mount
   of the same filesystem counts and "cannot tell" counts too (``contains-mount``).
3. It is a file, a directory or a symlink, not a fifo, socket or device (``special-file``).
4. Kind, device, inode, size, mtime and ctime are the reviewed ones, and a directory's subtree
   fingerprint is the reviewed one (``changed-since-review``). ctime is what no user can set,
   so a rewrite with its mtime put back is seen.
5. Nothing protects it now (``now-protected``): keys, VCS data or a keep marker inside it
   (a key-like name such as ``*.pem`` only outside a dependency or build directory whose
   evidence stands beside it, as regular files, now),
   protection's own rules (a home's configuration, system directories) at the moment of
   asking, a keep marker above it, or git tracking it above (or git unable to tell).

Reading here is read-only. A failed check is a ``Finding``, never an exception.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from hygiene_nb.classify.protect import (
    CREDENTIAL_DIRS,
    KEEP_MARKERS,
    VCS_DIRS,
    ProtectContext,
    Protection,
    account_homes,
    credential_name,
    find_git_tracked,
    key_like,
    protect_dir,
    protect_file,
    protection_above,
)
from hygiene_nb.classify.rules import (
    PACKAGE_RULES,
    dir_rule,
    evidence_present,
    is_manifest,
    tag_outranks,
)
from hygiene_nb.fs.cachedir_tag import TAG_NAME, read_tag
from hygiene_nb.fs.fingerprint import (
    DIR_FLAGS,
    Entry,
    Fingerprint,
    SymlinkOnPath,
    fingerprint,
    kind_of_mode,
    open_dir_at,
    open_dirs_at,
    signed64,
    walk_subtree_at,
)
from hygiene_nb.fs.mounts import MountInside, mount_id, mount_id_at, mounted_inside

__all__ = [
    "CheckCode",
    "Finding",
    "GitCache",
    "Rechecker",
    "Reviewed",
    "acting_protection",
]

CheckCode = Literal[
    "gone",
    "symlink-on-path",
    "permission-denied",
    "unreadable-now",
    "contains-mount",
    "special-file",
    "changed-since-review",
    "now-protected",
]


@dataclass(frozen=True)
class Reviewed:
    """What was reviewed of one entry: the values the disk must still show.

    ``fingerprint`` is the directory's subtree fingerprint (None for a file).
    """

    path: str
    raw: bytes
    kind: str
    dev: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    fingerprint: Fingerprint | None = None


@dataclass(frozen=True)
class Finding:
    r"""Why an entry must stay: a code of the ``check`` stage and what was seen.

    A path in ``detail`` shows a byte that is not UTF-8 as ``\xNN``, as snapshot paths do, so
    that a plan or a receipt can hold it (a name decoded with ``os.fsdecode`` could not be
    written as UTF-8).
    """

    code: CheckCode
    detail: str = ""

    def __post_init__(self) -> None:
        shown = os.fsencode(self.detail).decode("utf-8", "backslashreplace")
        object.__setattr__(self, "detail", shown)


@dataclass
class GitCache:
    """Tracked files of the git work trees met while checking (asked once per tree)."""

    tracked: dict[str, frozenset[str] | None] = field(default_factory=dict)

    def is_tracked_or_unknown(self, tree: str, paths: list[str]) -> bool:
        """Whether git tracks any of ``paths`` in ``tree`` (True when git cannot tell)."""
        if tree not in self.tracked:
            info = find_git_tracked([tree])
            self.tracked[tree] = None if info.unreadable else info.tracked
        known = self.tracked[tree]
        return known is None or any(p in known for p in paths)


def acting_protection(root: str, homes: Iterable[str] = ()) -> ProtectContext:
    """What protection knows at the moment of asking, whatever a plan or the ledger says.

    The homes are yours (``$HOME``, links resolved), every account's home in or around
    ``root``, and ``homes`` (the store's ``config.toml`` names them).
    """
    home = os.path.realpath(os.path.expanduser("~"))
    named = frozenset(os.path.realpath(h) for h in homes)
    return ProtectContext("", home, "", other_homes=account_homes(root) | named)


class Rechecker:
    """Re-checks of the entries below one root, from one handle on it.

    Args:
        root: the root's path (as the plan records it).
        protect: what protection knows (defaults to ``acting_protection(root)``).

    Raises:
        OSError: the root cannot be opened (the caller checked it is the scanned root).
    """

    def __init__(self, root: str, protect: ProtectContext | None = None) -> None:
        self.root = os.fsencode(root)
        self.protect = protect if protect is not None else acting_protection(root)
        self.git = GitCache()
        self.fd = os.open(self.root, DIR_FLAGS)

    def close(self) -> None:
        """Close the root's handle."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Rechecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self, item: Reviewed) -> Finding | None:
        """Re-check ``item``; None when it is exactly what was reviewed and nothing protects it."""
        parent, found = self.reach(item)
        if parent >= 0:
            os.close(parent)
        return found

    def reach(self, item: Reviewed) -> tuple[int, Finding | None]:
        """Re-check ``item``; return (a handle on its parent, or -1) and a finding, if any.

        On success the caller owns (and closes) the handle it acts through, so nothing between
        this check and the act can swap a directory on the way.
        """
        rel = item.raw[len(self.root) :].strip(b"/").split(b"/")
        try:
            parent = open_dirs_at(self.fd, rel[:-1])
        except OSError as exc:
            return -1, finding_for_oserror(exc)
        try:
            found = self._check_at(parent, rel, item)
        except OSError as exc:
            found = finding_for_oserror(exc)
        if found is not None:
            os.close(parent)
            return -1, found
        return parent, None

    def _check_at(self, parent: int, rel: list[bytes], item: Reviewed) -> Finding | None:
        name = rel[-1]
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        mode = st.st_mode
        is_dir = stat.S_ISDIR(mode)
        mounted = _mount_on_or_in(parent, name, is_dir)
        if mounted:
            return Finding("contains-mount", mounted)
        if not (stat.S_ISREG(mode) or is_dir or stat.S_ISLNK(mode)):
            return Finding("special-file")
        now = (
            kind_of_mode(mode),
            signed64(st.st_dev),
            signed64(st.st_ino),
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        )
        then = (item.kind, item.dev, item.inode, item.size, item.mtime_ns, item.ctime_ns)
        if now != then:
            return Finding("changed-since-review", _difference(then, now))
        entries: list[Entry] = []
        if is_dir:
            entries = walk_subtree_at(parent, name, expect=(st.st_dev, st.st_ino))
            found = _contents_differ(item.fingerprint, fingerprint(entries))
            if found is not None:
                return found
        packaged, manifests = self._packaged(parent, rel, is_dir, entries)
        if manifests:  # classification protects them in a project: here, project or not
            return Finding("now-protected", "it holds a project's manifest or lockfile")
        return self._protected(name, is_dir, item, entries, packaged)

    def _protected(
        self,
        name: bytes,
        is_dir: bool,
        item: Reviewed,
        entries: list[Entry],
        packaged: frozenset[bytes],
    ) -> Finding | None:
        if _protected_name(name, is_dir, b"" in packaged) or any(
            _protected_name(e[0].rsplit(b"/", 1)[-1], e[1] == "dir", e[0] in packaged)
            for e in entries
        ):
            return Finding("now-protected", "it holds keys, VCS data or a keep marker")
        found = _protection_now(item.raw, is_dir, entries, self.protect, packaged)
        if found is not None:
            return Finding("now-protected", f"{found.claim} ({found.rule})")
        keep, tree = _above(item.raw)
        if keep is not None:
            held = [m for m in KEEP_MARKERS if os.path.lexists(os.path.join(keep, m))]
            return Finding("now-protected", f"{keep} holds a {held[0] if held else 'keep'} marker")
        if tree is not None:
            # every non-directory git may track: files and symlinks alike
            below = [e[0].decode("utf-8", "backslashreplace") for e in entries if e[1] != "dir"]
            inside = [item.path] + [f"{item.path}/{rel}" for rel in below]
            if self.git.is_tracked_or_unknown(tree, inside):
                return Finding("now-protected", f"git in {tree} tracks it (or cannot tell)")
        return None

    def _packaged(
        self, parent: int, rel: list[bytes], is_dir: bool, entries: list[Entry]
    ) -> tuple[frozenset[bytes], list[bytes]]:
        """Where the item's key-like and manifest files lie, as the disk is now.

        Returns the key-like files that lie in an evidenced package, and the project manifests
        that lie under no whole-subtree rule (paths relative to the item, ``b""``: the item).
        Classification's question (``dir_rule``: the outermost directory rule that covers a
        whole subtree decides), asked of the directories above the item through handles opened
        from the root's, of the item at its parent's handle, and of the directories inside it
        from the walk just made. Evidence counts only as regular files: a symlink or a
        directory by a manifest's name, or one that went, leaves a key-like file a credential.
        """
        files = [e[0] for e in entries if e[1] != "dir"] + ([] if is_dir else [b""])
        name_of = {f: _text(_base(f) if f else rel[-1]) for f in files}
        keys = [f for f in files if key_like(name_of[f])]
        manifests = [f for f in files if is_manifest(name_of[f])]
        if not keys and not manifests:
            return frozenset(), []
        state = self._state_above(rel[:-1])
        if state is None and is_dir:
            state = self._state_of(rel[-1], _text(os.path.join(self.root, *rel[:-1])), parent)
        if state is None and is_dir:
            top = _text(os.path.join(self.root, *rel))

            def tagged_inside(inner: bytes) -> bool:
                fd = open_dirs_at(parent, [rel[-1], *inner.split(b"/")])
                try:
                    return read_tag(fd) is not None
                finally:
                    os.close(fd)

            inside = _states_inside(top, entries, self.protect, tagged_inside)
            placed = {f: inside.get(os.path.dirname(f)) for f in files}
        else:
            placed = dict.fromkeys(files, state)
        return (
            frozenset(k for k in keys if placed[k] is True),
            [m for m in manifests if placed[m] is None],
        )

    def _state_above(self, parts: list[bytes]) -> bool | None:
        """Where the directories above the item put it, walked from the root's handle.

        In a package (True), under another whole-subtree rule (False), or neither (None).
        """
        fd = os.dup(self.fd)
        path = self.root
        try:
            for part in parts:
                state = self._state_of(part, _text(path), fd)
                if state is not None:
                    return state
                nxt = open_dir_at(fd, part)
                os.close(fd)
                fd, path = nxt, os.path.join(path, part)
            return None
        finally:
            os.close(fd)

    def _state_of(self, name: bytes, parent: str, parent_fd: int) -> bool | None:
        """What directory ``name`` in ``parent`` (open as ``parent_fd``) is now.

        A package with its evidence (True), another whole-subtree rule or a package without
        its evidence (False), or neither (None).
        """
        every, regular = _names_at(parent_fd)

        def tagged() -> bool:
            fd = open_dir_at(parent_fd, name)
            try:
                return read_tag(fd) is not None
            finally:
                os.close(fd)

        return _package_state(_text(name), parent, self.protect, every, regular, tagged)


def _package_state(
    name: str,
    parent: str,
    ctx: ProtectContext,
    every: set[str],
    regular: set[str],
    tagged: Callable[[], bool],
) -> bool | None:
    """Classification's question of one directory, on the names beside it now.

    ``every``: the names in its parent; ``regular``: those that are regular files. The rule is
    the one the names make (``dir_rule``); it is a package only when the regular files alone
    make it that package's rule with its evidence. A valid cache directory tag in it
    (``tagged``, read now) makes it a cache where classification would: a whole-subtree rule
    that is no package. A directory that cannot be opened to read it raises (``OSError``): the
    entry is refused, as for any error on the way.
    """
    found = dir_rule(name, parent, ctx, evidence_present(every))
    path = parent.rstrip("/") + "/" + name
    if tag_outranks(found) and protect_dir(path, name, ctx) is None and tagged():
        return False
    if found is None or not found[0].absorbs:
        return None
    as_files = dir_rule(name, parent, ctx, evidence_present(regular))
    return as_files is not None and as_files[1] and as_files[0].rule_id in PACKAGE_RULES


def _untagged() -> bool:
    return False


def _names_at(dir_fd: int) -> tuple[set[str], set[str]]:
    """The names in the directory ``dir_fd`` now, and those of its regular files.

    A symlink is not followed: one by a manifest's name is no regular file.
    """
    every: set[str] = set()
    regular: set[str] = set()
    with os.scandir(dir_fd) as found:
        for entry in found:
            name = _text(os.fsencode(entry.name))
            every.add(name)
            if entry.is_file(follow_symlinks=False):
                regular.add(name)
    return every, regular


def _text(raw: bytes) -> str:
    """A path or name as snapshot paths and homes are written."""
    return raw.decode("utf-8", "backslashreplace")


def _base(rel: bytes) -> bytes:
    return rel.rsplit(b"/", 1)[-1]


def _states_inside(
    top: str, entries: list[Entry], ctx: ProtectContext, tagged: Callable[[bytes], bool]
) -> dict[bytes, bool | None]:
    """Per directory inside the item, from the walk's entries: what ``_state_of`` says.

    Keyed by the path relative to the item (``b""``: the item, neither). ``tagged``: whether
    the directory at a relative path holds a valid cache directory tag now.
    """
    every: dict[bytes, set[str]] = {}
    regular: dict[bytes, set[str]] = {}
    for rel, kind, *_ in entries:
        every.setdefault(os.path.dirname(rel), set()).add(_text(_base(rel)))
        if kind == "file":
            regular.setdefault(os.path.dirname(rel), set()).add(_text(_base(rel)))
    states: dict[bytes, bool | None] = {b"": None}
    dirs = sorted((e[0] for e in entries if e[1] == "dir"), key=lambda r: r.count(b"/"))
    for rel in dirs:
        up = os.path.dirname(rel)
        state = states[up]
        if state is None:
            where = top + "/" + _text(up) if up else top
            state = _package_state(
                _text(_base(rel)),
                where,
                ctx,
                every.get(up, set()),
                regular.get(up, set()),
                functools.partial(tagged, rel) if TAG_NAME in regular.get(rel, ()) else _untagged,
            )
        states[rel] = state
    return states


def finding_for_oserror(exc: OSError) -> Finding:
    """What an error on the way to an entry (or in its subtree) means for the entry."""
    if isinstance(exc, MountInside):
        return Finding("contains-mount", f"{os.fsdecode(exc.filename)}: {exc.strerror}")
    if isinstance(exc, SymlinkOnPath) or exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return Finding("symlink-on-path")
    if exc.errno == errno.ENOENT:
        return Finding("gone")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Finding("permission-denied", exc.strerror or "")
    return Finding("unreadable-now", exc.strerror or "it could not be read")


def _contents_differ(planned: Fingerprint | None, fresh: Fingerprint) -> Finding | None:
    if planned is None:
        return Finding("changed-since-review", "its contents were not fingerprinted when reviewed")
    if fresh == planned:
        return None
    return Finding(
        "changed-since-review",
        f"its contents changed ({planned.count} entries, {planned.bytes} bytes then; "
        f"{fresh.count} entries, {fresh.bytes} bytes now)",
    )


def _protected_name(name: bytes, is_dir: bool, packaged: bool) -> bool:
    """Whether the name alone protects (``packaged``: a key-like file in a package does not)."""
    text = os.fsdecode(name)
    if text in VCS_DIRS or text in KEEP_MARKERS:
        return True
    if is_dir:
        return text in CREDENTIAL_DIRS
    return credential_name(text) or (key_like(text) and not packaged)


def _above(path: bytes) -> tuple[str | None, str | None]:
    """(keep-marker directory, enclosing git work tree) found above ``path`` on disk."""
    directory = os.path.dirname(path)
    tree = None
    while True:
        if any(os.path.lexists(os.path.join(directory, m.encode())) for m in KEEP_MARKERS):
            return os.fsdecode(directory), tree
        if tree is None and os.path.lexists(os.path.join(directory, b".git")):
            tree = directory.decode("utf-8", "backslashreplace")
        parent = os.path.dirname(directory)
        if parent == directory:
            return None, tree
        directory = parent


def _protection_now(
    raw: bytes, is_dir: bool, entries: list[Entry], ctx: ProtectContext, packaged: frozenset[bytes]
) -> Protection | None:
    """What protects the item now: something above it, its own name and place, or inside it.

    The rules are protection's own (``hygiene_nb.classify.protect``): configuration in a home
    (a home's dot-files, ``~/.config``), keys, VCS data, keep markers, system directories.
    """
    path = raw.decode("utf-8", "backslashreplace")  # as snapshot paths and homes are written
    found = protection_above(os.path.dirname(path), ctx)
    if found is not None:
        return found
    found = _protected_entry(path, is_dir, ctx, b"" in packaged)
    for rel, kind, *_ in entries:
        if found is not None:
            break
        inside = f"{path}/{rel.decode('utf-8', 'backslashreplace')}"
        found = _protected_entry(inside, kind == "dir", ctx, rel in packaged)
    return found


def _protected_entry(
    path: str, is_dir: bool, ctx: ProtectContext, packaged: bool
) -> Protection | None:
    parent, name = os.path.split(path)
    if is_dir:
        return protect_dir(path, name, ctx)
    return protect_file(name, parent, ctx, in_package=packaged)


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


def _difference(then: tuple[object, ...], now: tuple[object, ...]) -> str:
    names = ("kind", "device", "inode", "size", "mtime", "ctime")
    return ", ".join(f"{n} {a} → {b}" for n, a, b in zip(names, then, now, strict=True) if a != b)

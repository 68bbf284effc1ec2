"""References: is a deletion candidate named anywhere in its own project's text files?

Before a plan includes a path inside a workspace (a directory holding a project marker such as
``.git`` or ``pyproject.toml``), the workspace's text files are searched for the candidate's
file name and its workspace-relative path. A referenced candidate is excluded from the plan and
the files naming it are listed. The check is conservative on purpose (a mention in a README
keeps a file too) and it cannot see paths built at run time or consumers outside the workspace,
so "clear" means "not named in its workspace", never "unused".

Two exceptions keep the check useful for what people clean most: a dependency or cache
directory (``node_modules``, ``__pycache__``, ``.venv``… — ``SKIPPED_DIRS``) is not searched for,
since its tool makes it again; and ignore files and lockfiles (``NOT_REFERENCES``) are not
searched in, since they list what tools generate, not what the project needs.

Read-only: nothing is written, renamed or removed, no symlink is followed, and special files
(fifos, devices, sockets) are never read: each file is opened with ``O_NOFOLLOW | O_NONBLOCK``
and ``fstat``-ed before a byte is read. A workspace that could not be searched completely (a
budget ran out, a directory or file could not be read) leaves its candidates "unchecked":
"could not read" is never "clear".
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "BINARY_SNIFF_BYTES",
    "CHUNK_SIZE",
    "MAX_LISTED",
    "NOT_REFERENCES",
    "PROJECT_MARKERS",
    "SKIPPED_DIRS",
    "ReferenceBudget",
    "ReferenceVerdict",
    "WorkspaceCheck",
    "blocking",
    "check_references",
    "find_workspace",
]

PROJECT_MARKERS: tuple[str, ...] = (
    ".git", "pyproject.toml", "setup.py", "setup.cfg", "package.json", "Cargo.toml", "go.mod",
    "pom.xml", "build.gradle", "CMakeLists.txt", "Makefile", "Gemfile", "composer.json",
    "requirements.txt", "environment.yml",
)  # fmt: skip
SKIPPED_DIRS: frozenset[str] = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", "site-packages",
        ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints",
        ".hygiene-nb-quarantine",
    }
)  # fmt: skip
# Files that list what tools generate or ignore, not what a project needs: a mention there (a
# `.gitignore` line for `*.log`, a lockfile's `node_modules/react`) is not a reference.
NOT_REFERENCES: frozenset[str] = frozenset(
    {
        ".gitignore", ".dockerignore", ".hygieneignore", ".npmignore", ".hgignore",
        ".eslintignore", ".prettierignore", "package-lock.json", "npm-shrinkwrap.json",
        "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "Pipfile.lock", "Cargo.lock",
        "composer.lock", "Gemfile.lock", "uv.lock",
    }
)  # fmt: skip
CHUNK_SIZE = 1024 * 1024  # bytes read at a time (a module attribute so tests can shrink it)
BINARY_SNIFF_BYTES = 8192  # a NUL byte among the first this-many bytes makes a file binary
MAX_LISTED = 20  # referencing files listed per candidate

# Bytes that continue a name: "log.txt" must not match inside "catalog.txt" or "log.txt_old".
_WORD_CLASS = rb"[A-Za-z0-9_]"
_WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_SKIPPED_NAMES = frozenset(os.fsencode(name) for name in SKIPPED_DIRS)
_NOT_REFERENCES = frozenset(os.fsencode(name) for name in NOT_REFERENCES)
# O_NONBLOCK: opening a fifo that slipped past the directory entry's type cannot hang.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# O_NOATIME where allowed: searching a workspace must not make its files look recently used.
_NOATIME = getattr(os, "O_NOATIME", 0)
# A file that vanished, became a symlink (O_NOFOLLOW) or is a socket holds no reference to read.
_NOT_THERE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO})


@dataclass(frozen=True)
class ReferenceBudget:
    """How much one workspace's search may look at before it gives up as incomplete."""

    max_files: int = 10_000  # files looked at per workspace (text and binary)
    max_text_bytes: int = 128 * 1024**2  # bytes of text read per workspace; binary is free


@dataclass(frozen=True)
class ReferenceVerdict:
    """What the search says about one candidate.

    ``status`` is "clear" (searched, not named), "referenced" (named: keep it), "unchecked"
    (its workspace could not be searched completely) or "no-workspace" (nothing to search).
    """

    path: str  # the candidate (absolute)
    status: str  # "clear" | "referenced" | "unchecked" | "no-workspace"
    workspace: str | None
    referenced_by: tuple[str, ...] = ()  # workspace-relative, sorted, at most MAX_LISTED
    detail: str = ""  # unchecked: why; referenced: "path" or "name" (what matched)


@dataclass(frozen=True)
class WorkspaceCheck:
    """What was done in one workspace, for the plan and the receipt to record."""

    workspace: str
    complete: bool
    files_seen: int
    text_files_read: int
    text_bytes_read: int
    binary_files_skipped: int
    reason: str = ""  # why incomplete


def find_workspace(
    path: str, *, stop_at: str | None = None, cache: dict[str, bool] | None = None
) -> str | None:
    """The nearest ancestor of ``path`` (not ``path`` itself) holding a project marker.

    Markers are checked with ``lstat``, so a marker that is a symlink still counts (it says
    "project" as plainly). The walk goes up to and including ``stop_at`` (ancestors outside it
    are never considered), else up to "/". Neither "/" nor the home directory is ever a
    workspace, and the walk stops at the home directory: a home holding a ``.git`` or a
    ``Makefile`` is not a project, and whatever contains a home is not one either.

    Args:
        path: the candidate (made absolute, no symlink resolved).
        stop_at: the highest directory that may be the workspace.
        cache: directory → holds a marker, shared between calls (many candidates, few lstats).

    Returns:
        The workspace directory, or None.
    """
    top = os.path.abspath(stop_at) if stop_at is not None else None
    home = _home()
    current = os.path.dirname(os.path.abspath(path))
    while current != "/" and current != home:
        if top is not None and not _within(current, top):
            return None
        found = cache.get(current) if cache is not None else None
        if found is None:
            found = _has_marker(current)
            if cache is not None:
                cache[current] = found
        if found:
            return current
        if current == top:
            return None
        current = os.path.dirname(current)
    return None


def check_references(
    candidates: Sequence[str],
    *,
    budget: ReferenceBudget = ReferenceBudget(),
    skip: Sequence[str] = (),
    stop_at: str | None = None,
) -> tuple[dict[str, ReferenceVerdict], list[WorkspaceCheck]]:
    """Search each candidate's workspace for its name; each workspace is searched once.

    Args:
        candidates: paths a plan would remove (files or directories).
        budget: the limits of one workspace's search.
        skip: absolute directories never searched (the tool's store, quarantines).
        stop_at: passed to ``find_workspace``.

    Returns:
        A verdict per candidate (keyed as given; ``path`` is absolute) and one check per
        workspace searched, sorted by workspace.
    """
    verdicts: dict[str, ReferenceVerdict] = {}
    groups: dict[str, dict[str, list[str]]] = {}  # workspace -> absolute candidate -> as given
    markers: dict[str, bool] = {}
    for given in candidates:
        absolute = os.path.abspath(given)
        if os.path.basename(absolute) in SKIPPED_DIRS:
            # a dependency or cache directory: its tool makes it again, and its name in a
            # config file says where the tool puts it, not that the project needs this copy
            verdicts[given] = ReferenceVerdict(absolute, "clear", None, (), "regenerable")
            continue
        workspace = find_workspace(absolute, stop_at=stop_at, cache=markers)
        if workspace is None:
            verdicts[given] = ReferenceVerdict(absolute, "no-workspace", None)
        else:
            groups.setdefault(workspace, {}).setdefault(absolute, []).append(given)
    skipped = frozenset(os.fsencode(os.path.abspath(s)) for s in skip)
    checks: list[WorkspaceCheck] = []
    for workspace in sorted(groups):
        members = sorted(groups[workspace])
        search = _Search(workspace, members, budget, skipped)
        check = search.run()
        checks.append(check)
        for index, absolute in enumerate(members):
            verdict = search.verdict(index, absolute, check)
            for given in groups[workspace][absolute]:
                verdicts[given] = verdict
    return verdicts, checks


def _home() -> str | None:
    home = os.environ.get("HOME")
    return os.path.abspath(home) if home else None


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _has_marker(directory: str) -> bool:
    for marker in PROJECT_MARKERS:
        try:
            os.lstat(os.path.join(directory, marker))
        except OSError:
            continue
        return True
    return False


@dataclass
class _Trie:
    """Names sharing a prefix share a node; ``end`` marks where a whole name stops."""

    children: dict[int, _Trie] = field(default_factory=dict)
    end: bool = False

    def regex(self) -> bytes:
        """This node's continuations as a regex: longer names first, then the end here."""
        alternatives = [
            re.escape(bytes([byte])) + child.regex()
            for byte, child in sorted(self.children.items())
        ]
        if not alternatives:
            return b""
        if len(alternatives) == 1 and not self.end:
            return alternatives[0]
        ending = [b""] if self.end else []
        return b"(?:" + b"|".join(alternatives + ending) + b")"


def _alternation(names: Iterable[bytes]) -> bytes:
    """The alternation of ``names`` as one regex, factored by common prefixes, longest first.

    Matches exactly what ``name1|name2|...`` sorted longest first does, but the engine tries
    one branch per distinct next byte instead of every name at every position: a plan with a
    thousand names in one workspace searches about as fast as one with ten.
    """
    root = _Trie()
    for name in names:
        node = root
        for byte in name:
            node = node.children.setdefault(byte, _Trie())
        node.end = True
    return root.regex()


class _Matcher:
    """One compiled pattern for every candidate name in a workspace, and what a hit means.

    The pattern is a zero-width lookahead, so every start position is reported: "data" is
    found in "data.csv" next to "data.csv" itself, and "txt" inside "log.txt" too.
    """

    def __init__(self, rels: Sequence[bytes]) -> None:
        self.by_name: dict[bytes, list[tuple[int, bytes]]] = {}  # name -> (index, dir prefix)
        for index, rel in enumerate(rels):
            head, _, name = rel.rpartition(b"/")
            self.by_name.setdefault(name, []).append((index, head + b"/" if head else b""))
        names = sorted(self.by_name, key=lambda n: (-len(n), n))
        self.pattern = re.compile(
            rb"(?<!"
            + _WORD_CLASS
            + rb")(?=("
            + _alternation(names)
            + rb")(?!"
            + _WORD_CLASS
            + rb"))"
        )
        known = set(names)  # names that are proper prefixes of a name: one set lookup each
        self.shorter = {
            n: sorted((n[:k] for k in range(1, len(n)) if n[:k] in known), key=len, reverse=True)
            for n in names
        }
        self.longest = len(names[0])
        self.back = max(len(rel) for rel in rels) + 1  # a whole path and the byte before it

    def hit(self, buf: bytes, start: int, name: bytes, named: set[int], pathed: set[int]) -> None:
        """Record the candidates named at ``buf[start:]`` (``name`` is the longest match)."""
        end = [name] + [m for m in self.shorter[name] if buf[start + len(m)] not in _WORD]
        for matched in end:
            for index, prefix in self.by_name[matched]:
                named.add(index)
                if index not in pathed and self._path_before(buf, start, prefix):
                    pathed.add(index)

    @staticmethod
    def _path_before(buf: bytes, start: int, prefix: bytes) -> bool:
        """Whether the name at ``start`` is preceded by its directory, itself not mid-word."""
        at = start - len(prefix)
        if at < 0 or buf[at:start] != prefix:
            return False
        return at == 0 or buf[at - 1] not in _WORD  # at == 0 only at the start of a file


class _Scan:
    """Feed one file's chunks; finds every match, including those across chunk boundaries.

    Matches starting within ``longest`` bytes of a chunk's end wait for the next chunk (their
    trailing boundary byte is not read yet); ``back`` bytes before the next start position are
    kept so a name's directory and the byte before it are still there.
    """

    def __init__(self, matcher: _Matcher) -> None:
        self.matcher = matcher
        self.buf = b""
        self.pos = 0  # the first start position not yet looked at
        self.named: set[int] = set()
        self.pathed: set[int] = set()

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        """Search ``chunk`` (after what was fed before); ``final`` at the end of the file."""
        matcher = self.matcher
        buf = self.buf + chunk
        limit = len(buf) if final else len(buf) - matcher.longest
        for match in matcher.pattern.finditer(buf, self.pos):
            start = match.start()
            if start >= limit:
                break
            matcher.hit(buf, start, match.group(1), self.named, self.pathed)
        pos = max(self.pos, limit)
        cut = max(0, pos - matcher.back)
        self.buf, self.pos = buf[cut:], pos - cut


@dataclass
class _Tally:
    files_seen: int = 0
    text_files_read: int = 0
    text_bytes_read: int = 0
    binary_files_skipped: int = 0
    unreadable: list[str] = field(default_factory=list)


class _BudgetSpent(Exception):
    """A budget ran out: the search of this workspace stops here."""


class _Search:
    """The search of one workspace for its candidates."""

    def __init__(
        self,
        workspace: str,
        members: Sequence[str],
        budget: ReferenceBudget,
        skip: frozenset[bytes],
    ) -> None:
        self.workspace = workspace
        self.root = os.fsencode(workspace)
        self.members = [os.fsencode(m) for m in members]
        self.excluded = frozenset(self.members)  # never read, never entered
        self.budget = budget
        self.skip = skip
        self.matcher = _Matcher([m[len(self.root) + 1 :] for m in self.members])
        self.tally = _Tally()
        self.found: dict[int, set[str]] = {}
        self.by_path: set[int] = set()

    def run(self) -> WorkspaceCheck:
        """Walk the workspace and search its text files; what was done."""
        reason = ""
        try:
            self._walk()
        except _BudgetSpent as spent:
            reason = str(spent)
        tally = self.tally
        if tally.unreadable:
            shown = ", ".join(tally.unreadable[:3])
            more = f" and {len(tally.unreadable) - 3} more" if len(tally.unreadable) > 3 else ""
            could_not = f"could not read {shown}{more}"
            reason = f"{reason}; {could_not}" if reason else could_not
        return WorkspaceCheck(
            workspace=_show(self.workspace),
            complete=not reason,
            files_seen=tally.files_seen,
            text_files_read=tally.text_files_read,
            text_bytes_read=tally.text_bytes_read,
            binary_files_skipped=tally.binary_files_skipped,
            reason=reason,
        )

    def verdict(self, index: int, path: str, check: WorkspaceCheck) -> ReferenceVerdict:
        """The verdict for member ``index`` once the search is done."""
        files = self.found.get(index)
        if files:
            detail = "path" if index in self.by_path else "name"
            listed = tuple(sorted(files)[:MAX_LISTED])
            return ReferenceVerdict(path, "referenced", _show(self.workspace), listed, detail)
        if not check.complete:
            return ReferenceVerdict(path, "unchecked", _show(self.workspace), detail=check.reason)
        return ReferenceVerdict(path, "clear", _show(self.workspace))

    def _walk(self) -> None:
        try:
            device = os.stat(self.root).st_dev
        except OSError as exc:
            self._unreadable(self.root, exc)
            return
        stack = [self.root]
        while stack:
            directory = stack.pop()
            try:
                with os.scandir(directory) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                if directory == self.root or exc.errno not in _NOT_THERE:
                    self._unreadable(directory, exc)
                continue
            subdirs: list[bytes] = []
            for entry in entries:
                path = entry.path
                if path in self.excluded:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if self._enters(entry, device):
                        subdirs.append(path)
                elif entry.is_file(follow_symlinks=False) and entry.name not in _NOT_REFERENCES:
                    self._read(path)
            stack.extend(reversed(subdirs))

    def _enters(self, entry: os.DirEntry[bytes], device: int) -> bool:
        if entry.name in _SKIPPED_NAMES or entry.path in self.skip:
            return False
        try:
            if entry.stat(follow_symlinks=False).st_dev == device:
                return True
            # another filesystem mounted inside the project: not searched, so not cleared
            rel = _show(entry.path[len(self.root) + 1 :])
            self.tally.unreadable.append(f"{rel} (another filesystem: not searched)")
            return False
        except OSError as exc:
            if exc.errno not in _NOT_THERE:
                self._unreadable(entry.path, exc)
            return False

    def _read(self, path: bytes) -> None:
        tally, budget = self.tally, self.budget
        if tally.files_seen >= budget.max_files:
            raise _BudgetSpent(f"file budget of {budget.max_files} files reached")
        try:
            fd = _open_file(path)
        except OSError as exc:
            if exc.errno not in _NOT_THERE:
                self._unreadable(path, exc)
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return  # a special file swapped in after the listing: never read
            tally.files_seen += 1
            self._search_file(fd, path, st.st_size)
        except OSError as exc:
            self._unreadable(path, exc)
        finally:
            os.close(fd)

    def _search_file(self, fd: int, path: bytes, size: int) -> None:
        """Sniff for binary, then search the text in chunks within the text budget."""
        head: list[bytes] = []
        sniffed = 0
        at_end = False
        while sniffed < BINARY_SNIFF_BYTES:
            data = os.read(fd, CHUNK_SIZE)
            if not data:
                at_end = True
                break
            head.append(data)
            sniffed += len(data)
        if b"\0" in b"".join(head)[:BINARY_SNIFF_BYTES]:
            self.tally.binary_files_skipped += 1
            return
        self._spend(max(size, sniffed))
        tally = self.tally
        tally.text_files_read += 1
        tally.text_bytes_read += sniffed
        scan = _Scan(self.matcher)
        try:
            for data in head:
                scan.feed(data)
            while not at_end:
                data = os.read(fd, CHUNK_SIZE)
                if not data:
                    break
                self._spend(len(data))  # the file grew while being read
                tally.text_bytes_read += len(data)
                scan.feed(data)
            scan.feed(b"", final=True)
        finally:
            self._record(path, scan)  # what was read before a budget ran out still counts

    def _spend(self, more: int) -> None:
        tally, limit = self.tally, self.budget.max_text_bytes
        if tally.text_bytes_read + more > limit:
            raise _BudgetSpent(
                f"text budget of {limit} bytes reached after {tally.text_files_read} text "
                f"files ({tally.text_bytes_read} bytes read, {tally.files_seen} files seen)"
            )

    def _record(self, path: bytes, scan: _Scan) -> None:
        if not scan.named:
            return
        rel = _show(path[len(self.root) + 1 :])
        for index in scan.named:
            self.found.setdefault(index, set()).add(rel)
        self.by_path |= scan.pathed

    def _unreadable(self, path: bytes, exc: OSError) -> None:
        rel = _show(path[len(self.root) + 1 :]) or "."
        self.tally.unreadable.append(f"{rel} ({exc.strerror or exc})")


def _show(path: bytes | str) -> str:
    """A path as text for messages, plans and receipts: invalid UTF-8 bytes as escapes.

    Candidates may be given as ``os.fsdecode`` text (lone surrogates for such bytes), which
    cannot be written as UTF-8 JSON.
    """
    raw = path if isinstance(path, bytes) else os.fsencode(path)
    return raw.decode("utf-8", "backslashreplace")


def _open_file(path: bytes) -> int:
    """Open a file for reading: no symlink followed, never blocking, atime left alone."""
    if _NOATIME:
        try:
            return os.open(path, _FILE_FLAGS | _NOATIME)
        except PermissionError as exc:
            if exc.errno != errno.EPERM:  # EPERM: not the owner, so no O_NOATIME
                raise
    return os.open(path, _FILE_FLAGS)


def blocking(verdicts: dict[str, ReferenceVerdict]) -> dict[str, tuple[str, str]]:
    """The candidates the check keeps out, as ``path → (code, detail)``.

    ``referenced-by`` names the files (and whether the name or the relative path matched);
    ``references-unchecked`` says why its workspace could not be searched completely.
    """
    out: dict[str, tuple[str, str]] = {}
    for given, v in verdicts.items():
        if v.status == "referenced":
            shown = ", ".join(v.referenced_by[:5])
            more = f" and {len(v.referenced_by) - 5} more" if len(v.referenced_by) > 5 else ""
            named = f"its {v.detail} is named in {shown}{more} (in {v.workspace})"
            out[given] = ("referenced-by", named)
        elif v.status == "unchecked":
            out[given] = ("references-unchecked", f"{v.workspace}: {v.detail}")
    return out

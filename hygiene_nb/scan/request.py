"""The scan stage: validate a root, translate excludes, and set up the walk.

The walk itself lives in ``hygiene_nb.scan.walk``; ``api.scan_root`` streams its rows into a
snapshot.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hygiene_nb.errors import ExcludeInvalid, RootInvalid
from hygiene_nb.pathnames import require_no_dot_components
from hygiene_nb.scan.walk.spec import ExcludeRule, WalkOptions

__all__ = [
    "IGNORE_FILE",
    "ScanRequest",
    "parse_ignore_lines",
    "read_ignore_file",
    "validate_root",
    "walk_options",
]

IGNORE_FILE = ".hygieneignore"
_IGNORE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class ScanRequest:
    """What the person asked to scan, as given on the command line or to ``api.scan_root``."""

    root: str
    excludes: Sequence[str] = ()
    one_file_system: bool = False
    max_entries: int = 0
    max_seconds: float = 0.0
    threads: int = 0
    walker: str = "auto"
    skip_dirs: Sequence[Path] = field(default_factory=tuple)


def validate_root(root: str | os.PathLike[str]) -> str:
    """Return the absolute, normalized root, which must be a real directory (not a symlink).

    Raises:
        RootInvalid: it does not exist, is a symlink, or is not a directory.
        PathNotNormal: it has a ``.`` or ``..`` component past a relative path's leading ones.
    """
    require_no_dot_components([os.fspath(root)])
    path = os.path.abspath(os.fspath(root))
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise RootInvalid(
            f"cannot scan {path.encode('utf-8', 'surrogateescape')!r}: the root's own path is "
            "not valid UTF-8; scan a parent directory (names below the root may be anything)."
        ) from None
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise RootInvalid(
            f"cannot scan {path}: {exc.strerror}; give an existing directory."
        ) from exc
    if stat.S_ISLNK(st.st_mode):
        raise RootInvalid(
            f"cannot scan {path}: it is a symlink and hygiene-nb never follows symlinks; "
            f"scan its target ({os.path.realpath(path)}) instead."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise RootInvalid(f"cannot scan {path}: it is not a directory; give a directory.")
    return path


def _trim_trailing_spaces(line: str) -> str:
    """Drop the trailing spaces no backslash escapes, as git does."""
    first_trailing: int | None = None
    escaped = False
    for i, c in enumerate(line):
        if escaped:
            escaped, first_trailing = False, None
        elif c == "\\":
            escaped = True
        elif c != " ":
            first_trailing = None
        elif first_trailing is None:
            first_trailing = i
    if escaped or first_trailing is None:  # git keeps a line ending in a backslash as it is
        return line
    return line[:first_trailing]


def _unescape_slashes(body: str) -> str:
    r"""Write each escaped ``/`` as a plain one, which is what git makes of it.

    fnmatch(3) under ``FNM_PATHNAME`` does not find ``\/`` after a ``*``, and git reads a
    ``**`` next to one as a path component, except that before a ``\/`` it spans one or more
    directories, never none (``**\/x`` is ``*/**/x``).
    """
    out = ""
    i = 0
    while i < len(body):
        if body.startswith("\\/", i):
            last = out.rpartition("/")[2]
            if _is_globstar(last):
                out = out[: len(out) - len(last)] + "*/**"
            out += "/"
            i += 2
        elif body[i] == "\\":
            out += body[i : i + 2]
            i += 2
        else:
            out += body[i]
            i += 1
    return out


def _is_globstar(part: str) -> bool:
    return len(part) >= 2 and not part.strip("*")


def _has_globstar(body: str) -> bool:
    """Whether a path component of ``body`` is ``**`` (two or more ``*`` alone, as in git)."""
    return any(_is_globstar(part) for part in body.split("/"))


def _rule(body: str, *, anchored: bool, dir_only: bool, negate: bool) -> ExcludeRule:
    """The walker rule for one gitignore pattern (its ``!``, leading and trailing ``/`` read)."""
    if body.startswith("**/") and "/" not in body[3:]:
        body, anchored = body[3:], False  # a name at any depth: matched against the name alone
    return ExcludeRule(
        pattern=os.fsencode(body),
        anchored=anchored,
        dir_only=dir_only,
        negate=negate,
        globstar=anchored and _has_globstar(body),
    )


def parse_ignore_lines(lines: Iterable[str], *, source: str = "--exclude") -> list[ExcludeRule]:
    """Translate gitignore-style lines into walker exclude rules (in order; last match wins).

    Supported: comments (``#``), blank lines, ``!`` negation, a trailing ``/`` for directories
    only, a leading or inner ``/`` anchoring the pattern at the root, ``*``, ``?``, ``[…]``,
    and ``**`` as a path component (leading ``**/``, trailing ``/**``, inner ``/**/``, any
    number of them). One rule per pattern. Several slashes at a pattern's start or end count
    as one (git's pattern would match nothing); see docs/excludes.md.

    Raises:
        ExcludeInvalid: a line cannot be used (it names the source and line number).
    """
    rules: list[ExcludeRule] = []
    for number, raw in enumerate(lines, 1):
        line = _trim_trailing_spaces(raw.rstrip("\n").rstrip("\r"))
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        body = line.rstrip("/")
        anchored = "/" in body
        body = body.lstrip("/")
        if not body or "\0" in body:
            raise ExcludeInvalid(
                f"{source} line {number}: {raw.strip()!r} matches nothing usable; "
                "write a name or a path relative to the root (gitignore syntax)."
            )
        rules.append(
            _rule(_unescape_slashes(body), anchored=anchored, dir_only=dir_only, negate=negate)
        )
    return rules


def read_ignore_file(root: str) -> list[str]:
    """Read ``ROOT/.hygieneignore`` if present (never through a symlink); [] if absent.

    Raises:
        ExcludeInvalid: the file exists but cannot be read, or is too large.
    """
    path = os.path.join(root, IGNORE_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ExcludeInvalid(
            f"cannot read {path}: {exc.strerror}; fix or remove it (it must be a regular file)."
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ExcludeInvalid(f"{path} is not a regular file; make it one or remove it.")
        data = handle.read(_IGNORE_MAX_BYTES + 1)
    if len(data) > _IGNORE_MAX_BYTES:
        raise ExcludeInvalid(f"{path} is larger than 1 MiB; shorten it.")
    return data.decode("utf-8", "surrogateescape").splitlines()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def walk_options(request: ScanRequest, root: str) -> WalkOptions:
    """Build the walker's options: excludes from ``--exclude`` and ``.hygieneignore``, skips.

    Raises:
        ExcludeInvalid: an exclude pattern or ignore line cannot be used.
    """
    rules = parse_ignore_lines(read_ignore_file(root), source=IGNORE_FILE)
    rules += parse_ignore_lines(request.excludes, source="--exclude")
    skips = {ident for ident in map(_identity, request.skip_dirs) if ident is not None}
    return WalkOptions(
        root=os.fsencode(root),
        one_file_system=request.one_file_system,
        excludes=tuple(rules),
        skip_identities=frozenset(skips),
        max_entries=max(0, request.max_entries),
        max_seconds=max(0.0, request.max_seconds),
        # With an entry budget, one thread keeps the round-robin share exact (threads would
        # race for the last entries); without one, the walker's default.
        threads=1 if request.max_entries > 0 else request.threads,
    )

r"""Exclude patterns: both walkers match them as git does (``--exclude`` / ``.hygieneignore``).

The property test builds small trees (names of one or two of ``a b . -`` and space; files,
directories and dangling symlinks, up to four deep) and lists of patterns in the gitignore
syntax hygiene-nb reads (docs/excludes.md): names and anchored paths (a leading or inner ``/``,
an escaped ``\/`` too), a trailing ``/`` for directories, ``!``, ``*``, ``?``, bracket
expressions (a set, ``!`` and ``^`` negation, a range across ``/``, ``[:alpha:]``), backslash
escapes, escaped and unescaped trailing spaces, and ``**`` as whole components anywhere, several
per pattern. Both walkers scan the tree with the patterns; the entries they list and do not
exclude must be the entries git does not ignore: those ``git check-ignore`` does not report
and that have no reported ancestor (git does not look inside an ignored directory; the walkers
do not list it). ``git ls-files --others`` must agree for the non-directories.

Left out of the generated patterns, on purpose: what hygiene-nb reads differently from git by
design (docs/excludes.md): unterminated brackets, several slashes at a pattern's ends, and the
lines it refuses (``/``, ``!``) where git ignores them. Comment and blank lines carry no
pattern. Case folding does not arise: both match bytes, case-sensitively.

A second property test holds the Python walker's matcher to the C library's fnmatch(3), which
the C walker calls, for patterns of any shape (broken brackets included).
"""

from __future__ import annotations

import ctypes
import locale
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hygiene_nb.errors import ExcludeInvalid
from hygiene_nb.scan.request import ScanRequest, parse_ignore_lines, walk_options
from hygiene_nb.scan.walk import WalkerName, available_walkers, open_walker
from hygiene_nb.scan.walk.match import fnmatch_bytes
from hygiene_nb.scan.walk.spec import FLAG_EXCLUDED, KIND_DIR

# -- helpers ------------------------------------------------------------------------------------


def make_tree(root: Path, dirs: list[str], files: list[str]) -> None:
    root.mkdir()
    for rel in dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"")


def shown(root: Path, patterns: list[str], walker: str) -> set[str]:
    """The entries a scan lists and does not exclude (relative paths; the root left out)."""
    top = os.fspath(root)
    options = walk_options(ScanRequest(root=top, excludes=patterns), top)
    walk = open_walker(options, walker=cast(WalkerName, walker))
    base = os.fsencode(top)
    out: set[str] = set()
    for batch in walk.batches():
        cols = batch.to_pydict()
        for parent, name, flags in zip(cols["parent"], cols["name"], cols["flags"], strict=True):
            if parent and not flags & FLAG_EXCLUDED:
                out.add(os.fsdecode(os.path.relpath(os.path.join(parent, name), base)))
    return out


def sums_count_only(root: Path, patterns: list[str], walker: str, kept: set[str]) -> None:
    """Every directory's ``tree_bytes`` is its own size plus the sizes of the ``kept`` below it."""
    top = os.fspath(root)
    options = walk_options(ScanRequest(root=top, excludes=patterns), top)
    base = os.fsencode(top)
    sizes: dict[str, int] = {}
    dirs: dict[str, int] = {}
    for batch in open_walker(options, walker=cast(WalkerName, walker)).batches():
        cols = batch.to_pydict()
        for parent, name, kind, size, tree, flags in zip(
            cols["parent"], cols["name"], cols["kind"], cols["size"], cols["tree_bytes"],
            cols["flags"], strict=True,
        ):  # fmt: skip
            rel = os.fsdecode(os.path.relpath(os.path.join(parent, name), base)) if parent else ""
            sizes[rel] = size
            if kind == KIND_DIR and not flags & FLAG_EXCLUDED:
                dirs[rel] = tree
    for rel, tree in dirs.items():
        below = [p for p in kept if not rel or p.startswith(rel + "/")]
        assert tree == sizes[rel] + sum(sizes[p] for p in below), (walker, rel)


# -- examples (what git check-ignore says of each) ----------------------------------------------


def test_a_trailing_globstar_excludes_what_is_inside_not_the_name_itself(
    tmp_path: Path, walker: str
) -> None:
    root = tmp_path / "r"
    make_tree(root, ["d/sub"], ["d/keep", "d/drop", "d/sub/x", "f"])
    # 'f/**' names nothing inside the file f; 'd/**' hides d's content but not d, so a later
    # '!' can bring back an entry directly inside it.
    assert shown(root, ["f/**", "d/**", "!d/keep"], walker) == {"f", "d", "d/keep"}


def test_a_directory_brought_back_inside_a_trailing_globstar_is_still_emptied(
    tmp_path: Path, walker: str
) -> None:
    root = tmp_path / "r"
    make_tree(root, ["a/b"], ["a/b/c"])
    assert shown(root, ["/**", "!a/"], walker) == {"a"}
    assert shown(root, ["a/**", "!a/b/", "!a/b/c"], walker) == {"a", "a/b", "a/b/c"}


def test_wildcards_next_to_an_inner_globstar_do_not_cross_slashes(
    tmp_path: Path, walker: str
) -> None:
    root = tmp_path / "r"
    make_tree(root, ["a/x/b"], ["a/x/b/c", "a/x/bzc"])
    assert shown(root, ["a/**/b?c"], walker) == {"a", "a/x", "a/x/b", "a/x/b/c"}
    root = tmp_path / "s"
    make_tree(root, ["x/a/b/c"], ["x/a/b/c/db", "x/a/b/eb"])
    assert shown(root, ["**/a/b/*b"], walker) == {"x", "x/a", "x/a/b", "x/a/b/c", "x/a/b/c/db"}


def test_every_globstar_matches_zero_or_more_directories(tmp_path: Path, walker: str) -> None:
    root = tmp_path / "r"
    make_tree(root, ["a/b/c/b"], ["a/b/d", "a/b/c/d", "a/b/c/b/d", "a/d"])
    assert shown(root, ["a/**/b/**/d"], walker) == {"a", "a/b", "a/b/c", "a/b/c/b", "a/d"}


def test_a_leading_globstar_before_a_path_anchors_it_at_any_depth(
    tmp_path: Path, walker: str
) -> None:
    root = tmp_path / "r"
    make_tree(root, ["p/q/b", "b"], ["p/q/b/c", "b/c", "p/c"])
    assert shown(root, ["**/b/c"], walker) == {"p", "p/q", "p/q/b", "b", "p/c"}


def test_an_escaped_slash_is_a_slash(tmp_path: Path, walker: str) -> None:
    root = tmp_path / "r"
    make_tree(root, ["x", "a", "q/x"], ["x/b", "a/x", "q/x/y"])
    assert shown(root, ["*\\/b"], walker) == {"x", "a", "a/x", "q", "q/x", "q/x/y"}
    assert shown(root, ["a\\/**"], walker) == {"x", "x/b", "a", "q", "q/x", "q/x/y"}
    # git: a '**' before an escaped '/' spans at least one directory
    assert shown(root, ["**\\/x"], walker) == {"x", "x/b", "a", "q"}


def test_only_unescaped_trailing_spaces_are_dropped(tmp_path: Path, walker: str) -> None:
    root = tmp_path / "r"
    make_tree(root, [], ["a ", "a", "b  ", "b"])
    assert shown(root, ["a\\  ", "b\\ \\  "], walker) == {"a", "b"}


@pytest.mark.parametrize(
    ("pattern", "text", "pathname", "expected"),
    [
        (b"[!-.]", b"a", True, True),  # '-' first is a character (this raised re.error)
        (b"[!-x]", b"a", True, True),  # (and this read '/-x' as a range)
        (b"[!-x]", b"-", True, False),
        (b"[[:digit:]]", b"7", True, True),
        (b"[[:digit:]]", b":", True, False),
        (b"[[:nosuch:]]", b"n", True, False),  # an unknown class fails the bracket
        (b"[[=a=]]", b"a", True, True),
        (b"[[.a.]-]", b"a", True, False),  # glibc: a collating symbol before '-]' is dropped
        (b"[[.a.]-]", b"-", True, True),
        (b"[[", b"[[", True, True),  # an unterminated '[' is an ordinary character
        (b"[ab", b"a", True, False),
        (b"a\\", b"a\\", True, False),  # a trailing backslash matches nothing
        (b"*\\/b", b"a/b", True, False),  # glibc looks for the '/' only before the next '/'
        (b"*\\/b", b"a/b", False, True),
        (b"a[/]b", b"a/b", True, False),
        (b"*", b"a/b", False, True),
        (b"\xff*", b"\xff\xfe", True, True),
    ],
)
def test_python_matcher_reads_patterns_as_glibc_does(
    pattern: bytes, text: bytes, pathname: bool, expected: bool
) -> None:
    assert fnmatch_bytes(pattern, text, pathname=pathname) is expected


# -- against git --------------------------------------------------------------------------------

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(
    GIT is None, reason="git is not installed: the walkers are compared with git check-ignore"
)

_NAMES = st.text(alphabet="ab.- ", min_size=1, max_size=2).filter(lambda n: n not in (".", ".."))
_ENTRIES = st.lists(
    st.tuples(st.lists(_NAMES, min_size=1, max_size=4), st.sampled_from(["file", "dir", "link"])),
    min_size=1,
    max_size=12,
)
# Brackets come whole and well formed: hygiene-nb reads an unterminated '[' as fnmatch(3) does
# (an ordinary character) where git's pattern matches nothing, by design (docs/excludes.md).
_TOKENS = st.sampled_from(
    ["a", "b", ".", "-", " ", "\\ ", "\\a", "*", "?",
     "[ab]", "[!a]", "[^.]", "[.-b]", "[[:alpha:]]"]
)  # fmt: skip
_COMPONENTS = st.one_of(st.lists(_TOKENS, min_size=1, max_size=3).map("".join), st.just("**"))
_SEPARATORS = st.sampled_from(["/", "/", "/", "\\/"])
_LINE_ENDS = st.sampled_from(["", "", " ", "\\ ", "\\  "])  # trailing spaces, escaped or not


def _usable(line: str) -> bool:
    """Whether hygiene-nb takes the line (``/`` or ``!`` alone is an error here, git skips it)."""
    try:
        parse_ignore_lines([line])
    except ExcludeInvalid:
        return False
    return True


@st.composite
def _patterns(draw: st.DrawFn) -> str:
    # At most one '/' at each end: several count as one here and make git's pattern match
    # nothing, by design (docs/excludes.md).
    components = draw(st.lists(_COMPONENTS, min_size=1, max_size=4))
    body = components[0]
    for component in components[1:]:
        body += draw(_SEPARATORS) + component
    line = ("/" if draw(st.booleans()) else "") + body + ("/" if draw(st.booleans()) else "")
    return ("!" if draw(st.booleans()) else "") + line + draw(_LINE_ENDS)


_PATTERN_LISTS = st.lists(_patterns().filter(_usable), min_size=1, max_size=4)


def _tree(entries: list[tuple[list[str], str]]) -> dict[str, str]:
    """Relative path -> kind; an entry under a file or a symlink is dropped."""
    tree: dict[str, str] = {}
    for parts, kind in entries:
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if any(tree.get(parent, "dir") != "dir" for parent in parents):
            continue
        tree.update(dict.fromkeys(parents, "dir"))
        tree.setdefault("/".join(parts), kind)
    return tree


def _materialize(root: Path, tree: dict[str, str]) -> None:
    root.mkdir()
    for rel, kind in sorted(tree.items()):
        path = root / rel
        if kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "file":
            path.write_bytes(b"")
        else:
            path.symlink_to("nowhere")


def _git_env(home: Path) -> dict[str, str]:
    """No system or user git configuration (a global excludes file would change the answers)."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.fspath(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


def _git(git_dir: Path, root: Path, excludes: Path, *args: str, stdin: bytes = b"") -> bytes:
    command = [cast(str, GIT), f"--git-dir={git_dir}", f"--work-tree={root}"]
    command += ["-c", f"core.excludesFile={excludes}", *args]
    env = _git_env(git_dir)
    done = subprocess.run(command, input=stdin, capture_output=True, cwd=root, env=env)
    assert done.returncode in (0, 1), done.stderr  # 1: check-ignore found nothing ignored
    return done.stdout


def _git_shown(git_dir: Path, root: Path, patterns: list[str], tree: dict[str, str]) -> set[str]:
    """The entries git does not ignore; checks ``ls-files --others`` agrees on non-directories."""
    excludes = git_dir / "hygiene-nb-patterns"
    excludes.write_text("".join(line + "\n" for line in patterns))
    paths = "".join(rel + "\0" for rel in tree).encode()
    out = _git(git_dir, root, excludes, "check-ignore", "--no-index", "--stdin", "-z", stdin=paths)
    ignored = set(out.decode().split("\0"))

    def hidden(rel: str) -> bool:
        parts = rel.split("/")
        return any("/".join(parts[:i]) in ignored for i in range(1, len(parts) + 1))

    kept = {rel for rel in tree if not hidden(rel)}
    listed = _git(git_dir, root, excludes, "ls-files", "--others", "--exclude-standard", "-z")
    assert set(listed.decode().split("\0")) - {""} == {r for r in kept if tree[r] != "dir"}
    return kept


@pytest.fixture(scope="module")
def git_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty repository whose work tree each example points at its own tree."""
    top = tmp_path_factory.mktemp("git")
    command = [cast(str, GIT), "init", "-q", "--template=", os.fspath(top)]
    subprocess.run(command, check=True, env=_git_env(top))
    return top / ".git"


@needs_git
@settings(max_examples=200, deadline=None)
@given(entries=_ENTRIES, patterns=_PATTERN_LISTS)
def test_both_walkers_exclude_what_git_ignores(
    git_dir: Path, entries: list[tuple[list[str], str]], patterns: list[str]
) -> None:
    tree = _tree(entries)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "r"
        _materialize(root, tree)
        expected = _git_shown(git_dir, root, patterns, tree)
        for walker in available_walkers():
            assert shown(root, patterns, walker) == expected, walker
            sums_count_only(root, patterns, walker, expected)


# -- against the C library's fnmatch(3) ---------------------------------------------------------

_GLIBC = platform.libc_ver()[0] == "glibc"
needs_glibc = pytest.mark.skipif(
    not _GLIBC, reason="the C walker's fnmatch(3) is glibc's; this C library is another"
)
_FNM_PATHNAME = 1
_GLOB_PIECES = st.sampled_from(
    [*(bytes([b]) for b in b"*?[]!^-\\/abz.:=\xe9"), b"[:alpha:]", b"[:bogus:]", b"[=a=]", b"[.a.]"]
)
_TEXTS = st.lists(st.sampled_from(b"abz/[]-!\\.^:=A\xe9\n"), max_size=5).map(bytes)


@contextmanager
def _c_locale(libc: ctypes.CDLL) -> Iterator[None]:
    """This thread in the C locale, as the C walker's threads are."""
    libc.newlocale.restype = libc.uselocale.restype = ctypes.c_void_p
    libc.newlocale.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]
    libc.uselocale.argtypes = libc.freelocale.argtypes = [ctypes.c_void_p]
    mask = (1 << locale.LC_CTYPE) | (1 << locale.LC_COLLATE)
    c_locale = libc.newlocale(mask, b"C", None)
    previous = libc.uselocale(c_locale)
    try:
        yield
    finally:
        libc.uselocale(previous)
        libc.freelocale(c_locale)


@needs_glibc
@settings(max_examples=1000, deadline=None)
@given(pieces=st.lists(_GLOB_PIECES, max_size=7), text=_TEXTS, pathname=st.booleans())
def test_python_fnmatch_agrees_with_the_c_library(
    pieces: list[bytes], text: bytes, pathname: bool
) -> None:
    pattern = b"".join(pieces)
    libc = ctypes.CDLL(None)
    libc.fnmatch.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    with _c_locale(libc):
        expected = libc.fnmatch(pattern, text, _FNM_PATHNAME if pathname else 0) == 0
    assert fnmatch_bytes(pattern, text, pathname=pathname) is expected

"""Exclude patterns: both walkers match them as git does (``--exclude`` / ``.hygieneignore``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

from hygiene_nb.scan import ScanRequest, walk_options
from hygiene_nb.walk import WalkerName, open_walker
from hygiene_nb.walk.match import fnmatch_bytes
from hygiene_nb.walk.spec import FLAG_EXCLUDED

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

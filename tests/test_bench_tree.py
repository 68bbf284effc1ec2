"""The benchmark's tree generator: the same tree for the same parameters, counted as find counts."""

from __future__ import annotations

import os
from pathlib import Path

from bench.gen_tree import generate_tree


def _listing(root: Path) -> list[tuple[str, str, int, int]]:
    rows = []
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            kind = "d" if name in dirs and not os.path.islink(path) else "n"
            size = 0 if kind == "d" else st.st_size
            rows.append((os.path.relpath(path, root), kind, size, st.st_mtime_ns))
    return sorted(rows)


def test_the_same_seed_gives_the_same_tree_and_find_counts_its_entries(tmp_path: Path) -> None:
    first = generate_tree(tmp_path / "a", entries=2000, seed=7)
    second = generate_tree(tmp_path / "b", entries=2000, seed=7)
    listing = _listing(tmp_path / "a")
    assert listing == _listing(tmp_path / "b")
    assert len(listing) + 1 == first["entries"] == 2000  # + the root, as `find ROOT | wc -l`
    assert {k: v for k, v in first.items() if k not in ("root", "seconds")} == {
        k: v for k, v in second.items() if k not in ("root", "seconds")
    }
    other = generate_tree(tmp_path / "c", entries=2000, seed=8)
    assert _listing(tmp_path / "c") != listing
    assert other["entries"] == 2000


def test_names_recur_across_directories_and_mtimes_have_nanoseconds(tmp_path: Path) -> None:
    generate_tree(tmp_path / "t", entries=2000, seed=7)
    files = [row for row in _listing(tmp_path / "t") if row[1] == "n"]
    names = [os.path.basename(path) for path, *_ in files]
    assert len(set(names)) < len(names)  # numbered within a directory, not across the tree
    assert sum(mtime % 10**9 != 0 for *_, mtime in files) > len(files) // 2


def test_a_complete_tree_with_the_same_parameters_is_reused(tmp_path: Path) -> None:
    generate_tree(tmp_path / "t", entries=500, seed=1)
    again = generate_tree(tmp_path / "t", entries=500, seed=1)
    assert again["reused"] is True


def test_a_numbered_directory_name_drawn_twice_in_one_parent_gets_a_free_name(
    tmp_path: Path,
) -> None:
    # seed 6135 draws "downloads" twice under one parent at directory 483, where an earlier
    # sibling was already drawn as "downloads-483"
    counts = generate_tree(tmp_path / "t", entries=5200, seed=6135)
    assert len(_listing(tmp_path / "t")) + 1 == counts["entries"]

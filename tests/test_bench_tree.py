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


def test_tree_statistics_count_the_shares_from_a_snapshot(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.realism import tree_statistics

    second = 1_735_000_000 * 10**9
    table = pa.table(
        {
            "parent": pa.array([None, "/r", "/r", "/r", "/r"], pa.string()).dictionary_encode(),
            "name": ["r", "a_1.csv", "a_1.csv", "notes", "d"],
            "kind": pa.array(["dir", "file", "file", "file", "dir"]).dictionary_encode(),
            # the files: a whole second, 250 ns later, then two minutes later
            "mtime_ns": [second + 850, second, second + 250, second + 120 * 10**9, second + 1],
            # the root's newest is 1 ns after its own mtime: only float64 would call them equal
            "tree_latest_mtime_ns": pa.array([second + 851, None, None, None, second + 1]),
        }
    )
    pq.write_table(table, tmp_path / "part-0.parquet")
    stats = tree_statistics(tmp_path)
    assert stats["distinct_names"] == 2 / 3
    assert stats["names_with_digit"] == 2 / 3
    assert stats["mtimes_with_ns"] == 1 / 3
    assert stats["near_previous"] == 1 / 2  # 250 ns, then two minutes
    assert stats["dir_mtime_newest"] == 1 / 2  # "d" yes, the root no

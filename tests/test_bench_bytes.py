"""The benchmark's weighing of format 2's columns: a real scan's snapshot rewritten with and
without them, weighed from the files, and a generated tree of two owners."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.formats import NOBODY, format_bytes, two_owner_bytes
from hygiene_nb import api
from hygiene_nb.scan.snapshot import FORMAT_2_COLUMNS, snapshot_file
from tests.helpers import write


def test_format_1_weighs_less_than_format_2_and_both_are_the_files_sizes(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    for i in range(300):
        write(root / f"d{i % 7}" / f"file-{i}.txt", i)
    info = api.scan_root(root, store=store)
    out = tmp_path / "rewrites"

    result = format_bytes(Path(info.path), out)

    entries = 1 + sum(1 for _ in root.rglob("*"))  # as `find ROOT | wc -l`
    assert result["entries"] == entries
    [f1], [f2] = sorted(out.glob("f1-*.parquet")), sorted(out.glob("f2-*.parquet"))
    assert result["format_1_bytes"] == os.stat(f1).st_size > 0
    assert result["format_2_bytes"] == os.stat(f2).st_size > 0
    assert result["stored_bytes"] == os.stat(snapshot_file(info)).st_size
    assert result["format_1_bytes"] < result["format_2_bytes"]
    # the same writer, the same row groups: format 2 rewritten is the stored file's size
    assert result["format_2_bytes"] == result["stored_bytes"]
    assert result["format_1_bytes_per_entry"] == round(os.stat(f1).st_size / entries, 3)
    assert result["format_2_bytes_per_entry"] == round(os.stat(f2).st_size / entries, 3)
    # format 1 is the same rows without the four columns
    stored, old = pq.read_table(snapshot_file(info)), pq.read_table(f1)
    assert not set(FORMAT_2_COLUMNS) & set(old.column_names)
    assert old.equals(stored.drop_columns(list(FORMAT_2_COLUMNS)))
    assert pq.ParquetFile(f1).num_row_groups == pq.ParquetFile(snapshot_file(info)).num_row_groups
    footer = pq.read_metadata(snapshot_file(info))
    chunks = {
        footer.row_group(0).column(i).path_in_schema: footer.row_group(0).column(i)
        for i in range(footer.num_columns)
    }
    for column in FORMAT_2_COLUMNS:
        want = round(chunks[column].total_compressed_size / entries, 3)
        assert result["column_bytes_per_entry"][column] == want


def test_the_two_owner_tree_has_files_of_nobody_and_of_root(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = two_owner_bytes(scratch, entries=600)
    if os.geteuid() != 0:
        assert result == {"skipped": "needs root to chown half of the files to nobody"}
        pytest.skip("the two-owner tree needs root (the function says so, checked above)")
    assert result["owners"] == sorted([pwd.getpwuid(NOBODY).pw_name, pwd.getpwuid(0).pw_name])
    assert 0 < result["chowned"] < result["files"]
    assert 0 < result["format_1_bytes"] < result["format_2_bytes"]
    assert result["column_bytes_per_entry"]["uid"] > 0
    assert list(scratch.iterdir()) == []  # its tree and store are removed

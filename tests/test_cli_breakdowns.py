"""``summary --by``: the breakdowns through the command line, on real trees, against the disk.

Every figure is computed here a second way: with ``os.walk``/``os.lstat`` for the extensions,
with ``find -mtime`` for the ages and with ``find -printf`` for the owners, never taken from the
code under test.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.classify.filetypes import CATEGORIES
from hygiene_nb.render import human_bytes
from tests.helpers import write

DAY = 86_400
# (lowest day, highest day or None) of each age bucket, youngest first
BUCKETS = [(0, 1), (1, 7), (7, 30), (30, 90), (90, 365), (365, 1095), (1095, None)]
# a file's age in days, well inside each bucket, and its size
AGES = [(0.3, 1_100), (3, 23_000), (15, 4_096), (60, 777), (200, 150_000), (600, 9), (2000, 3_333)]


def run(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def scanned(root: Path, store: Path) -> None:
    code, out, err = run("scan", str(root), "--store", str(store), "--json")
    assert code == 0, out + err


def breakdown(root: Path, store: Path, by: str, *more: str) -> dict[str, Any]:
    code, out, err = run("summary", str(root), "--store", str(store), "--by", by, "--json", *more)
    assert code == 0, out + err
    lines = out.splitlines()
    assert len(lines) == 1, out  # one object, nothing else on stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result


def extension(name: str) -> str:
    """The extension rule, written out again: lower case, compressed tars whole, ``.x`` none."""
    low = name.lower()
    for tar in ("tar.gz", "tar.bz2", "tar.xz", "tar.zst"):
        if low.endswith("." + tar) and len(low) > len(tar) + 1:
            return tar
    head, dot, tail = low.rpartition(".")
    return tail if dot and head and tail else "(none)"


def files_by_extension(root: Path) -> tuple[Counter[str], Counter[str]]:
    """Regular files under ``root``, a hard-linked inode once: (bytes, files) per extension."""
    nbytes: Counter[str] = Counter()
    files: Counter[str] = Counter()
    seen: set[tuple[int, int]] = set()
    for where, _dirs, names in os.walk(root):
        for name in sorted(names):
            st = os.lstat(os.path.join(where, name))
            if not stat.S_ISREG(st.st_mode):
                continue
            key = extension(name)
            files[key] += 1
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                nbytes[key] += st.st_size
    return nbytes, files


@pytest.fixture
def typed_tree(tmp_path: Path) -> Path:
    root = tmp_path / "typed"
    write(root / "photos" / "A.JPG", 30_000)
    write(root / "photos" / "b.jpg", 2_500)
    write(root / "photos" / "c.PNG", 700)
    write(root / "backup" / "home.tar.gz", 45_000)
    write(root / "backup" / "old.GZ", 1_234)
    write(root / "backup" / "Data.Tar.Xz", 999)
    write(root / ".bashrc", 321)
    write(root / "notes.", 55)
    write(root / "README", 66)
    write(root / "src" / "main.py", 4_000)
    write(root / "src" / "lib.py", 3_000)
    write(root / "src" / "empty.py", 0)
    os.link(root / "photos" / "A.JPG", root / "src" / "same-photo.jpg")  # counted once
    os.link(root / "src" / "main.py", root / "src" / "copy.txt")  # first name in path order
    os.symlink("photos/A.JPG", root / "link.jpg")  # not a regular file
    os.mkfifo(root / "pipe.log")  # nor is this
    return root


def test_by_type_json_matches_the_files_on_disk(typed_tree: Path, store: Path) -> None:
    scanned(typed_tree, store)
    result = breakdown(typed_tree, store, "type", "--top", "1000")
    assert set(result) == {"root", "scan_id", "by", "partial", "rows"}
    assert result["root"] == str(typed_tree) and result["by"] == "type"
    nbytes, files = files_by_extension(typed_tree)
    rows = {row["extension"]: row for row in result["rows"]}
    assert set(rows) == set(files)
    assert {k: r["bytes"] for k, r in rows.items()} == {k: nbytes[k] for k in files}
    assert {k: r["files"] for k, r in rows.items()} == dict(files)
    assert [r["bytes"] for r in result["rows"]] == sorted(nbytes.values(), reverse=True)
    for row in result["rows"]:
        assert isinstance(row["bytes"], int) and isinstance(row["files"], int)
        assert isinstance(row["examples"], list)
        assert all(extension(Path(p).name) == row["extension"] for p in row["examples"])
    assert rows["jpg"]["category"] == "image" and rows["tar.gz"]["category"] == "archive"
    # by category: the same bytes, grouped with the table of categories
    of = {ext: cat for cat, exts in CATEGORIES.items() for ext in exts}
    per_category: Counter[str] = Counter()
    for key, value in nbytes.items():
        per_category[of.get(key, "other")] += value
    by_category = breakdown(typed_tree, store, "category", "--top", "1000")
    assert {r["category"]: r["bytes"] for r in by_category["rows"]} == dict(per_category)


def test_by_type_top_caps_the_rows_largest_first(typed_tree: Path, store: Path) -> None:
    scanned(typed_tree, store)
    nbytes, _ = files_by_extension(typed_tree)
    result = breakdown(typed_tree, store, "type", "--top", "2")
    assert [r["bytes"] for r in result["rows"]] == sorted(nbytes.values(), reverse=True)[:2]


def test_the_tables_use_human_units(typed_tree: Path, store: Path) -> None:
    scanned(typed_tree, store)
    nbytes, _ = files_by_extension(typed_tree)
    code, out, err = run("summary", str(typed_tree), "--store", str(store), "--by", "type")
    assert code == 0 and not err, err
    jpg = next(line for line in out.splitlines() if line.split()[:1] == ["jpg"])
    assert human_bytes(nbytes["jpg"]) in jpg and "KiB" in jpg
    assert str(typed_tree) in out.splitlines()[0]
    for by in ("owner", "group", "category", "age"):
        code, out, err = run("summary", str(typed_tree), "--store", str(store), "--by", by)
        assert code == 0 and not err, (by, err)
        assert "KiB" in out, (by, out)


def aged_tree(root: Path) -> Path:
    """One file per age of ``AGES``, two in some buckets, no hard links."""
    now = time.time()
    for n, (days, size) in enumerate(AGES):
        for copy in range(1 + n % 2):
            path = write(root / f"d{n}" / f"f{copy}.bin", size + copy)
            os.utime(path, (now - days * DAY, now - days * DAY))
    write(root / "new.txt", 12)  # written now
    return root


def find_bytes(root: Path, *tests: str) -> tuple[int, int]:
    """(files, bytes) of ``find ROOT -type f TESTS``."""
    out = subprocess.run(
        ["find", str(root), "-type", "f", *tests, "-printf", "%s\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return len(out), sum(int(size) for size in out)


def test_by_age_json_matches_find_mtime(tmp_path: Path, store: Path) -> None:
    root = aged_tree(tmp_path / "aged")
    scanned(root, store)
    result = breakdown(root, store, "age")
    rows = result["rows"]
    assert len(rows) == len(BUCKETS)  # every bucket, none in the future
    for row, (low, high) in zip(rows, BUCKETS, strict=True):
        tests = [] if low == 0 else ["-mtime", f"+{low - 1}"]  # age ≥ low days
        tests += [] if high is None else ["-mtime", f"-{high}"]  # age < high days
        assert (row["files"], row["bytes"]) == find_bytes(root, *tests), row
        assert (row["min_days"], row["max_days"]) == (low, high)
        assert row["files"] > 0
    assert sum(r["bytes"] for r in rows) == find_bytes(root)[1]
    assert rows[-1]["max_days"] is None  # NaN/NA as null


def test_age_by_extension_splits_the_same_bytes(tmp_path: Path, store: Path) -> None:
    root = aged_tree(tmp_path / "aged")
    scanned(root, store)
    rows = breakdown(root, store, "age", "--age-by", "extension")["rows"]
    per: Counter[str] = Counter()
    for row in rows:
        per[row["extension"]] += row["bytes"]
    assert dict(per) == {"bin": find_bytes(root, "-name", "*.bin")[1], "txt": 12}
    code, _, err = run("summary", str(root), "--store", str(store), "--age-by", "user")
    assert code == 2 and "--by age" in err and "Traceback" not in err


def find_owners(root: Path, field: str, *tests: str) -> Counter[int]:
    """Bytes per owner id (``%U`` uid, ``%G`` gid) of ``find ROOT TESTS``: each entry's size."""
    out = subprocess.run(
        ["find", str(root), *tests, "-printf", f"{field} %s\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    sums: Counter[int] = Counter()
    for line in out:
        owner, size = line.split()
        sums[int(owner)] += int(size)
    return sums


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another owner needs root")
def test_by_owner_json_matches_find_printf(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "owned"
    write(root / "mine" / "a", 10_000)
    write(root / "mine" / "b", 200)
    write(root / "theirs" / "c", 30_000)
    write(root / "theirs" / "deep" / "d", 4_000)
    write(root / "mixed" / "e", 500)
    os.symlink("mine/a", root / "link")
    for path in (root / "theirs", root / "theirs" / "c", root / "theirs" / "deep" / "d"):
        os.chown(path, 65534, 65534)
    os.chown(root / "mixed" / "e", 0, 65534)  # a user's file in another group
    scanned(root, store)
    for by, field, column in (("owner", "%U", "uid"), ("group", "%G", "gid")):
        result = breakdown(root, store, by)
        assert set(result) == {"root", "scan_id", "by", "partial", "rows"} and result["by"] == by
        rows = {row[column]: row for row in result["rows"]}
        assert {k: r["bytes"] for k, r in rows.items()} == dict(find_owners(root, field)), by
        listed = subprocess.run(
            ["find", str(root), "-type", "f", "-printf", f"{field}\n"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        files = Counter(int(owner) for owner in listed)
        assert {k: r["files"] for k, r in rows.items()} == {k: files[k] for k in rows}
        assert rows[65534]["owner"] in ("nobody", "nogroup", f"{column[0]}id 65534")
        for row in result["rows"]:
            assert all(isinstance(d["bytes"], int) for d in row["top_dirs"])
            assert isinstance(row["newest"], str) and "T" in row["newest"]
    theirs = next(r for r in breakdown(root, store, "owner")["rows"] if r["uid"] == 65534)
    assert theirs["top_dirs"][0]["path"] == str(root / "theirs")
    code, out, _ = run("summary", str(root), "--store", str(store), "--by", "owner")
    assert code == 0 and "theirs" in out


def test_a_bad_by_is_a_usage_error(typed_tree: Path, store: Path) -> None:
    scanned(typed_tree, store)
    code, out, err = run("summary", str(typed_tree), "--store", str(store), "--by", "size")
    assert code == 2 and out == ""
    assert "Invalid value for '--by'" in err and "owner" in err and "Traceback" not in err
    code, out, err = run(
        "summary", str(typed_tree), "--store", str(store), "--by", "size", "--json"
    )
    assert code == 2 and json.loads(out)["error"]["code"] == "bad-usage"


def test_by_without_a_snapshot_fails_as_the_summary_does(tmp_path: Path, store: Path) -> None:
    plain = run("summary", str(tmp_path), "--store", str(store), "--json")
    for by in ("owner", "type", "age"):
        code, out, err = run("summary", str(tmp_path), "--store", str(store), "--by", by, "--json")
        assert (code, json.loads(out)) == (plain[0], json.loads(plain[1])), err
        assert json.loads(out)["error"]["code"] == "snapshot-not-found"
        code, out, err = run("summary", str(tmp_path), "--store", str(store), "--by", by)
        assert code == 2 and "snapshot-not-found" in err and "Traceback" not in err


def test_the_help_says_what_each_choice_shows() -> None:
    code, out, _ = run("summary", "--help")
    assert code == 0
    text = " ".join(out.split())
    for word in ("owner (", "group (", "type (", "category (", "age ("):
        assert word in text, word


def test_a_partial_scan_says_its_breakdowns_are_lower_bounds(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "cut"
    for i in range(30):
        write(root / f"d{i}" / "f.bin", 100)
    code, out, err = run("scan", str(root), "--store", str(store), "--max-entries", "10", "--json")
    assert code == 0, out + err
    assert json.loads(out.splitlines()[-1])["partial"] is True
    for by in ("owner", "type", "age"):
        assert breakdown(root, store, by)["partial"] is True, by
        code, out, err = run("summary", str(root), "--store", str(store), "--by", by)
        assert code == 0 and "PARTIAL: figures are lower bounds" in out, out + err
    whole = tmp_path / "whole"
    write(whole / "f.bin", 5)
    scanned(whole, store)
    assert breakdown(whole, store, "type")["partial"] is False
    code, out, _ = run("summary", str(whole), "--store", str(store), "--by", "type")
    assert "PARTIAL" not in out

"""Breakdowns by owner, file type and age, held to what the filesystem and find(1) say."""

from __future__ import annotations

import collections
import grp
import os
import pwd
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.classify.filetypes import (
    CATEGORIES,
    EXTENSION_SQL,
    category_of,
    category_sql,
    extension_of,
)
from hygiene_nb.errors import UsageError
from hygiene_nb.query import views
from hygiene_nb.query.breakdowns import AGE_BUCKETS, AGE_EDGES_DAYS
from hygiene_nb.scan.owners import UNKNOWN_OWNER
from hygiene_nb.scan.snapshot import load_snapshot
from hygiene_nb.store import Store
from tests.helpers import as_format_1, write

DAY = 86_400


def keyed(frame: pd.DataFrame, key: str) -> dict[Any, dict[str, Any]]:
    """A view's rows by ``key``, as plain records."""
    return {row[key]: {str(k): v for k, v in row.items()} for row in frame.to_dict("records")}


def own_extension(name: str) -> str:
    """The extension rule written the plain way: after the last dot, tars whole, dotfiles none."""
    low = name.lower()
    stem, dot, tail = low.rpartition(".")
    if not dot or not stem or not tail:
        return ""
    for packed in ("gz", "bz2", "xz", "zst"):
        if tail == packed and stem.endswith(".tar") and len(stem) > len(".tar"):
            return f"tar.{packed}"
    return tail


def regular_files(root: Path) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of every regular file under ``root``, each inode once (first in walk)."""
    seen: set[tuple[int, int]] = set()
    found: list[tuple[str, os.stat_result]] = []
    for parent, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            st_ = os.lstat(os.path.join(parent, name))
            if not stat.S_ISREG(st_.st_mode):
                continue
            if st_.st_nlink > 1:
                if (st_.st_dev, st_.st_ino) in seen:
                    continue
                seen.add((st_.st_dev, st_.st_ino))
            found.append((name, st_))
    return found


@pytest.fixture
def typed_tree(tmp_path: Path) -> Path:
    root = tmp_path / "typed"
    write(root / "photos" / "a.JPG", 5_000)
    write(root / "photos" / "b.jpeg", 1_200)
    write(root / "photos" / "raw" / "c.CR2", 9_000)
    write(root / "backup" / "site.tar.gz", 7_000)
    write(root / "backup" / "site.TAR.ZST", 2_500)
    write(root / "backup" / "old.gz", 300)
    write(root / "backup" / "notes.tar", 800)
    write(root / "code" / "main.py", 640)
    write(root / "code" / "lib.rs", 420)
    write(root / "code" / "Makefile", 90)
    write(root / ".bashrc", 50)
    write(root / "data" / "table.csv", 4_400)
    write(root / "data" / "trailing.", 11)
    write(root / "data" / "weird.unknownext", 33)
    os.link(root / "data" / "table.csv", root / "data" / "same-table.CSV")  # counted once
    (root / "link.jpg").symlink_to("photos/a.JPG")  # a symlink is no file of any type
    return root


def test_by_type_matches_the_files_on_disk(typed_tree: Path, store: Path) -> None:
    api.scan_root(typed_tree, store=store)
    frame = views.by_type(str(typed_tree), store=store)
    rows = keyed(frame, "extension")
    expected_bytes: collections.Counter[str] = collections.Counter()
    for name, st_ in regular_files(typed_tree):
        expected_bytes[own_extension(name) or "(none)"] += st_.st_size
    assert {k: r["bytes"] for k, r in rows.items()} == dict(expected_bytes)
    assert rows["tar.gz"]["category"] == "archive"
    assert rows["tar.zst"]["files"] == 1 and rows["gz"]["files"] == 1
    assert rows["csv"]["files"] == 2  # two names, one inode's bytes
    assert rows["(none)"]["files"] == 3  # .bashrc, Makefile, "trailing."
    assert frame["share"].sum() == pytest.approx(1.0)
    assert frame["bytes"].is_monotonic_decreasing
    assert rows["jpg"]["examples"] == [str(typed_tree / "photos" / "a.JPG")]

    by_cat = keyed(views.by_type(str(typed_tree), store=store, by="category"), "category")
    expected_cat: collections.Counter[str] = collections.Counter()
    for ext, nbytes in expected_bytes.items():
        expected_cat[category_of("" if ext == "(none)" else ext)] += nbytes
    assert {k: r["bytes"] for k, r in by_cat.items()} == dict(expected_cat)
    assert by_cat["image"]["extensions"] == 3  # jpg, jpeg, cr2
    assert by_cat["image"]["examples"][0] == str(typed_tree / "photos" / "raw" / "c.CR2")


def test_the_examples_of_a_type_are_its_largest_files_ties_first_in_the_snapshot(
    tmp_path: Path, store: Path
) -> None:
    """Each extension's examples: its largest files, equal sizes in the snapshot's row order,
    a hard-linked inode at its first name only (the rows read back, ranked in Python)."""
    root = tmp_path / "ties"
    for d in range(4):
        for i in range(6):
            write(root / f"d{d}" / f"f{i}.log", 100 * (i % 3))  # sizes 0, 100, 200: ties
            write(root / f"d{d}" / f"g{i}.dat", 50 + d)
    os.link(root / "d0" / "f2.log", root / "d3" / "zz-linked.log")
    api.scan_root(root, store=store)
    rows = load_snapshot(Store(store), root=str(root)).to_pylist()
    first_name: dict[tuple[int, int], int] = {}
    ranked: dict[str, list[tuple[int, int, str]]] = collections.defaultdict(list)
    for row_no, row in enumerate(rows):
        if row["kind"] != "file":
            continue
        if row["nlink"] > 1 and first_name.setdefault((row["dev"], row["inode"]), row_no) != row_no:
            continue  # a later name of an inode already listed
        ranked[own_extension(row["name"])].append((-row["size"], row_no, row["path"]))
    frame = views.by_type(str(root), store=store, examples=3)
    got = {r["extension"]: r["examples"] for r in frame.to_dict("records")}
    assert got == {ext: [p for *_, p in sorted(found)[:3]] for ext, found in ranked.items()}


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("abcXYZ._-0 tarTARgzbxzs\n"),
        min_size=1,
        max_size=14,
    )
)
@example(".bashrc")
@example("a.tar.gz")
@example(".tar.gz")
@example("x.")
@example("..")
@example("a..b")
@example("A.TaR.Zst")
def test_the_sql_extension_rule_is_the_python_one(name: str) -> None:
    con = duckdb.connect()
    got = con.execute(f"SELECT {EXTENSION_SQL}, {category_sql()} FROM (SELECT ? AS name)", [name])
    row = got.fetchone()
    assert row is not None
    sql_ext, sql_cat = row
    assert sql_ext == extension_of(name) == own_extension(name)
    assert sql_cat == category_of(extension_of(name))


def test_every_extension_belongs_to_one_category() -> None:
    owners = collections.Counter(ext for exts in CATEGORIES.values() for ext in exts)
    assert [ext for ext, n in owners.items() if n > 1] == []
    assert all(ext == ext.lower() and not ext.startswith(".") for ext in owners)


def find_bytes(root: Path, *tests: str) -> int:
    out = subprocess.run(
        ["find", str(root), "-type", "f", *tests, "-printf", "%s\\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sum(int(n) for n in out)


def test_age_histogram_matches_find_mtime(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "aged"
    now = time.time()
    ages = {0.3: 100, 3: 200, 15: 400, 60: 800, 200: 1_600, 600: 3_200, 2_000: 6_400}
    for days, size in ages.items():
        for copy in range(2):
            path = write(root / f"d{copy}" / f"f{days}", size + copy)
            os.utime(path, (now - days * DAY, now - days * DAY))
    future = write(root / "future", 5)
    os.utime(future, (now + 10 * DAY, now + 10 * DAY))
    api.scan_root(root, store=store)
    frame = views.age_histogram(str(root), store=store)
    rows = keyed(frame, "bucket")
    lows = (0, *AGE_EDGES_DAYS)
    for label, low, high in zip(AGE_BUCKETS, lows, (*AGE_EDGES_DAYS, None), strict=True):
        tests = [] if high is None else ["-mtime", f"-{high}"]
        if low:
            tests += ["-mtime", f"+{low - 1}"]
        else:  # find counts an mtime in the future as less than a day old
            tests += ["!", "-newermt", f"@{now + DAY:.0f}"]
        assert rows[label]["bytes"] == find_bytes(root, *tests), label
        assert rows[label]["files"] == 2, label
        assert rows[label]["min_days"] == low, label
        if high is None:
            assert pd.isna(rows[label]["max_days"])
        else:
            assert rows[label]["max_days"] == high, label
    assert list(rows) == ["in the future", *AGE_BUCKETS]  # youngest first
    assert rows["in the future"]["bytes"] == 5
    assert frame["bytes"].sum() == find_bytes(root)

    by_ext = views.age_histogram(str(root), store=store, by="extension")
    names = [name for name, _ in regular_files(root)]
    assert set(by_ext["extension"]) == {own_extension(n) or "(none)" for n in names}
    assert by_ext["bytes"].sum() == find_bytes(root)


def test_an_empty_histogram_lists_every_bucket_at_zero(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "empty"
    (root / "only-dirs").mkdir(parents=True)
    api.scan_root(root, store=store)
    frame = views.age_histogram(str(root), store=store)
    assert list(frame["bucket"]) == list(AGE_BUCKETS)
    assert frame["bytes"].sum() == 0 and frame["share"].sum() == 0
    assert views.by_type(str(root), store=store).empty


def find_by_uid(root: Path) -> dict[int, int]:
    out = subprocess.run(
        ["find", str(root), "-printf", "%U %s\\n"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    sums: collections.Counter[int] = collections.Counter()
    for line in out:
        uid, size = line.split()
        sums[int(uid)] += int(size)
    return dict(sums)


def test_by_owner_matches_find_per_uid(
    tmp_path: Path, store: Path, other_user: tuple[int, int]
) -> None:
    uid, gid = other_user
    root = tmp_path / "shared"
    write(root / "mine" / "a.bin", 10_000)
    write(root / "mine" / "b.bin", 2_000)
    theirs = [write(root / "theirs" / "c.bin", 30_000), write(root / "mine" / "d.log", 4_000)]
    write(root / "theirs" / "e.bin", 500)  # a file of this process's user in their directory
    for path in [*theirs, root / "theirs"]:
        os.chown(path, uid, gid)
    api.scan_root(root, store=store)
    frame = views.by_owner(str(root), store=store)
    rows = keyed(frame, "uid")
    assert {k: r["bytes"] for k, r in rows.items()} == find_by_uid(root)
    me = os.geteuid()
    assert rows[uid]["files"] == 2 and rows[me]["files"] == 3
    assert rows[uid]["owner"] == pwd.getpwuid(uid).pw_name  # named as the scan found it
    assert rows[me]["owner"] == pwd.getpwuid(me).pw_name
    assert rows[uid]["share"] + rows[me]["share"] == pytest.approx(1.0)
    # top directories ranked by what the owner holds inside them, not by who owns them
    theirs_top = rows[uid]["top_dirs"]
    assert [d["path"] for d in theirs_top] == [str(root / "theirs"), str(root / "mine")]
    assert theirs_top[0]["bytes"] == 30_000 + os.lstat(root / "theirs").st_size
    assert theirs_top[1]["bytes"] == 4_000
    mine_top = {d["path"]: d["bytes"] for d in rows[me]["top_dirs"]}
    assert mine_top[str(root / "theirs")] == 500
    newest = max(os.lstat(p).st_mtime_ns for p in [*theirs, root / "theirs"])
    assert rows[uid]["newest"].value == newest

    groups = views.by_owner(str(root), store=store, by="group")
    assert keyed(groups, "gid")[gid]["bytes"] == rows[uid]["bytes"]
    assert keyed(groups, "gid")[gid]["owner"] == grp.getgrgid(gid).gr_name
    assert groups["bytes"].sum() == frame["bytes"].sum()


@pytest.mark.parametrize("lead", ["/", "//"])
def test_the_top_directories_of_an_owner_sum_everything_inside_them(
    tmp_path: Path, store: Path, lead: str
) -> None:
    """Each direct child's bytes: its own and those of every entry at any depth below it.

    Also under a root named with a leading "//" (POSIX lets it mean something else, so the
    scan keeps both slashes, and its paths start with them).
    """
    root = Path(lead + str(tmp_path / "deep").lstrip("/"))
    write(root / "a" / "b" / "c" / "d" / "one.bin", 3_000)
    write(root / "a" / "two.bin", 200)
    write(root / "e" / "f" / "three.bin", 1_500)
    write(root / "e.d" / "g" / "h" / "four.bin", 40)  # a sibling whose name extends another's
    write(root / "top.bin", 7)  # a file of the root is no directory of anyone's
    info = api.scan_root(str(root), store=store)
    assert info.root == str(root)  # as it was named
    frame = views.by_owner(str(root), store=store, top_dirs=10)
    (row,) = frame.to_dict("records")
    expected: dict[str, int] = {}
    for child in sorted(root.iterdir()):
        if not child.is_dir():
            continue
        total = child.lstat().st_size
        for parent, dirs, files in os.walk(child):
            total += sum(os.lstat(os.path.join(parent, name)).st_size for name in dirs + files)
        expected[str(root) + "/" + child.name] = total
    assert {d["path"]: d["bytes"] for d in row["top_dirs"]} == expected
    assert [d["bytes"] for d in row["top_dirs"]] == sorted(expected.values(), reverse=True)


def test_reclaimable_per_owner_adds_up_to_the_summary(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", 20)
    write(root / "src" / "m.py", 300)
    write(root / "__pycache__" / "m.cpython-311.pyc", 700)
    write(root / "build" / "lib" / "x.so", 2_000)
    write(root / "notes.txt", 90)
    api.scan_root(root, store=store)
    summary = api.summarize(str(root), store=store)
    frame = views.by_owner(str(root), store=store)
    assert frame["reclaimable_safe"].sum() == summary.reclaimable["safe"].bytes
    assert frame["reclaimable_caution"].sum() == summary.reclaimable["caution"].bytes
    assert summary.reclaimable["safe"].bytes > 0
    assert frame["bytes"].sum() == sum(r.bytes for r in summary.risk.values())


def test_an_old_snapshot_says_owner_unknown(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "old"
    write(root / "f.txt", 10)
    info = api.scan_root(root, store=store)
    as_format_1(info, store)
    frame = views.by_owner(str(root), store=store)
    assert list(frame["owner"]) == [UNKNOWN_OWNER]
    assert frame["bytes"].sum() == info.tree_bytes
    write(root / "g.txt", 5)
    api.scan_root(root, store=store)
    change = views.diff(str(root), store=store, by="owner")
    assert change["delta"].sum() == 5


def test_diff_by_type_and_age_adds_up_to_the_change_in_files(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "t"
    write(root / "a.csv", 1_000)
    write(root / "b.jpg", 2_000)
    old = api.scan_root(root, store=store)
    old_files = find_bytes(root)
    write(root / "c.CSV", 500)
    (root / "b.jpg").unlink()
    write(root / "sub" / "d.tar.gz", 300)
    api.scan_root(root, store=store)
    new_files = find_bytes(root)
    for by in ("type", "category", "age"):
        frame = views.diff(str(root), store=store, by=by)
        assert frame["delta"].sum() == new_files - old_files, by
        assert frame["old_bytes"].sum() == old_files, by
    by_type = keyed(views.diff(str(root), store=store, by="type"), "type")
    assert by_type["csv"]["delta"] == 500 and by_type["jpg"]["delta"] == -2_000
    assert by_type["tar.gz"]["new_entries"] == 1
    assert views.diff(str(root), store=store, old=old.scan_id, by="age").iloc[0]["age"] in (
        AGE_BUCKETS
    )


def test_bad_keys_are_usage_errors(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "f", 1)
    api.scan_root(root, store=store)
    with pytest.raises(UsageError, match="by must be one of"):
        views.by_owner(str(root), store=store, by="planet")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="by must be one of"):
        views.by_type(str(root), store=store, by="colour")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="by must be one of"):
        views.age_histogram(str(root), store=store, by="size")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="0 or more"):
        views.by_owner(str(root), store=store, top_dirs=-1)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_checkout_breaks_down_by_type(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root / "README.md", 120)
    write(root / "pkg" / "mod.py", 480)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x"],
        check=True,
    )
    api.scan_root(root, store=store)
    rows = keyed(views.by_type(str(root), store=store), "extension")
    expected: collections.Counter[str] = collections.Counter()
    for name, st_ in regular_files(root):
        expected[own_extension(name) or "(none)"] += st_.st_size
    assert {k: r["bytes"] for k, r in rows.items()} == dict(expected)  # objects, hooks, index
    assert rows["py"]["category"] == "code"


def test_a_diff_counts_excluded_entries_nowhere(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "ex"
    write(root / "keep.csv", 1_000)
    write(root / "skip" / "a.log", 7_000)
    write(root / "b.log", 300)
    api.scan_root(root, store=store, excludes=["*.log", "skip/"])
    write(root / "more.log", 5_555)
    write(root / "keep2.csv", 200)
    api.scan_root(root, store=store, excludes=["*.log", "skip/"])
    summary = api.summarize(str(root), store=store)
    for by in views.DIFF_BY:
        frame = views.diff(str(root), store=store, by=by)
        if by in ("type", "category", "age"):
            assert frame["delta"].sum() == 200, by  # the new csv; the new log was never read
        else:
            assert frame["new_bytes"].sum() == sum(r.bytes for r in summary.risk.values()), by
    assert "log" not in set(views.diff(str(root), store=store, by="type")["type"])

"""``diff`` and ``changed_entries`` held to a small reference on random trees scanned twice.

Between the two scans files go, grow, shrink, appear, and hard links are made and removed, so
that an inode's counted name moves. The reference reads both snapshots' rows in Python and
applies the definition: every entry adds its own bytes, and a hard-linked inode adds them once
per scan, at its first name (a name present in both scans first, then by parent and name);
an excluded entry counts nowhere.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.query import views
from hygiene_nb.scan.snapshot import load_snapshot
from hygiene_nb.store import Store
from tests.helpers import TREE_ENTRIES, TREE_EXCLUDES, TreeEntry, build_tree

Key = tuple[str | None, str]
_CHANGES = ("new", "gone", "grew", "shrank")


def _rows(store: Path, scan_id: str) -> dict[Key, dict[str, Any]]:
    """A snapshot's counted rows by (parent, name)."""
    table = load_snapshot(Store(store), scan_id=scan_id)
    return {(r["parent"], r["name"]): r for r in table.to_pylist() if not r["excluded"]}


def _counted(rows: dict[Key, dict[str, Any]], other: dict[Key, dict[str, Any]]) -> dict[Key, int]:
    """Each row's counted bytes: a linked inode's bytes at its first name only."""
    names: dict[tuple[int, int], list[Key]] = defaultdict(list)
    out = {}
    for key, r in rows.items():
        out[key] = int(r["size"] or 0)
        if r["kind"] != "dir" and (r["nlink"] or 0) > 1:
            names[(r["dev"], r["inode"])].append(key)
    for keys in names.values():
        first = min(keys, key=lambda k: (k not in other, k[0] or "", k[1]))
        for key in keys:
            if key != first:
                out[key] = 0
    return out


def reference(store: Path, root: Path, old: str, new: str) -> list[dict[str, Any]]:
    """One row per path in either scan: its top, kind, counted bytes and change."""
    o, n = _rows(store, old), _rows(store, new)
    oc, nc = _counted(o, n), _counted(n, o)
    out = []
    for key in sorted(o.keys() | n.keys(), key=lambda k: (k[0] or "", k[1])):
        row = n.get(key) or o[key]
        old_bytes, new_bytes = oc.get(key, 0), nc.get(key, 0)
        change = (
            "new" if key not in o
            else "gone" if key not in n
            else "grew" if new_bytes > old_bytes
            else "shrank" if new_bytes < old_bytes
            else "same"
        )  # fmt: skip
        parent, name = key
        if parent is None:
            top, path = ".", name
        else:
            rel = os.path.relpath(os.path.join(parent, name), root)
            top, path = rel.split("/", 1)[0], os.path.join(parent, name)
        out.append(
            {"top": top, "path": path, "kind": row["kind"], "old": old_bytes, "new": new_bytes,
             "change": change}
        )  # fmt: skip
    return out


def _by_dir(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    sums: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        s = sums[r["top"]]
        s["old_bytes"] += r["old"]
        s["new_bytes"] += r["new"]
        if r["change"] in ("new", "gone", "grew", "shrank"):
            s[f"{r['change']}_entries"] += 1
        s["new_entry_bytes"] += r["new"] if r["change"] == "new" else 0
        s["gone_entry_bytes"] += r["old"] if r["change"] == "gone" else 0
        s["grew_bytes"] += r["new"] - r["old"] if r["change"] == "grew" else 0
        s["shrank_bytes"] += r["old"] - r["new"] if r["change"] == "shrank" else 0
    return {k: {c: v for c, v in s.items() if v} for k, s in sums.items()}


def _mutate(root: Path, ops: list[tuple[int, str]], added: list[TreeEntry]) -> None:
    """Between the scans: each op on the op's file (by its index among the files, sorted)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for index, op in ops:
        if not files:
            break
        path = files[index % len(files)]
        if not path.exists():
            continue
        if op == "remove":
            path.unlink()
        elif op == "grow":
            with path.open("ab") as handle:
                handle.write(b"y" * 300)
        elif op == "shrink":
            os.truncate(path, path.stat().st_size // 2)
        elif op == "link" and not path.with_name(path.name + ".ln").exists():
            os.link(path, path.with_name(path.name + ".ln"))
        elif op == "copy":  # the same bytes, its own inode now: a hard link broken
            data, stat = path.read_bytes(), path.stat()
            path.unlink()
            path.write_bytes(data)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        elif op == "link-first":  # a new name that sorts before every other in its directory
            target = path.with_name("0" + path.name)
            if not target.exists():
                os.link(path, target)
    build_tree(root / "added", added)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    entries=TREE_ENTRIES,
    ops=st.lists(
        st.tuples(st.integers(0, 60), st.sampled_from(["remove", "grow", "shrink", "link",
                                                       "link-first", "copy"])),
        max_size=12,
    ),
    added=st.lists(st.builds(TreeEntry, path=st.just(("n.bin",)), size=st.integers(0, 900),
                             age_days=st.just(0), link_to=st.none()), max_size=1),
    excludes=TREE_EXCLUDES,
    passes=st.integers(1, 3),  # the join in one pass or in several (join_passes)
)  # fmt: skip
# the counted name of a linked inode removed: its other name, present in both, counts it now
@example(
    entries=[TreeEntry(("a", "m.pyc"), 900, 0, None), TreeEntry(("b", "x.tmp"), 0, 0, 0)],
    ops=[(0, "remove")],
    added=[],
    excludes=[],
    passes=2,
)
# a new first name of an old inode adds nothing: the old name, in both scans, keeps counting it
@example(
    entries=[TreeEntry(("a", "m.pyc"), 900, 0, None)],
    ops=[(0, "link-first"), (0, "grow")],
    added=[],
    excludes=[],
    passes=2,
)
# a link broken by a copy: the same size at the same path, but its bytes count now
@example(
    entries=[TreeEntry(("a", "m.pyc"), 900, 0, None), TreeEntry(("b", "x.tmp"), 0, 0, 0)],
    ops=[(1, "copy")],
    added=[],
    excludes=[],
    passes=2,
)
def test_diff_and_changed_entries_agree_with_the_definition(
    tmp_path_factory: pytest.TempPathFactory,
    entries: list[TreeEntry],
    ops: list[tuple[int, str]],
    added: list[TreeEntry],
    excludes: list[str],
    passes: int,
) -> None:
    base = tmp_path_factory.mktemp("diff")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    old = api.scan_root(root, store=store, excludes=excludes).scan_id
    _mutate(root, ops, added)
    new = api.scan_root(root, store=store, excludes=excludes).scan_id
    rows = reference(store, root, old, new)

    with mock.patch("hygiene_nb.query.changes.join_passes", return_value=passes):
        frame = views.diff(str(root), store=store)
        changed = views.changed_entries(str(root), store=store, limit=1_000)
    got = {
        str(r["dir"]): {c: int(v) for c, v in r.items() if c != "dir" and c != "delta" and v}
        for r in frame.to_dict("records")
    }
    assert got == _by_dir(rows)
    assert (frame["delta"] == frame["new_bytes"] - frame["old_bytes"]).all()

    want = sorted(
        (r for r in rows if r["change"] != "same" and r["kind"] != "dir"),
        key=lambda r: (-abs(r["new"] - r["old"]), r["path"]),
    )
    assert list(changed["path"]) == [r["path"] for r in want]
    assert list(changed["change"]) == [r["change"] for r in want]
    assert list(changed["delta"]) == [r["new"] - r["old"] for r in want]

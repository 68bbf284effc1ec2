"""A decision is on what was reviewed, not on a path: it records the snapshot and the digest.

A directory marked delete that gains a file afterwards, planned from a later scan, must be left
out (``changed-since-decision``) until a person decides again; an unchanged one still plans; a
cache whose new content is still all safe still plans; decisions from before the record existed
count as stale once.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.errors import UsageError
from hygiene_nb.ledger import Ledger
from hygiene_nb.pathnames import raw_path
from hygiene_nb.scan.digests import SnapshotDigests, entry_digests
from hygiene_nb.scan.index import find_scan
from hygiene_nb.scan.snapshot import entry_paths
from hygiene_nb.store import Store
from tests.helpers import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "r"
    write(root / "drafts" / "old.txt", 30)
    write(root / "drafts" / "sub" / "older.txt", 20)
    write(root / "scratch.bin", 100)
    write(root / "web" / "package.json", 2)
    write(root / "web" / "package-lock.json", 2)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 3000)
    return root


def codes(plan: api.PlanResult) -> dict[str, str]:
    return {e["path"]: e["code"] for e in plan.plan["excluded"]}


def candidates(plan: api.PlanResult) -> list[str]:
    return sorted(c["path"] for c in plan.plan["candidates"])


def test_a_decision_records_the_snapshot_and_the_entry_digest(tree: Path, store: Path) -> None:
    info = api.scan_root(tree, store=store)
    [ann] = api.annotate([str(tree / "drafts")], store=store, decision="delete")
    assert ann.snapshot_id == info.scan_id
    assert ann.digest is not None and ann.digest.startswith("sha256:")
    [noted] = api.annotate([str(tree / "drafts")], store=store, note="look", set_decision=False)
    assert (noted.snapshot_id, noted.digest) == (ann.snapshot_id, ann.digest)  # a note keeps it


def test_new_content_after_the_decision_is_left_out_until_decided_again(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    api.annotate([str(tree / "drafts"), str(tree / "scratch.bin")], store=store, decision="delete")
    write(tree / "drafts" / "sub" / "thesis.tex", 5000)  # the person's work, written later
    later = api.scan_root(tree, store=store)
    plan = api.make_plan(tree, store=store)
    assert codes(plan) == {str(tree / "drafts"): "changed-since-decision"}
    assert candidates(plan) == [str(tree / "scratch.bin")]  # unchanged: still planned
    [again] = api.annotate([str(tree / "drafts")], store=store, decision="delete")
    assert again.snapshot_id == later.scan_id
    plan = api.make_plan(tree, store=store)
    assert candidates(plan) == [str(tree / "drafts"), str(tree / "scratch.bin")]


def test_a_file_rewritten_between_two_scans_is_changed_since_decision(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    api.annotate([str(tree / "scratch.bin")], store=store, decision="delete")
    (tree / "scratch.bin").write_bytes(b"y" * 100)  # same size, new bytes
    api.scan_root(tree, store=store)
    plan = api.make_plan(tree, store=store)
    assert codes(plan) == {str(tree / "scratch.bin"): "changed-since-decision"}


def test_a_safe_cache_whose_new_content_is_still_safe_stays_planned(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    node_modules = tree / "web" / "node_modules"
    api.annotate([str(node_modules)], store=store, decision="delete")
    write(node_modules / "other" / "index.js", 10)  # npm installed one more package
    api.scan_root(tree, store=store)
    table = api.classify_snapshot(str(tree), store=store)
    paths = entry_paths(table).to_pylist()
    risks = dict(zip(paths, table.column("risk").to_pylist(), strict=True))
    assert {v for p, v in risks.items() if p.startswith(str(node_modules))} == {"safe"}
    plan = api.make_plan(tree, store=store)
    assert candidates(plan) == [str(node_modules)]


def test_decisions_written_before_the_record_existed_are_stale_once(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    with Ledger.open(Store(store)) as ledger:  # as a decision migrated from an older ledger
        ledger.annotate([str(tree / "scratch.bin")], decision="delete")
    plan = api.make_plan(tree, store=store)
    assert codes(plan) == {str(tree / "scratch.bin"): "changed-since-decision"}
    [message] = [e["message"] for e in plan.plan["excluded"]]
    assert "decide again" in message
    api.annotate([str(tree / "scratch.bin")], store=store, decision="delete")  # confirmed
    assert candidates(api.make_plan(tree, store=store)) == [str(tree / "scratch.bin")]


def test_an_upgraded_ledger_keeps_old_decisions_without_a_record(tree: Path, store: Path) -> None:
    st = Store(store).ensure()
    with Ledger.open(st):
        pass
    db = sqlite3.connect(st.ledger)  # take the file back to schema 3, as an older release left it
    for table in ("annotations", "annotation_history"):
        db.execute(f"ALTER TABLE {table} DROP COLUMN snapshot_id")
        db.execute(f"ALTER TABLE {table} DROP COLUMN digest")
    db.execute(
        "INSERT INTO annotations (path_raw, path, decision, note, by, rule, at)"
        " VALUES (?, ?, 'delete', NULL, 'human', NULL, '2026-11-01T00:00:00+00:00')",
        (str(tree / "scratch.bin").encode(), str(tree / "scratch.bin")),
    )
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    api.scan_root(tree, store=store)
    [old] = api.annotations_at([str(tree / "scratch.bin")], store=store)
    assert (old.decision, old.snapshot_id, old.digest) == ("delete", None, None)
    assert codes(api.make_plan(tree, store=store)) == {
        str(tree / "scratch.bin"): "changed-since-decision"
    }


def test_a_remembered_rule_records_the_snapshot_it_filled_from(tree: Path, store: Path) -> None:
    info = api.scan_root(tree, store=store)
    assert api.remember_rule("node_modules", "delete", store=store) == 1
    [filled] = api.annotations_at([str(tree / "web" / "node_modules")], store=store)
    assert (filled.by, filled.snapshot_id) == ("rule", info.scan_id)
    assert filled.digest is not None


def test_the_digest_of_an_unchanged_tree_is_the_same_in_every_scan(tree: Path, store: Path) -> None:
    from hygiene_nb.scan.digests import entry_digests

    first = api.scan_root(tree, store=store)
    second = api.scan_root(tree, store=store)
    st = Store(store)
    paths = [str(p).encode() for p in (tree, tree / "drafts", tree / "drafts" / "sub")]
    paths.append(str(tree / "scratch.bin").encode())
    a = entry_digests(st, find_scan(st, scan_id=first.scan_id), paths)
    b = entry_digests(st, find_scan(st, scan_id=second.scan_id), paths)
    assert len(a) == 4 and a == b
    write(tree / "drafts" / "sub" / "new", 1)
    third = api.scan_root(tree, store=store)
    c = entry_digests(st, find_scan(st, scan_id=third.scan_id), paths)
    changed = {p for p in paths if a[p] != c[p]}
    assert changed == {str(p).encode() for p in (tree, tree / "drafts", tree / "drafts" / "sub")}


def test_the_widget_shows_stale_decisions_and_records_the_snapshot_on_screen(
    tree: Path, store: Path
) -> None:
    from hygiene_nb.notebook.ui import Annotator

    first = api.scan_root(tree, store=store)
    api.annotate([str(tree / "drafts")], store=store, decision="delete")
    write(tree / "drafts" / "thesis.tex", 5000)
    second = api.scan_root(tree, store=store)
    panel = Annotator(str(tree), store=store)
    drafts = str(tree / "drafts").encode()
    assert panel.info.scan_id == second.scan_id
    assert panel.stale == {drafts}
    [row] = [r for r in panel.rows if r.path_raw == drafts]
    assert "stale" in row.info.value
    assert panel.decide([drafts], "delete")
    assert panel.stale == set()
    [ann] = api.annotations_at([drafts], store=store)
    assert ann.snapshot_id == second.scan_id
    # an older snapshot on screen: the decision is recorded as made on that one
    older = Annotator(str(tree), store=store, scan_id=first.scan_id)
    assert older.decide([str(tree / "scratch.bin").encode()], "delete")
    [made] = api.annotations_at([str(tree / "scratch.bin")], store=store)
    assert made.snapshot_id == first.scan_id


def test_a_safe_file_that_changed_is_still_changed_since_decision(tree: Path, store: Path) -> None:
    """Only a whole directory that stays all safe is exempt; a single file is what was seen."""
    pyc = write(tree / "pkg" / "__pycache__" / "mod.cpython-311.pyc", 40)
    write(tree / "pkg" / "mod.py", 10)
    api.scan_root(tree, store=store)
    table = api.classify_snapshot(str(tree), store=store)
    risks = dict(zip(entry_paths(table).to_pylist(), table.column("risk").to_pylist(), strict=True))
    assert risks[str(pyc)] == "safe"
    api.annotate([str(pyc)], store=store, decision="delete")
    pyc.write_bytes(b"z" * 41)
    api.scan_root(tree, store=store)
    assert codes(api.make_plan(tree, store=store)) == {str(pyc): "changed-since-decision"}


def test_digests_hashed_from_the_rows_are_the_ones_the_snapshot_scan_gives(
    tricky_tree: Path, store: Path
) -> None:
    """Every kind of entry, a name that is not UTF-8, an excluded subtree (no digest), format 1."""
    write(tricky_tree / "skipme" / "x", 3)
    info = api.scan_root(tricky_tree, store=store, excludes=("skipme/",))
    st = Store(store)
    table = api.classify_snapshot(str(tricky_tree), store=store)
    raws = [raw_path(row) for row in table.to_pylist()]
    scanned = entry_digests(st, info, raws)
    hashed = SnapshotDigests(st, info).of_rows(table)
    assert hashed == scanned
    assert os.fsencode(tricky_tree / "skipme") not in hashed  # excluded: not seen whole
    assert os.fsencode(tricky_tree) not in hashed  # and so not the root holding it
    assert os.fsencode(tricky_tree) + b"/bad/name-\xff\xfe" in hashed
    assert len(hashed) > len(raws) // 2
    old = dataclasses.replace(info, format_version=1)
    assert SnapshotDigests(st, old).of_rows(table) == entry_digests(st, old, raws) == {}


def test_given_digests_are_recorded_and_need_their_snapshot(tree: Path, store: Path) -> None:
    info = api.scan_root(tree, store=store)
    drafts = str(tree / "drafts").encode()
    with pytest.raises(UsageError, match="snapshot"):
        api.annotate([drafts], store=store, decision="delete", digests={drafts: "sha256:x"})
    assert api.annotations_at([drafts], store=store) == []
    with Ledger.open(Store(store)) as ledger:
        [ann] = api.annotate(
            [drafts, str(tree / "scratch.bin")],
            store=store,
            decision="delete",
            snapshot=info.scan_id,
            digests={drafts: "sha256:given"},
            ledger=ledger,
        )[:1]
        assert ledger.annotations_at([drafts]) == [ann]  # written through it, still open
    assert (ann.snapshot_id, ann.digest) == (info.scan_id, "sha256:given")
    [other] = api.annotations_at([str(tree / "scratch.bin")], store=store)
    assert other.digest is None  # not given: no digest recorded (a plan leaves it out)

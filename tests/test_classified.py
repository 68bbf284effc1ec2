"""The classification kept beside a snapshot, and the summary as queries over it.

The summary's queries are checked against ``classify.summary``'s definition over an Arrow table
(the reference) on random trees; the kept verdicts against a fresh classification; and the key
against each thing the verdicts rest on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.api.classification import classify_scan, stored_classification
from hygiene_nb.api.snapshots import scan_time_ns
from hygiene_nb.classify import queries
from hygiene_nb.classify.classification import VERDICT_COLUMNS
from hygiene_nb.classify.stored import kept_git_parents
from hygiene_nb.classify.summary import kept_bytes, summarize_table
from hygiene_nb.query import views
from hygiene_nb.scan.index import classified_dir, find_scan
from hygiene_nb.scan.snapshot import query_engine
from hygiene_nb.store import Store
from tests.helpers import TREE_ENTRIES, TREE_EXCLUDES, TreeEntry, build_tree, write

DAY = 86_400


def kept_files(store: Path, root: Path) -> list[Path]:
    st_ = Store(store)
    info = find_scan(st_, root=str(root))
    return sorted(classified_dir(st_, info).glob("*.parquet"))


def reference(store: Path, root: Path, *, top: int = 5, rules: Path | None = None) -> Any:
    """The summary by the in-memory definition: a fresh classification, summed in Arrow."""
    st_ = Store(store)
    info = find_scan(st_, root=str(root))
    now = scan_time_ns(info)
    table, _ = classify_scan(st_, info, rules, now_ns=now)
    return summarize_table(table, info, top=top, now_ns=now)


def project(root: Path) -> Path:
    """A small home-like tree: rebuildable parts, a key, a log, personal files, a hard link."""
    write(root / "web" / "package.json", 20)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 3000)
    write(root / "web" / "app.log", 400)
    write(root / "web" / "server.pem", 5)
    write(root / "Documents" / "a.pdf", 200)
    write(root / "src" / "__pycache__" / "m.pyc", 70)
    os.link(root / "src" / "__pycache__" / "m.pyc", root / "src" / "twin")
    return root


# --------------------------------------------------------------------------- property


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=TREE_ENTRIES, top=st.integers(1, 6), excludes=TREE_EXCLUDES)
# a safe name of an inode that also has an unknown name frees nothing; two safe names free it once
@example(
    entries=[
        TreeEntry(("a", "notes.txt"), 100, 0, None),
        TreeEntry(("__pycache__", "m.pyc"), 0, 0, 0),
    ],
    top=2,
    excludes=[],
)
@example(
    entries=[TreeEntry(("x.tmp",), 100, 400, None), TreeEntry(("__pycache__", "m.pyc"), 0, 0, 0)],
    top=1,
    excludes=[],
)
# an excluded name of a hard-linked inode: the kept name counts it (at its first counted name)
@example(
    entries=[TreeEntry(("a", "app.log"), 100, 400, None), TreeEntry(("b", "m.pyc"), 0, 0, 0)],
    top=2,
    excludes=["*.log"],
)
def test_the_summary_queries_agree_with_the_in_memory_definition(
    tmp_path_factory: pytest.TempPathFactory,
    entries: list[TreeEntry],
    top: int,
    excludes: list[str],
) -> None:
    base = tmp_path_factory.mktemp("prop")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store, excludes=excludes)
    assert api.summarize(str(root), store=store, top=top, as_of_scan=True) == reference(
        store, root, top=top
    )
    # and again from the kept verdicts
    assert api.summarize(str(root), store=store, top=top, as_of_scan=True) == reference(
        store, root, top=top
    )
    # and with every ranking's ties "too many" to fetch by row: each made whole in one query
    with mock.patch.object(queries, "_TIES", 0):
        whole = api.summarize(str(root), store=store, top=top, as_of_scan=True)
    assert whole == reference(store, root, top=top)


# --------------------------------------------------------------------------- kept verdicts


def test_verdicts_are_kept_once_and_read_back_equal_to_a_fresh_classification(
    tmp_path: Path, store: Path
) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    first = api.summarize(str(root), store=store)
    [kept] = kept_files(store, root)
    before = kept.stat()
    assert api.summarize(str(root), store=store) == first
    after = kept.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # reused
    st_ = Store(store)
    info = find_scan(st_, root=str(root))
    now = time.time_ns()
    fresh, _ = classify_scan(st_, info, None, now_ns=now)
    read_back = stored_classification(st_, info, None, now_ns=now).table
    assert (
        read_back.select(list(VERDICT_COLUMNS)).to_pylist()
        == fresh.select(list(VERDICT_COLUMNS)).to_pylist()
    )
    assert read_back.column("risk").type == pa.string()


def test_encoded_verdicts_hold_the_same_values_as_the_decoded(tmp_path: Path, store: Path) -> None:
    """What the widget reads: the text columns as kept, the same rows and values."""
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    now = time.time_ns()
    for _ in range(2):  # computed now (and kept), then read back from the kept file
        encoded = api.classify_snapshot(str(root), store=store, now_ns=now, encoded=True)
        plain = api.classify_snapshot(str(root), store=store, now_ns=now)
        assert encoded.column_names == plain.column_names
        for name in ("risk", "rule", "group", "claim", "content_risk"):
            assert pa.types.is_dictionary(encoded.column(name).type)
            assert plain.column(name).type == pa.string()
        assert encoded.to_pylist() == plain.to_pylist()
        assert encoded.num_rows > 5


def test_a_changed_rules_file_gives_a_new_key_and_removes_the_old_file(
    tmp_path: Path, store: Path
) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    api.summarize(str(root), store=store)
    [old] = kept_files(store, root)
    Store(store).rules.write_text(
        '[[rule]]\nid = "pdfs"\nname = "*.pdf"\nrisk = "safe"\nclaim = "Printed copies"\n'
    )
    s = api.summarize(str(root), store=store, as_of_scan=True)
    [new] = kept_files(store, root)
    assert new.name != old.name and not old.exists()
    assert s == reference(store, root, top=20)
    assert s.risk["safe"].entries >= 1


def test_a_file_git_starts_tracking_is_protected_without_a_new_scan(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    write(root / "repo" / "notes.log", 300)
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    api.scan_root(root, store=store)
    before = api.summarize(str(root), store=store)
    subprocess.run(["git", "-C", str(root / "repo"), "add", "notes.log"], check=True)
    after = api.summarize(str(root), store=store)
    rows = api.classify_snapshot(str(root), store=store).to_pylist()
    log = next(row for row in rows if row["name"] == "notes.log")
    assert log["rule"] == "git-tracked" and log["risk"] == "high"
    assert after.risk["high"].entries > before.risk["high"].entries
    assert len(kept_files(store, root)) == 1


def test_the_kept_file_records_where_the_git_work_trees_are(tmp_path: Path, store: Path) -> None:
    """Read back from the footer, they give the same key: the kept verdicts are reused.

    A file kept without them (by an earlier version) is reused too: the snapshot says then.
    """
    root = tmp_path / "r"
    for repo in ("b-repo", "a/nested"):
        write(root / repo / "notes.log", 300)
        subprocess.run(["git", "init", "-q", str(root / repo)], check=True)
    api.scan_root(root, store=store)
    first = api.summarize(str(root), store=store)
    st_ = Store(store)
    info = find_scan(st_, root=str(root))
    assert kept_git_parents(st_, info) == [str(root / "a" / "nested"), str(root / "b-repo")]
    [kept] = kept_files(store, root)
    table = pq.read_table(kept)
    pq.write_table(table.replace_schema_metadata(None), kept)  # as an earlier version kept it
    assert kept_git_parents(st_, info) is None
    before = kept.stat()
    assert api.summarize(str(root), store=store) == first
    after = kept.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # reused
    kept.write_bytes(b"not parquet")  # no footer to read: computed again, with the parents
    assert api.summarize(str(root), store=store) == first
    assert kept_git_parents(st_, info) == [str(root / "a" / "nested"), str(root / "b-repo")]


def test_new_verdicts_take_the_work_trees_from_the_snapshot_not_a_footer(
    tmp_path: Path, store: Path
) -> None:
    """A footer that names no work tree (written otherwise) never unprotects a tracked file."""
    root = tmp_path / "r"
    write(root / "repo" / "notes.log", 300)
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    subprocess.run(["git", "-C", str(root / "repo"), "add", "notes.log"], check=True)
    api.scan_root(root, store=store)
    api.summarize(str(root), store=store)
    [kept] = kept_files(store, root)
    table = pq.read_table(kept)
    metadata = {b"hygiene_nb.git_parents": b"[]"}
    pq.write_table(table.replace_schema_metadata(metadata), kept)
    api.summarize(str(root), store=store)
    rows = api.classify_snapshot(str(root), store=store).to_pylist()
    log = next(row for row in rows if row["name"] == "notes.log")
    assert log["rule"] == "git-tracked" and log["risk"] == "high"
    st_ = Store(store)
    assert kept_git_parents(st_, find_scan(st_, root=str(root))) == [str(root / "repo")]


def test_a_damaged_kept_file_is_computed_again(tmp_path: Path, store: Path) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    good = api.summarize(str(root), store=store)
    [kept] = kept_files(store, root)
    kept.write_bytes(kept.read_bytes()[:100])
    assert api.summarize(str(root), store=store) == good
    [again] = kept_files(store, root)
    assert pq.read_metadata(again).num_rows > 0


def test_kept_verdicts_of_another_shape_are_not_used(tmp_path: Path, store: Path) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    good = api.summarize(str(root), store=store)
    [kept] = kept_files(store, root)
    table = pq.read_table(kept)
    pq.write_table(table.slice(0, table.num_rows - 1), kept)  # a row short
    assert api.summarize(str(root), store=store) == good


def test_a_store_that_cannot_keep_them_still_gives_the_summary(tmp_path: Path, store: Path) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    (store / "classified").write_text("not a directory")
    assert api.summarize(str(root), store=store, as_of_scan=True) == reference(store, root, top=20)
    assert (store / "classified").read_text() == "not a directory"


def test_a_store_that_cannot_keep_them_still_gives_the_plan_preview(
    tmp_path: Path, store: Path
) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    api.annotate([str(root / "web" / "app.log")], store=store, decision="delete")
    kept = api.preview_plan(root, store=store)  # from the kept file
    for path in kept_files(store, root):
        path.unlink()
    (store / "classified").rename(store / "classified.away")
    (store / "classified").write_text("not a directory")
    assert api.preview_plan(root, store=store) == kept  # from the verdicts computed now
    assert kept["delete_count"] == 1 and kept["candidates"] == 1
    assert (store / "classified").read_text() == "not a directory"


def test_an_age_rule_measures_ages_at_the_time_asked(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "old.dat", 100)
    stamp = time.time() - 10 * DAY
    os.utime(root / "old.dat", (stamp, stamp))
    api.scan_root(root, store=store)
    Store(store).rules.write_text(
        '[[rule]]\nid = "old"\nname = "*.dat"\nmin_age_days = 5\nrisk = "safe"\n'
        'claim = "Old data"\n'
    )
    now = time.time_ns()
    older = api.classify_snapshot(str(root), store=store, now_ns=now).to_pylist()
    earlier = now - 9 * DAY * 10**9
    younger = api.classify_snapshot(str(root), store=store, now_ns=earlier).to_pylist()
    risk = {r["name"]: r["risk"] for r in older}
    assert risk["old.dat"] == "safe"
    assert {r["name"]: r["risk"] for r in younger}["old.dat"] != "safe"


def test_pruning_a_snapshot_removes_its_kept_verdicts(tmp_path: Path, store: Path) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    api.summarize(str(root), store=store)
    st_ = Store(store)
    first = find_scan(st_, root=str(root))
    directory = classified_dir(st_, first)
    assert directory.is_dir()
    api.scan_root(root, store=store)
    api.prune_snapshots(store=store, keep=1)
    assert not directory.exists()


def test_a_plan_never_takes_its_verdicts_from_the_kept_file(tmp_path: Path, store: Path) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    api.summarize(str(root), store=store)
    [kept] = kept_files(store, root)
    forged = pq.read_table(kept)
    schema = forged.schema
    rows = forged.num_rows
    forged = forged.set_column(
        schema.get_field_index("risk"),
        schema.field("risk"),
        pa.array(["safe"] * rows).dictionary_encode().cast(schema.field("risk").type),
    )
    forged = forged.set_column(
        schema.get_field_index("protected"), schema.field("protected"), pa.array([False] * rows)
    )
    pq.write_table(forged, kept)
    key = str(root / "web" / "server.pem")
    shown = api.classify_snapshot(str(root), store=store).to_pylist()
    risk = {os.path.join(r["parent"] or "", r["name"]): r["risk"] for r in shown}
    assert risk[key] == "safe"  # the views read what was kept ...
    api.annotate([key], store=store, decision="delete")
    plan = api.make_plan(root, store=store).plan
    assert key not in [c["path"] for c in plan["candidates"]]  # ... a plan classifies afresh
    assert any(e["path"] == key for e in plan["excluded"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=TREE_ENTRIES)
def test_a_directory_contains_protected_exactly_when_something_below_it_is(
    tmp_path_factory: pytest.TempPathFactory, entries: list[TreeEntry]
) -> None:
    base = tmp_path_factory.mktemp("prop")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store)
    rows = api.classify_snapshot(str(root), store=store).to_pylist()
    path = {id(r): os.path.join(r["parent"], r["name"]) if r["parent"] else r["name"] for r in rows}
    protected = [path[id(r)] for r in rows if r["protected"]]
    for row in rows:
        if row["kind"] != "dir":
            continue
        below = any(p.startswith(path[id(row)] + "/") for p in protected)
        if not row["protected"]:
            assert not below, path[id(row)]
        elif row["rule"] == "contains-protected":
            assert below, path[id(row)]


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=TREE_ENTRIES, children=st.integers(1, 4), deeper=st.booleans())
def test_the_treemap_query_draws_what_the_whole_table_draws(
    tmp_path_factory: pytest.TempPathFactory, entries: list[TreeEntry], children: int, deeper: bool
) -> None:
    base = tmp_path_factory.mktemp("prop")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store)
    info = find_scan(Store(store), root=str(root))
    dirs = sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())
    under = str(dirs[0]) if deeper and dirs else str(root)
    whole = views.browse_frame(views.classified_as_of_scan(info, store=store))
    expected = views.treemap_nodes(whole, under, children=children)
    got = views.treemap_of(str(root), store=store, under=under, children=children)
    assert got.to_dict("records") == expected.to_dict("records")


def test_queries_draw_no_progress_bar_and_spill_into_a_private_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # DuckDB's own default would be ./.tmp
    monkeypatch.setenv("HYGIENE_NB_QUERY_MEMORY", "64MB")
    with query_engine() as con:
        bar, limit, spill = con.execute(
            "SELECT current_setting('enable_progress_bar'), current_setting('memory_limit'), "
            "current_setting('temp_directory')"
        ).fetchone() or (None, None, None)
    assert bar is False
    assert limit == "61.0 MiB"  # 64 MB as DuckDB shows it
    assert not Path(spill).is_relative_to(tmp_path)
    assert os.stat(spill).st_mode & 0o777 == 0o700


def test_a_query_memory_duckdb_cannot_take_is_a_usage_error(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "r")
    api.scan_root(root, store=store)
    monkeypatch.setenv("HYGIENE_NB_QUERY_MEMORY", "lots")
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "summary", str(root), "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "HYGIENE_NB_QUERY_MEMORY" in done.stderr and "Traceback" not in done.stderr


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    entries=TREE_ENTRIES,
    picks=st.lists(
        st.tuples(st.integers(0, 60), st.sampled_from(["keep", "delete", "unsure"])), max_size=8
    ),
)
def test_the_coverage_query_counts_what_the_whole_table_counts(
    tmp_path_factory: pytest.TempPathFactory, entries: list[TreeEntry], picks: list[tuple[int, str]]
) -> None:
    base = tmp_path_factory.mktemp("prop")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store)
    everything = [root, *sorted(root.rglob("*"))]
    for i, decision in picks:  # on files, directories and the root itself
        api.annotate([str(everything[i % len(everything)])], store=store, decision=decision)
    info = find_scan(Store(store), root=str(root))
    table = api.load(
        store=store,
        scan_id=info.scan_id,
        columns=["path", "size", "alloc", "kind", "dev", "inode", "nlink"],
    )
    covering = views.decided_rows(table.column("path"), views.human_decisions(store, str(root)))
    reviewed = np.array([c is not None for c in covering], dtype=bool)
    got = views.review_coverage(str(root), store=store)
    assert (got.entries, got.bytes) == (table.num_rows, kept_bytes(table, ~np.zeros_like(reviewed)))
    assert (got.reviewed_entries, got.reviewed_bytes) == (
        int(reviewed.sum()),
        kept_bytes(table, reviewed),
    )
    for decision in ("keep", "delete", "unsure"):
        mask = covering == decision
        assert got.by_decision[decision] == (int(mask.sum()), kept_bytes(table, mask))

"""The notebook views: history, change between scans, risk over time, review state."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import pandas as pd
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.classify.summary import cleanliness, risk_mix
from hygiene_nb.errors import SnapshotNotFound, UsageError
from hygiene_nb.query import changes, views
from tests.helpers import write


def scan(root: Path, store: Path) -> str:
    return api.scan_root(root, store=store).scan_id


@pytest.fixture
def changed(tmp_path: Path, store: Path) -> tuple[Path, str, str]:
    """A tree scanned twice: between the scans a file appears, one grows, one goes, one links."""
    root = tmp_path / "tree"
    write(root / "a" / "kept.bin", 1_000)
    write(root / "b" / "log.txt", 2_000)
    write(root / "c" / "old.tmp", 3_000)
    write(root / "d" / "shared.bin", 5_000)
    first = scan(root, store)
    write(root / "a" / "new.bin", 700)
    with (root / "b" / "log.txt").open("ab") as handle:
        handle.write(b"y" * 300)
    (root / "c" / "old.tmp").unlink()
    os.link(root / "d" / "shared.bin", root / "a" / "0-link-to-shared.bin")  # sorts first
    second = scan(root, store)
    return root, first, second


def test_history_has_one_row_per_scan_with_the_scans_totals(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, first, second = changed
    hist = views.history(str(root), store=store)
    assert list(hist["scan_id"]) == [first, second]
    infos = {s.scan_id: s for s in api.list_snapshots(store=store)}
    assert list(hist["bytes"]) == [infos[first].tree_bytes, infos[second].tree_bytes]
    assert list(hist["files"]) == [4, 4]  # one new, one gone; the new link is not a new file
    assert (hist["fs_free"] > 0).all()


def test_diff_by_directory_names_each_kind_of_change(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, first, second = changed
    by_dir = views.diff(str(root), store=store).set_index("dir")
    assert by_dir.loc["a", "new_entries"] == 2  # the new file and the new link name
    assert by_dir.loc["a", "new_entry_bytes"] == 700  # the link adds nothing: inode counted once
    assert by_dir.loc["b", "grew_entries"] == 1 and by_dir.loc["b", "grew_bytes"] == 300
    assert by_dir.loc["c", "gone_entries"] == 1 and by_dir.loc["c", "gone_entry_bytes"] == 3_000
    assert by_dir.loc["d", "delta"] == 0  # the linked file stays counted at its old name
    assert by_dir.attrs["old"] == first and by_dir.attrs["new"] == second


def test_diff_deltas_add_up_to_the_change_in_the_roots_total(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, first, second = changed
    infos = {s.scan_id: s for s in api.list_snapshots(store=store)}
    # the keys over every entry; type, category and age count regular files only
    # (tests/test_breakdowns.py holds those to the files' bytes)
    for by in ("dir", "group", "risk", "owner", "owner_group"):
        frame = views.diff(str(root), store=store, by=by)
        assert frame["delta"].sum() == (infos[second].tree_bytes or 0) - (
            infos[first].tree_bytes or 0
        ), by
        assert frame["old_bytes"].sum() == infos[first].tree_bytes, by


def test_changed_entries_lists_the_largest_changes_first(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    frame = views.changed_entries(str(root), store=store, relative=True)
    assert list(frame["path"]) == ["c/old.tmp", "a/new.bin", "b/log.txt", "a/0-link-to-shared.bin"]
    assert list(frame["change"]) == ["gone", "new", "grew", "new"]
    assert list(frame["delta"]) == [-3_000, 700, 300, 0]  # a new name of a counted inode


def test_a_look_alike_name_is_another_entry_in_the_diff(tmp_path: Path, store: Path) -> None:
    """A name that is not UTF-8 shows as ``a\\xff``; a literal ``a\\xff`` is another file."""
    root = tmp_path / "tree"
    write(root / "keep.bin", 10)
    raw = os.fsencode(root) + b"/d/a\xff.bin"
    os.makedirs(os.path.dirname(raw))
    with open(raw, "wb") as handle:
        handle.write(b"x" * 400)
    scan(root, store)
    os.unlink(raw)
    write(root / "d" / "a\\xff.bin", 400)  # the same text, the same size: another name
    scan(root, store)

    by_dir = views.diff(str(root), store=store).set_index("dir")
    assert by_dir.loc["d", "gone_entries"] == 1 and by_dir.loc["d", "gone_entry_bytes"] == 400
    assert by_dir.loc["d", "new_entries"] == 1 and by_dir.loc["d", "new_entry_bytes"] == 400
    changed = views.changed_entries(str(root), store=store, relative=True)
    assert list(zip(changed["path"], changed["change"], strict=True)) == [
        ("d/a\\xff.bin", "gone"),  # the same text and change in bytes: listed by change
        ("d/a\\xff.bin", "new"),
    ]


@pytest.mark.parametrize("passes", [2, 5])
def test_a_diff_joined_in_passes_is_the_diff_joined_at_once(
    changed: tuple[Path, str, str], store: Path, passes: int
) -> None:
    """Every key, and the changed entries, the same whether the scans are joined in one pass or
    in several: a hard link made between the scans and a look-alike name among them."""
    root, _, _ = changed
    raw = os.fsencode(root) + b"/a/x\xff.bin"
    with open(raw, "wb") as handle:
        handle.write(b"x" * 400)
    write(root / "a" / "x\\xff.bin", 400)  # the same text, another name
    scan(root, store)

    def every_view() -> list[pd.DataFrame]:
        frames = [views.diff(str(root), store=store, by=by) for by in changes.DIFF_BY]
        return [*frames, views.changed_entries(str(root), store=store, limit=100)]

    at_once = every_view()
    with mock.patch("hygiene_nb.query.changes.join_passes", return_value=passes) as split:
        in_passes = every_view()
    assert split.call_count == len(at_once)
    for one, other in zip(at_once, in_passes, strict=True):
        pd.testing.assert_frame_equal(one, other)
    assert at_once[0]["new_entries"].sum() == 2  # the look-alike pair, both new


def test_the_join_takes_as_many_passes_as_the_query_memory_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hygiene_nb.scan.snapshot import query_engine

    assert changes.memory_bytes("488.2 MiB") == int(488.2 * 2**20)
    assert changes.memory_bytes("1.8 GiB") == int(1.8 * 2**30)
    assert changes.memory_bytes("512 bytes") is None  # not a unit DuckDB shows
    assert changes.memory_bytes("unlimited") is None
    per_row = changes.JOIN_BYTES_PER_ROW
    for limit, rows, passes in [
        ("512MB", 1_000_000, 1),  # the default holds a 1M-entry pair at once
        ("512MB", 5_000_000, -(-5_000_000 * per_row // int(488.2 * 2**20))),
        ("2GB", 5_000_000, 2),
        ("1MB", 10_000_000, changes.MAX_JOIN_PASSES),  # past the cap, DuckDB spills instead
    ]:
        monkeypatch.setenv("HYGIENE_NB_QUERY_MEMORY", limit)
        with query_engine() as con:
            assert changes.join_passes(con, rows) == passes, limit
    assert changes.join_passes(query_engine(), 0) == 1


def test_diff_needs_two_scans_and_refuses_scans_of_different_roots(
    tmp_path: Path, store: Path
) -> None:
    write(tmp_path / "one" / "f", 10)
    write(tmp_path / "two" / "f", 10)
    first = scan(tmp_path / "one", store)
    with pytest.raises(SnapshotNotFound, match="scan it again"):
        views.diff(str(tmp_path / "one"), store=store)
    other = scan(tmp_path / "two", store)
    with pytest.raises(UsageError, match="different roots"):
        views.diff(store=store, old=first, new=other)
    with pytest.raises(UsageError, match="by must be"):
        views.diff(str(tmp_path / "one"), store=store, by="size")  # type: ignore[arg-type]


def test_child_growth_follows_each_direct_child_across_scans(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, first, second = changed
    growth = views.child_growth(str(root), store=store, top=2)
    assert set(growth["scan_id"]) == {first, second}
    latest = api.load(
        str(root), store=store, scan_id=second, columns=["depth", "name", "tree_bytes"]
    ).to_pandas()
    children = latest[latest["depth"] == 1].sort_values("tree_bytes", ascending=False)
    per_scan = growth.groupby("scan_id")["bytes"].sum()
    assert per_scan[second] == children["tree_bytes"].sum()
    named = set(growth[growth["scan_id"] == second]["child"])
    assert named == {*children["name"].head(2), "(other)"}


def test_risk_history_classifies_every_scan(changed: tuple[Path, str, str], store: Path) -> None:
    root, first, second = changed
    frame = views.risk_history(str(root), store=store)
    assert list(frame["scan_id"].unique()) == [first, second]
    assert set(frame["risk"]) == {"safe", "caution", "personal", "high", "unknown"}
    entries = frame.groupby("scan_id")["entries"].sum()
    infos = {s.scan_id: s for s in api.list_snapshots(store=store)}
    assert entries[first] == infos[first].entries and entries[second] == infos[second].entries
    assert frame["score"].between(0, 100).all()
    for scan_id in (first, second):  # the queries' figures are the in-memory definition's
        table = views.classified_as_of_scan(infos[scan_id], store=store)
        got = frame[frame["scan_id"] == scan_id].set_index("risk")
        for level, stats in risk_mix(table).items():
            assert tuple(got.loc[level, ["bytes", "alloc", "entries"]]) == (
                stats.bytes,
                stats.alloc,
                stats.entries,
            )
        assert set(got["score"]) == {cleanliness(table, partial=infos[scan_id].partial).score}


def test_review_coverage_counts_a_directory_decision_for_its_whole_subtree(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    before = views.review_coverage(str(root), store=store)
    assert before.reviewed_entries == 0 and before.share_bytes == 0
    api.annotate([str(root / "b")], store=store, decision="keep")
    api.annotate([str(root / "a" / "new.bin")], store=store, decision="delete")
    api.annotate([str(root / "a")], store=store, note="only a note: not a decision")
    cover = views.review_coverage(str(root), store=store)
    assert cover.by_decision["keep"][0] == 2  # b and b/log.txt
    assert cover.by_decision["keep"][1] == (root / "b").stat().st_size + 2_300
    assert cover.by_decision["delete"] == (1, 700)
    assert cover.reviewed_entries == 3
    assert 0 < cover.share_entries < 1 and 0 < cover.share_bytes < 1


def test_a_nearer_decision_overrides_its_ancestors() -> None:
    import pyarrow as pa

    paths = pa.array(["/r", "/r/a", "/r/a/x", "/r/a-b", "/r/a/y/z", "/r/ab"])
    got = views.decided_rows(paths, {"/r/a": "delete", "/r/a/y": "keep"})
    assert list(got) == [None, "delete", "delete", None, "keep", None]


_SEGMENTS = st.sampled_from(["a", "b", "a-b", "ab", "é", "z0", "a.b"])


@settings(max_examples=150, deadline=None)
@given(
    tree=st.lists(st.lists(_SEGMENTS, min_size=1, max_size=4), min_size=1, max_size=30),
    picks=st.lists(st.tuples(st.integers(0, 29), st.sampled_from(["keep", "delete"])),
                   max_size=8),
    elsewhere=st.lists(st.tuples(st.lists(_SEGMENTS, min_size=1, max_size=4),
                                 st.sampled_from(["keep", "delete", "unsure"])), max_size=8),
)  # fmt: skip
def test_each_path_gets_the_decision_of_its_nearest_decided_ancestor(
    tree: list[list[str]],
    picks: list[tuple[int, str]],
    elsewhere: list[tuple[list[str], str]],
) -> None:
    import pyarrow as pa

    paths = sorted({"/r/" + "/".join(parts) for parts in tree})
    # decisions on paths that are not among those asked about (as with a treemap's few nodes
    # against the whole ledger): some cover none of them, some are their ancestors
    decided = {"/r/" + "/".join(parts): d for parts, d in elsewhere}
    decided.update({paths[i % len(paths)]: d for i, d in picks})

    def nearest(path: str) -> str | None:
        while path != "/r":
            if path in decided:
                return decided[path]
            path = path.rsplit("/", 1)[0]
        return None

    shuffled = paths[::-1]
    got = views.decided_rows(pa.array(shuffled), decided)
    assert list(got) == [nearest(p) for p in shuffled]
    # the decisions that can cover them: on one of them, or on a directory above one
    parents = {p.rsplit("/", 1)[0] for p in paths}
    over = views.decisions_above(decided, parents, exact=set(paths))
    assert set(over) <= set(decided)
    assert list(views.decided_rows(pa.array(shuffled), over)) == list(got)
    # and only those: what could cover no path asked about is left out
    for key in over:
        base = key.rstrip("/")
        assert key in paths or any(p == base or p.startswith(base + "/") for p in parents)


def _covering(path: str, decided: dict[str, str]) -> str | None:
    """The definition: the longest key that is the path or an ancestor of it."""
    keys = [k for k in decided if path == k or path.startswith(k.rstrip("/") + "/")]
    return decided[max(keys, key=len)] if keys else None


@settings(max_examples=200, deadline=None)
@example(  # the same directory decided twice, with and without its slash: the longer is nearer
    paths=[["a", "b"], ["a"], []], keys=[(["a"], False, "keep"), (["a"], True, "delete")]
)
@example(paths=[["a"], []], keys=[([], False, "unsure"), (["a", "b"], True, "keep")])  # the root
@given(
    paths=st.lists(st.lists(_SEGMENTS, min_size=0, max_size=4), min_size=1, max_size=40),
    keys=st.lists(
        st.tuples(
            st.lists(_SEGMENTS, min_size=0, max_size=4),
            st.booleans(),  # written with a trailing slash
            st.sampled_from(["keep", "delete", "unsure"]),
        ),
        max_size=40,
    ),
)
def test_both_ways_of_covering_agree_with_the_definition(
    paths: list[list[str]], keys: list[tuple[list[str], bool, str]]
) -> None:
    """Walking each path's ancestors and sorting once give the same answer as the definition,
    with keys at the root, with trailing slashes, and with as many keys as paths or more."""
    import numpy as np
    import pyarrow as pa

    from hygiene_nb.query.review import _covering_sorted, _covering_walked

    asked = ["/" + "/".join(parts) for parts in paths]
    decided = {
        ("/" + "/".join(parts)) + ("/" if slash and parts else ""): d for parts, slash, d in keys
    }
    want = [_covering(p, decided) for p in asked]
    text = np.asarray(asked, dtype=object)
    assert list(_covering_walked(text, decided)) == want
    if decided:
        assert list(_covering_sorted(text, pa.array(asked), decided)) == want
    assert list(views.decided_rows(pa.array(asked), decided)) == want


def test_pending_decisions_lists_unsure_and_deletes_still_present(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    api.annotate([str(root / "a")], store=store, decision="unsure", note="ask Ana")
    api.annotate([str(root / "b" / "log.txt")], store=store, decision="delete")
    api.annotate([str(root / "c" / "old.tmp")], store=store, decision="delete")  # already gone
    api.annotate([str(root / "d")], store=store, decision="keep")
    frame = views.pending_decisions(str(root), store=store)
    assert list(frame["path"]) == [str(root / "b" / "log.txt"), str(root / "a")]
    browsed = views.browse_frame(api.classify_snapshot(str(root), store=store))
    assert list(frame["bytes"]) == [2_300, browsed.set_index("path").loc[str(root / "a"), "bytes"]]
    assert frame.loc[1, "note"] == "ask Ana"


def test_pending_decisions_find_the_root_and_odd_names_by_their_exact_text(
    tmp_path: Path, store: Path
) -> None:
    """Each waiting path's bytes are its own row's: the root (a row without a parent), a name
    with spaces, a decomposed and a composed accent, a name ending like a sibling's path."""
    root = tmp_path / "t"
    names = ["a b", "cafe\u0301", "caf\u00e9", "x", "y-x"]
    for i, name in enumerate(names):
        write(root / "d" / name, 100 * (i + 1))
    write(root / "d" / "sub" / "x", 7)
    scan(root, store)
    asked = [root, root / "d", root / "d" / "sub", *(root / "d" / n for n in names)]
    api.annotate([str(p) for p in asked], store=store, decision="unsure")
    api.annotate([str(root / "d" / "nowhere")], store=store, decision="delete")  # not held
    frame = views.pending_decisions(str(root), store=store)
    browsed = views.browse_frame(api.classify_snapshot(str(root), store=store))
    want = browsed.set_index("path")["bytes"]
    assert sorted(frame["path"]) == sorted(str(p) for p in asked)
    for path, size in zip(frame["path"], frame["bytes"], strict=True):
        assert size == want[path], path
    assert list(frame["bytes"]) == sorted(frame["bytes"], reverse=True)


def test_plan_preview_matches_the_exported_plan(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    api.annotate([str(root / "b")], store=store, decision="delete")
    api.annotate([str(root / "b" / "log.txt")], store=store, decision="delete")  # folded
    preview = views.plan_preview(str(root), store=store)
    plan = api.make_plan(root, store=store)
    assert preview["candidates"] == plan.candidates == 1
    assert preview["reclaim_bytes"] == plan.reclaim_bytes


def test_plan_preview_tallies_by_exact_bytes_where_a_name_is_not_utf8(
    tmp_path: Path, store: Path
) -> None:
    """A name that is not valid UTF-8 beside one literally named like its text: the preview
    tells them apart by their bytes (its tally), as the exported plan does."""
    root = tmp_path / "t"
    odd = os.fsencode(root / "d") + b"/caf\xe9"
    write(root / "d" / "caf\\xe9", 300)  # the literal text the odd name is shown as
    write(root / "d" / "keep-me", 7)
    write(root / "e" / "f", 40)
    with open(odd, "wb") as handle:
        handle.write(b"x" * 1000)
    scan(root, store)
    api.annotate([odd, os.fsencode(root / "e")], store=store, decision="delete")
    api.annotate([str(root / "d" / "keep-me")], store=store, decision="keep")
    preview = views.plan_preview(str(root), store=store)
    plan = api.make_plan(root, store=store)
    assert preview["candidates"] == plan.candidates == 2
    own = os.lstat(root / "e").st_size  # the directory's own bytes, as the scan read them
    assert preview["reclaim_bytes"] == plan.reclaim_bytes == 1000 + 40 + own


def test_treemap_nodes_stay_within_budget_and_areas_add_up(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "wide"
    for i in range(30):
        for j in range(12):
            write(root / f"d{i:02d}" / f"f{j:02d}", 100 + i * 10 + j)
    write(root / "loose.bin", 5_000)
    scan(root, store)
    frame = views.browse_frame(api.classify_snapshot(str(root), store=store))
    api.annotate([str(root / "d25")], store=store, decision="keep")
    nodes = views.treemap_nodes(
        frame, str(root), decisions=views.human_decisions(store, str(root)),
        max_nodes=120, children=10,
    )  # fmt: skip
    assert len(nodes) <= 120
    assert nodes["id"].is_unique
    sums = nodes.groupby("parent")["bytes"].sum()
    for node_id, size in zip(nodes["id"], nodes["bytes"], strict=True):
        assert size >= sums.get(node_id, 0), node_id  # branchvalues="total" holds
    top = nodes[nodes["parent"] == str(root)]
    own = int(frame.set_index("path").loc[str(root), "bytes"])  # type: ignore[arg-type]
    assert top["bytes"].sum() <= own
    assert (nodes["id"] == str(root) + "/(other)").any()  # 31 children, 10 named
    decided = nodes.set_index("id")["decision"]
    assert decided[str(root / "d25")] == "keep"
    assert decided[str(root / "d25" / "f03")] == "keep"  # covered by its parent's decision
    assert pd.isna(decided[str(root / "d29")])


def test_executions_view_is_empty_before_anything_ran(store: Path) -> None:
    api.open_store(store)
    frame = views.executions(store=store)
    assert frame.empty and "in_quarantine" in frame.columns


def test_browse_frame_keeps_unreadable_sizes_unknown(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "t"
    write(root / "ok" / "f", 10)
    scan(root, store)
    frame = views.browse_frame(api.classify_snapshot(str(root), store=store))
    assert frame["bytes"].dtype == pd.Int64Dtype()
    row = frame.set_index("path").loc[str(root / "ok")]
    assert row["files"] == 1 and row["kind"] == "dir"


def test_history_views_can_stop_at_a_given_scan(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, first, second = changed
    assert list(views.history(str(root), store=store, scan_id=first)["scan_id"]) == [first]
    assert set(views.child_growth(str(root), store=store, scan_id=first)["scan_id"]) == {first}
    assert set(views.risk_history(str(root), store=store, scan_id=first)["scan_id"]) == {first}
    assert len(views.history(str(root), store=store, scan_id=second)) == 2


def test_pending_counts_say_when_a_size_is_unknown(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    api.annotate([str(root / "a")], store=store, decision="unsure")
    api.annotate([str(root / "gone-before-the-scan")], store=store, decision="unsure")
    api.annotate([str(root / "b" / "log.txt")], store=store, decision="delete")
    counts = views.pending_counts(str(root), store=store).set_index("decision")
    assert counts.loc["unsure", "entries"] == 2 and counts.loc["unsure", "unknown"] == 1
    assert counts.loc["delete", "bytes"] == 2_300 and counts.loc["delete", "unknown"] == 0
    # counted from the waiting decisions a caller read already: the same figures
    waiting = views.pending_decisions(str(root), store=store)
    assert views.pending_counts(pending=waiting).equals(counts.reset_index())


def test_a_report_classifies_a_snapshot_once_until_the_rules_change(
    changed: tuple[Path, str, str], store: Path
) -> None:
    root, _, _ = changed
    info = views.resolve_scan(str(root), store=store)
    first = views.classified_as_of_scan(info, store=store)
    [kept_file] = (store / "classified").rglob("*.parquet")
    made = kept_file.stat()
    assert views.classified_as_of_scan(info, store=store) == first  # read back, not recomputed
    now = kept_file.stat()
    assert (now.st_ino, now.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)
    (store / "rules.toml").write_text(
        '[[rule]]\nid = "mine"\nname = "*.bin"\nrisk = "safe"\nclaim = "mine"\n'
    )
    again = views.classified_as_of_scan(info, store=store)
    assert again is not first
    kept = again.filter(pc.equal(again.column("name"), "kept.bin"))
    assert kept.column("rule").to_pylist() == ["user:mine"]  # the new rules are in force


def test_the_frame_and_table_indexes_draw_every_directory_as_the_whole_frame_does(
    tricky_tree: Path, store: Path
) -> None:
    """Look-alike directories too: ``caf\\xe9`` typed out and the byte 0xE9 read the same.

    A ``TableIndex`` (the widget's: no whole frame) lists, finds and draws the same rows as a
    ``FrameIndex`` of the whole frame, row numbers and column types included.
    """
    for name in (b"caf\\xe9", b"caf\xe9"):
        folder = os.fsencode(tricky_tree) + b"/look/" + name
        os.makedirs(folder)
        for i in range(3):
            write(Path(os.fsdecode(folder + b"/f%d" % i)), len(name) * 10 + i)
    for i in range(60):  # more children than are named: an "(other)" box
        write(tricky_tree / "wide" / f"w{i:02d}", i)
    scan(tricky_tree, store)
    table = api.classify_snapshot(str(tricky_tree), store=store)
    frame = views.browse_frame(table)
    index = views.FrameIndex(frame)
    by_table = views.TableIndex(table)
    folders = [str(p) for p in frame.loc[frame["kind"] == "dir", "path"]]
    assert str(tricky_tree / "look" / "caf\\xe9") in folders
    for shown in folders:
        whole = views.treemap_nodes(frame, shown, max_nodes=200, children=10)
        indexed = views.treemap_nodes(frame, shown, max_nodes=200, children=10, index=index)
        pd.testing.assert_frame_equal(indexed, whole)
        drawn = whole[(whole["parent"] == "") | (whole["parent"] == shown)]
        for by_parent in (None, index):
            one = views.treemap_nodes(
                frame, shown, max_nodes=200, children=10, index=by_parent, levels=1
            )
            pd.testing.assert_frame_equal(one, drawn)
        listed = frame[frame["parent"] == shown]
        pd.testing.assert_frame_equal(index.children(shown), listed)
        pd.testing.assert_frame_equal(by_table.children(shown), listed)
        pd.testing.assert_frame_equal(by_table.named(shown), frame[frame["path"] == shown])
        pd.testing.assert_frame_equal(
            views.treemap_nodes(None, shown, max_nodes=200, children=10, index=by_table), whole
        )
        pd.testing.assert_frame_equal(
            views.treemap_nodes(None, shown, max_nodes=200, children=10, index=by_table, levels=1),
            drawn,
        )
    tops = [str(p) for p in frame.loc[frame["parent"].isna(), "path"]]
    assert len(tops) == 1
    pd.testing.assert_frame_equal(by_table.named(tops[0]), frame[frame["path"] == tops[0]])
    assert by_table.children("/no/such/directory").empty
    assert list(by_table.children("/no/such/directory").columns) == list(frame.columns)
    assert (
        views.treemap_nodes(frame, str(tricky_tree / "wide"), children=10)["label"] == "(50 more)"
    ).any()
    with pytest.raises(ValueError, match="another frame"):
        views.treemap_nodes(frame.copy(), str(tricky_tree), index=index)
    with pytest.raises(ValueError, match="another frame"):
        views.treemap_nodes(frame, str(tricky_tree), index=by_table)
    with pytest.raises(ValueError, match="a frame or an index"):
        views.treemap_nodes(None, str(tricky_tree))

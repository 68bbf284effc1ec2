"""The plan summary kept as a tally equals the summary computed from scratch, whatever happens.

``PlanTally`` is what the widget shows after each click; ``select_candidates`` then
``selection_summary`` is the definition (what ``make_plan`` puts in the plan file). Random
sequences of decisions (keep, delete, unsure, a note alone, cleared; by a person, a rule or an
agent) on a real scanned tree with nested directories, hard links across directories, a
symlink, a fifo, look-alike names, a protected and an excluded directory and paths the snapshot
does not hold must leave the two equal after every step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.api.classification import stored_classification
from hygiene_nb.ledger import Annotation, display_path
from hygiene_nb.pathnames import raw_path
from hygiene_nb.plan import document
from hygiene_nb.plan.document import SnapshotIndex, select_candidates, selection_summary
from hygiene_nb.plan.preview import preview_summary
from hygiene_nb.plan.tally import TALLY_COLUMNS, PlanTally, tally_table
from hygiene_nb.scan import snapshot
from hygiene_nb.scan.index import find_scan
from hygiene_nb.scan.snapshot import entry_paths
from tests.helpers import write

Scanned = tuple[str, pa.Table, SnapshotIndex, list[bytes]]


@pytest.fixture(scope="module", params=["undecodable", "utf-8", "utf-8, paths read"])
def scanned(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Scanned]:
    """A tree with every edge; in ``utf-8`` every name is valid UTF-8 and look-alike.

    Without undecodable names no two text paths collide, so paths are looked up many at once
    (a hash of them) and sorted by DuckDB: here from the first one, not only at 64 and 20,000.
    An index answers its first look-ups by reading every path, then sorts: with undecodable
    names it does both, in ``utf-8`` it sorts at once, and in ``paths read`` never.
    """
    utf8 = request.param.startswith("utf-8")
    scans = {"undecodable": 16, "utf-8": 0}.get(request.param, 10**9)
    base = tmp_path_factory.mktemp("tally")
    root = base / "r"
    write(root / "a" / "f1", 5000)
    os.link(root / "a" / "f1", root / "a" / "f1-same-dir")
    write(root / "a" / "b" / "own", 40)
    os.link(root / "a" / "f1", root / "a" / "b" / "f1-nested")
    write(root / "a" / "b" / "c" / "deep", 7)
    write(root / "d" / "e" / "g", 123)
    os.link(root / "a" / "f1", root / "d" / "e" / "f1-cousin")
    os.link(root / "d" / "e" / "g", root / "a" / "b" / "c" / "g-link")
    write(root / "d" / "h", 300)
    (root / "d" / "to-a").symlink_to(root / "a")
    os.mkfifo(root / "d" / "fifo")
    write(root / "p" / ".ssh" / "id", 10)  # protected, and so is p (it contains it)
    write(root / "p" / "notes", 11)
    write(root / "skipme" / "x", 12)  # excluded: not read whole
    write(root / "cache" / "c1.tmp", 2000)
    write(root / "cache" / "c2.tmp", 3000)
    twins = os.fsencode(root / "twins")
    os.makedirs(twins)
    alike = (
        (b"caf\\xe9", "café".encode(), "cafe\u0301".encode(), b"a-b", b"a b", b"a0")
        if utf8
        else (b"caf\\xe9", b"caf\xe9")  # display alike
    )
    for size, name in enumerate(alike, start=20):
        with open(twins + b"/" + name, "wb") as handle:
            handle.write(b"x" * size)
    os.makedirs(twins + b"/a")
    with open(twins + b"/a/inside", "wb") as handle:
        handle.write(b"x" * 9)
    store = base / "store"
    api.scan_root(root, store=store, excludes=("skipme/",))
    table = api.classify_snapshot(str(root), store=store)
    table = table.append_column("path", entry_paths(table)).combine_chunks()
    raws = sorted(
        raw_path(row)
        for row in table.select(["parent", "name", "parent_raw", "name_raw"]).to_pylist()
    )
    gone = [
        os.fsencode(root / "gone"),
        os.fsencode(root / "a" / "gone"),
        os.fsencode(root / "a" / "b" / "c" / "gone"),
    ]
    if utf8:  # shown as the literal "caf\\xe9" the snapshot holds, but other bytes
        gone.append(twins + b"/caf\xe9")
    at_once = 0 if utf8 else document._LOOK_UP_ONE_BY_ONE
    in_sql = 0 if utf8 else snapshot._PATHS_IN_SQL
    with (
        mock.patch.object(document, "_LOOK_UP_ONE_BY_ONE", at_once),
        mock.patch.object(snapshot, "_PATHS_IN_SQL", in_sql),
        mock.patch.object(document, "_SCANS_BEFORE_SORTING", scans),
    ):
        index = SnapshotIndex(table)
        assert index.undecodable is not utf8
        yield str(root), table, index, raws + gone


def _from_scratch(scanned: Scanned, state: dict[bytes, Annotation]) -> dict[str, int]:
    root, table, index, _ = scanned
    return selection_summary(
        select_candidates(table, list(state.values()), root=root, index=index), table
    )


_DECISIONS = st.sampled_from(["keep", "delete", "unsure", "note", None])
_BY = st.sampled_from(["human", "human", "human", "rule", "agent"])


@st.composite
def _steps(draw: st.DrawFn, paths: list[bytes]) -> list[tuple[list[bytes], str | None, str, bool]]:
    step = st.tuples(
        st.lists(st.sampled_from(paths), min_size=1, max_size=4, unique=True),
        _DECISIONS,
        _BY,
        st.booleans(),  # read the whole state again (``resync``) instead of ``update``
    )
    return draw(st.lists(step, max_size=12))


def _annotation(raw: bytes, decision: str | None, by: str) -> Annotation | None:
    if decision is None:
        return None
    if decision == "note":
        return Annotation(display_path(raw), raw, None, "a note", by, None, "t")
    return Annotation(display_path(raw), raw, decision, None, by, None, "t")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_tally_equals_the_summary_from_scratch_after_any_decisions(
    scanned: Scanned, data: st.DataObject
) -> None:
    root, table, index, paths = scanned
    start = data.draw(
        st.dictionaries(st.sampled_from(paths), st.tuples(_DECISIONS, _BY), max_size=8)
    )
    state = {
        raw: ann for raw, (d, by) in start.items() if (ann := _annotation(raw, d, by)) is not None
    }
    tally = PlanTally(table, list(state.values()), root=root, index=index)
    assert tally.summary() == _from_scratch(scanned, state)
    stepwise = PlanTally(table, [], root=root, index=index)  # the same state, as one change
    stepwise.update(list(state.values()))
    assert stepwise.summary() == tally.summary()
    assert all(stepwise.left_out(raw) == tally.left_out(raw) for raw in paths)
    narrow = PlanTally(_narrow(table), list(state.values()), root=root)  # the preview's
    assert narrow.summary() == tally.summary()
    for chosen, decision, by, whole in data.draw(_steps(paths)):
        written = [a for raw in chosen if (a := _annotation(raw, decision, by)) is not None]
        for raw in chosen:
            state.pop(raw, None)
        state.update((a.path_raw, a) for a in written)
        if whole:
            tally.resync(list(state.values()))
            narrow.resync(list(state.values()))
        else:
            tally.update(written, gone=chosen)
            narrow.update(written, gone=chosen)
        assert tally.summary() == _from_scratch(scanned, state)
        assert narrow.summary() == tally.summary()
        assert dict(tally.annotations) == state
        _same_reasons(scanned, state, tally)
        _same_reasons(scanned, state, narrow)


def _narrow(table: pa.Table) -> pa.Table:
    """What ``preview_plan`` tallies: the columns a tally reads (``tally_table``)."""
    return tally_table(table)


def test_a_classified_snapshot_holds_every_column_a_tally_reads(scanned: Scanned) -> None:
    """So ``tally_table`` never leaves a check without its column (they skip a missing one)."""
    _, table, _, _ = scanned
    assert set(TALLY_COLUMNS) <= set(table.column_names)
    narrow = tally_table(table)
    assert narrow.column_names == list(TALLY_COLUMNS)
    assert all(
        narrow.column(c) is table.column(c) or narrow.column(c).equals(table.column(c))
        for c in TALLY_COLUMNS
    )


def _same_reasons(scanned: Scanned, state: dict[bytes, Annotation], tally: PlanTally) -> None:
    """``left_out`` gives each delete decision the exclusion ``select_candidates`` gives it."""
    root, table, index, _ = scanned
    sel = select_candidates(table, list(state.values()), root=root, index=index)
    excluded = {e.path_raw: (e.code, e.message) for e in sel.excluded}
    for raw, ann in state.items():
        found = tally.left_out(raw)
        if ann.decision != "delete":
            assert found is None
        else:
            assert (None if found is None else (found.code, found.message)) == excluded.get(raw)


def test_nested_and_hard_linked_decisions_count_each_byte_once(scanned: Scanned) -> None:
    """The cases the property is about, spelled out: an inode counts once, when all its names go."""
    root, table, index, _ = scanned
    tally = PlanTally(table, [], root=root, index=index)
    rows = table.select(["path", "kind", "size", "nlink"]).to_pylist()
    size = {r["path"]: r["size"] for r in rows}

    def own(top: str) -> int:
        """Bytes of what is at or under ``top`` and has no other name (directories: their own)."""
        top = os.path.join(root, top)
        inside = [r for r in rows if r["path"] == top or r["path"].startswith(top + "/")]
        return sum(r["size"] for r in inside if r["kind"] == "dir" or r["nlink"] == 1)

    def decide(decision: str | None, name: str) -> dict[str, int]:
        raw = os.fsencode(os.path.join(root, name))
        ann = _annotation(raw, decision, "human")
        tally.update([ann] if ann else [], gone=[raw])
        return tally.summary()

    f1, g = size[os.path.join(root, "a", "f1")], size[os.path.join(root, "d", "e", "g")]
    assert decide("delete", "a/f1")["reclaim_bytes"] == 0  # three more names of it remain
    first = decide("delete", "a")
    assert (first["candidates"], first["folded"]) == (1, 1)  # a/f1 is inside a: once
    assert first["reclaim_bytes"] == own("a")  # f1 and g have names outside a
    assert decide("delete", "d/e/f1-cousin")["reclaim_bytes"] == own("a") + f1  # all of f1's
    both = decide("delete", "d")
    assert (both["candidates"], both["folded"]) == (2, 2)
    assert both["reclaim_bytes"] == own("a") + own("d") + f1 + g
    kept = decide("keep", "a/b/c/deep")  # a holds a kept entry: a/f1 stands on its own
    assert (kept["candidates"], kept["excluded"], kept["folded"]) == (2, 1, 1)
    assert kept["reclaim_bytes"] == own("d")  # neither f1 nor g loses every name now
    assert kept["keep_bytes"] == size[os.path.join(root, "a", "b", "c", "deep")]
    assert decide(None, "a/b/c/deep") == both


def test_an_index_of_another_table_is_refused(scanned: Scanned) -> None:
    root, table, index, _ = scanned
    with pytest.raises(ValueError, match="another table"):
        PlanTally(table.slice(0), [], root=root, index=index)
    assert PlanTally(table, [], root=root).summary() == _from_scratch(scanned, {})


def test_every_path_deleted_at_once_counts_as_from_scratch(scanned: Scanned) -> None:
    """The first count of many decisions: every path of the tree (and some it lacks) deleted."""
    root, table, index, paths = scanned
    state = {
        raw: Annotation(display_path(raw), raw, "delete", None, "human", None, "t") for raw in paths
    }
    whole = PlanTally(table, list(state.values()), root=root, index=index)
    assert whole.summary() == _from_scratch(scanned, state)
    assert whole.summary()["excluded"] > 0 and whole.summary()["candidates"] > 0
    _same_reasons(scanned, state, whole)


def test_paths_looked_up_many_at_once_are_found_as_one_by_one(scanned: Scanned) -> None:
    _, table, index, paths = scanned
    texts = [display_path(raw) for raw in paths]
    with mock.patch.object(document, "_LOOK_UP_ONE_BY_ONE", 0):
        many = index.rows_of(texts, paths)
    assert many == [index.row_of(text, raw) for text, raw in zip(texts, paths, strict=True)]
    assert None in many and set(many) - {None} == set(range(table.num_rows))


def test_the_index_holds_every_path_in_code_point_order(scanned: Scanned) -> None:
    """What the binary searches assume, the paths made by DuckDB or by Arrow, column or not."""
    _, table, index, _ = scanned
    texts = entry_paths(table).to_pylist()
    assert list(index.sorted) == sorted(texts)
    assert [texts[row] for row in index.order] == list(index.sorted)
    for in_sql in (0, 10**9):
        with mock.patch.object(snapshot, "_PATHS_IN_SQL", in_sql):
            for given in (table, table.drop_columns(["path"])):
                order = snapshot.path_order(entry_paths(given).combine_chunks())
                assert order.tolist() == index.order.tolist()
                assert SnapshotIndex(given).order.tolist() == index.order.tolist()
                soon = SnapshotIndex(given)
                soon.sort_soon()  # in another thread, found done by the first look-up
                assert list(soon.sorted) == sorted(texts)
                assert soon.order.tolist() == index.order.tolist()


def test_a_sort_that_failed_in_its_thread_fails_the_look_up(scanned: Scanned) -> None:
    _, table, _, _ = scanned
    broken = SnapshotIndex(table)
    with mock.patch.object(document, "path_order", side_effect=MemoryError("no room")):
        broken.sort_soon()
        with pytest.raises(MemoryError, match="no room"):
            broken.row_of(table.column("path")[0].as_py())


def test_look_ups_that_read_every_path_give_what_the_sorted_paths_give(scanned: Scanned) -> None:
    _, table, _, paths = scanned
    with mock.patch.object(document, "_SCANS_BEFORE_SORTING", 10**9):
        read = SnapshotIndex(table)
        found = [(read.named(display_path(r)), read.below(display_path(r), r)) for r in paths]
        assert "order" not in read.__dict__  # answered without a sort
    with mock.patch.object(document, "_SCANS_BEFORE_SORTING", 0):
        ordered = SnapshotIndex(table)
        for raw, (named, below) in zip(paths, found, strict=True):
            assert ordered.named(display_path(raw)) == named
            assert ordered.below(display_path(raw), raw).tolist() == below.tolist()
            # unordered: the same rows, read or sorted (a tally only covers them)
            loose = ordered.below(display_path(raw), raw, ordered=False)
            assert sorted(loose.tolist()) == sorted(below.tolist())
            loose = read.below(display_path(raw), raw, ordered=False)
            assert sorted(loose.tolist()) == sorted(below.tolist())
    assert any(len(below) > 1 for _, below in found)


def _preview(scanned: Scanned, state: dict[bytes, Annotation]) -> dict[str, int] | None:
    """``preview_summary`` of ``state`` on the scanned tree's files (snapshot and verdicts)."""
    root = scanned[0]
    st = api.open_store(Path(root).parent / "store")
    info = find_scan(st, root=root)
    stored = stored_classification(st, info, None, now_ns=time.time_ns(), load=False)
    return preview_summary(stored.snapshot_file, stored.verdicts, list(state.values()), root=root)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_preview_query_equals_the_summary_from_scratch(
    scanned: Scanned, data: st.DataObject
) -> None:
    """The report's preview (queries over the files) gives the plan's summary; with a name
    that is not valid UTF-8 it gives nothing, and the caller tallies."""
    _, _, index, paths = scanned
    start = data.draw(
        st.dictionaries(st.sampled_from(paths), st.tuples(_DECISIONS, _BY), max_size=10)
    )
    state = {
        raw: ann for raw, (d, by) in start.items() if (ann := _annotation(raw, d, by)) is not None
    }
    found = _preview(scanned, state)
    if index.undecodable:
        assert found is None
    else:
        assert found == _from_scratch(scanned, state)


def test_the_preview_query_counts_every_path_deleted_or_kept_at_once(scanned: Scanned) -> None:
    """Every path of the tree (and some it lacks) deleted, then kept: as from scratch."""
    _, _, index, paths = scanned
    for decision in ("delete", "keep"):
        state = {
            raw: Annotation(display_path(raw), raw, decision, None, "human", None, "t")
            for raw in paths
        }
        found = _preview(scanned, state)
        assert found == (None if index.undecodable else _from_scratch(scanned, state))


def _marked(
    scanned: Scanned, marked: dict[str, set[int]], where: Path
) -> tuple[pa.Table, Path | pa.Table]:
    """The rows ``marked`` set in those flag columns, in the table and in a copy of the
    snapshot's file at ``where``: (the table, the verdicts the file goes with)."""
    root, table, _, _ = scanned
    st_ = api.open_store(Path(root).parent / "store")
    stored = stored_classification(
        st_, find_scan(st_, root=root), None, now_ns=time.time_ns(), load=False
    )
    rows = pq.read_table(stored.snapshot_file)
    for column, chosen in marked.items():
        flags = [bool(f) or i in chosen for i, f in enumerate(table.column(column).to_pylist())]
        table = table.set_column(table.column_names.index(column), column, pa.array(flags))
        rows = rows.set_column(rows.column_names.index(column), column, pa.array(flags))
    pq.write_table(rows, where)
    return table, stored.verdicts


def _deleted(root: str, *names: str) -> list[Annotation]:
    raws = [os.fsencode(os.path.join(root, *n.split("/"))) for n in names]
    return [Annotation(display_path(r), r, "delete", None, "human", None, "t") for r in raws]


def test_the_preview_query_leaves_out_a_directory_that_holds_a_mount_or_a_partial_read(
    scanned: Scanned, tmp_path: Path
) -> None:
    """A mount point below a deleted directory (its own row unmarked), a partly read file below
    another, a marked directory deleted itself: each left out, as ``select_candidates`` does."""
    root, table, index, _ = scanned
    if index.undecodable:
        return  # the preview gives nothing there (the test above)
    texts = table.column("path").to_pylist()
    at = {
        name: texts.index(os.path.join(root, *name.split("/")))
        for name in ("a/b/c", "d/e/g", "cache")
    }
    marks = {"mount_point": {at["a/b/c"]}, "partial": {at["d/e/g"], at["cache"]}}
    marked, verdicts = _marked(scanned, marks, tmp_path / "snapshot.parquet")
    decided = _deleted(root, "a", "d", "cache", "d/h")
    want = selection_summary(select_candidates(marked, decided, root=root), marked)
    assert (want["candidates"], want["excluded"]) == (1, 3)  # only d/h is left
    found = preview_summary(tmp_path / "snapshot.parquet", verdicts, decided, root=root)
    assert found == want


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_preview_query_leaves_out_what_holds_a_mount_or_a_row_not_read_whole(
    scanned: Scanned, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Some rows marked a mount point or partly read (as a scan below a mount or an unreadable
    directory leaves them), in the snapshot's file and in the table alike: a directory that
    holds one is left out by both, whether or not its own row is marked."""
    root, table, index, paths = scanned
    if index.undecodable:
        return  # the preview gives nothing there (the test above)
    rows = table.num_rows
    marks = {
        column: data.draw(st.sets(st.integers(0, rows - 1), max_size=3))
        for column in ("mount_point", "partial")
    }
    where = tmp_path_factory.mktemp("marked") / "snapshot.parquet"
    table, verdicts = _marked(scanned, marks, where)
    start = data.draw(
        st.dictionaries(st.sampled_from(paths), st.tuples(_DECISIONS, _BY), max_size=10)
    )
    state = {
        raw: ann for raw, (d, by) in start.items() if (ann := _annotation(raw, d, by)) is not None
    }
    want = selection_summary(select_candidates(table, list(state.values()), root=root), table)
    assert preview_summary(where, verdicts, list(state.values()), root=root) == want

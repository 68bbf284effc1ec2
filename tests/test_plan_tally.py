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

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.ledger import Annotation, display_path
from hygiene_nb.pathnames import raw_path
from hygiene_nb.plan.document import SnapshotIndex, select_candidates, selection_summary
from hygiene_nb.plan.tally import TALLY_COLUMNS, PlanTally, tally_table
from hygiene_nb.scan.snapshot import entry_paths
from tests.helpers import write

Scanned = tuple[str, pa.Table, SnapshotIndex, list[bytes]]


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Scanned:
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
    for name, size in ((b"caf\\xe9", 20), (b"caf\xe9", 30)):  # display alike
        with open(twins + b"/" + name, "wb") as handle:
            handle.write(b"x" * size)
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
    return str(root), table, SnapshotIndex(table), raws + gone


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


def test_delete_decisions_checked_in_several_takes_count_as_in_one(
    scanned: Scanned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every path deleted at once (the first count), its rows checked 3 at a time."""
    root, table, index, paths = scanned
    state = {
        raw: Annotation(display_path(raw), raw, "delete", None, "human", None, "t") for raw in paths
    }
    whole = PlanTally(table, list(state.values()), root=root, index=index).summary()
    monkeypatch.setattr("hygiene_nb.plan.tally._CHECK_AT_ONCE", 3)
    assert len(paths) > 3 * 3
    taken = PlanTally(table, list(state.values()), root=root, index=index)
    assert taken.summary() == whole == _from_scratch(scanned, state)
    assert whole["excluded"] > 0 and whole["candidates"] > 0  # both outcomes are in the takes

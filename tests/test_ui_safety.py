"""Every path the widget acts on carries the entry's exact bytes, never its display text.

A file literally named ``caf\\xe9.tmp`` (a backslash, x, e, 9) and one whose name holds the
byte 0xE9 read the same on screen; a click on one must decide that one, and no other.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.ledger import Ledger
from hygiene_nb.notebook.ui import Annotator
from hygiene_nb.store import Store


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path, bytes, bytes]:
    root, store = tmp_path / "r", tmp_path / "store"
    root.mkdir()
    literal = os.fsencode(root) + b"/caf\\xe9.tmp"
    binary = os.fsencode(root) + b"/caf\xe9.tmp"
    for raw, data in ((literal, b"L" * 10), (binary, b"B" * 20)):
        with open(raw, "wb") as handle:
            handle.write(data)
    api.scan_root(root, store=store)
    return root, store, literal, binary


def decided(store: Path) -> dict[bytes, tuple[str | None, str | None]]:
    with Ledger.open(Store(store)) as ledger:
        return {a.path_raw: (a.decision, a.note) for a in ledger.annotations()}


def size_of(raw: bytes) -> int:
    return os.lstat(raw).st_size


def test_a_click_on_one_of_two_look_alike_names_decides_that_one(
    twins: tuple[Path, Path, bytes, bytes],
) -> None:
    root, store, literal, binary = twins
    panel = Annotator(str(root), store=store)
    first, second = panel.rows
    assert first.path == second.path  # they display alike
    first.buttons["delete"].click()
    second.buttons["keep"].click()
    found = decided(store)
    assert set(found) == {literal, binary}  # two decisions, one on each
    by_size = {size_of(raw): d for raw, (d, _) in found.items()}
    sizes = {r.path_raw: size_of(r.path_raw) for r in panel.rows}
    assert by_size[sizes[first.path_raw]] == "delete"
    assert by_size[sizes[second.path_raw]] == "keep"
    shown = {r.path_raw: r for r in panel.rows}  # the rows as drawn again
    assert shown[first.path_raw].buttons["delete"].button_style == "danger"
    assert shown[second.path_raw].buttons["keep"].button_style == "success"
    assert shown[first.path_raw].buttons["keep"].button_style == ""


def test_only_the_decided_look_alike_is_planned(twins: tuple[Path, Path, bytes, bytes]) -> None:
    root, store, literal, _ = twins
    panel = Annotator(str(root), store=store)
    (target,) = [r for r in panel.rows if size_of(r.path_raw) == 10]  # the literal one
    target.buttons["delete"].click()
    assert decided(store) == {literal: ("delete", None)}
    plan = api.make_plan(root, store=store)
    assert plan.candidates == 1
    (cand,) = plan.plan["candidates"]
    assert "path_b64" not in cand and os.fsencode(cand["path"]) == literal
    assert panel.plan_summary()["candidates"] == 1


def test_notes_and_batch_decisions_keep_the_exact_bytes(
    twins: tuple[Path, Path, bytes, bytes],
) -> None:
    root, store, literal, binary = twins
    panel = Annotator(str(root), store=store)
    (lit,) = [r for r in panel.rows if r.path_raw == literal]
    (bin_,) = [r for r in panel.rows if r.path_raw == binary]
    bin_.note.value = "the binary one"
    lit.check.value = True
    panel.batch_buttons["unsure"].click()
    assert panel.pending == ([literal], "unsure")  # a name the rules do not know: asked first
    panel.confirm_button.click()
    assert decided(store) == {literal: ("unsure", None), binary: (None, "the binary one")}
    again = Annotator(str(root), store=store)  # read back from the ledger, each on its own row
    states = {r.path_raw: (r.note.value, r.buttons["unsure"].button_style) for r in again.rows}
    assert states == {literal: ("", "warning"), binary: ("the binary one", "")}


def test_a_display_text_two_entries_share_is_refused_not_guessed(
    twins: tuple[Path, Path, bytes, bytes],
) -> None:
    root, store, literal, _ = twins
    panel = Annotator(str(root), store=store)
    text = panel.rows[0].path
    panel.decide([text], "delete")
    assert decided(store) == {}
    assert "ambiguous" in panel.status.value
    panel.decide([literal], "delete")  # the exact bytes say which
    assert decided(store) == {literal: ("delete", None)}


def test_a_batch_decision_applies_only_to_what_is_listed_and_says_how_many(
    tmp_path: Path,
) -> None:
    """Entries selected, then filtered out of view, are left alone by "delete selected"."""
    from hygiene_nb.notebook.demo import make_demo_store

    demo = make_demo_store(tmp_path / "tree", tmp_path / "store", scans=1)
    panel = Annotator(str(demo.root), store=demo.store)
    for r in panel.rows:
        r.check.value = True  # every entry of the home, big and small
    chosen = set(panel.selected)
    panel.min_size.value = "≥ 1 MB"  # the small ones leave the view
    listed = {r.path_raw for r in panel.rows}
    assert listed and chosen - listed  # some selected entries are not listed now
    panel.batch_buttons["delete"].click()
    assert decided(demo.store) == {}  # not all safe: the confirmation lists what it would do
    assert panel.pending is not None and set(panel.pending[0]) == chosen & listed
    panel.confirm_button.click()
    found = decided(demo.store)
    assert set(found) == chosen & listed
    hidden, n = len(chosen - listed), len(chosen & listed)
    assert panel.status.value == (
        f"delete: {n} listed {'entry' if n == 1 else 'entries'} ({hidden} selected but not"
        " listed now: left as they were)"
    )

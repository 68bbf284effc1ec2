"""The cycle collector is paused only for the calls that make objects in bulk, then put back."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.bulk import paused_collection, without_collection
from hygiene_nb.ledger import Ledger
from tests.helpers import write


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_back_on_after_even_on_an_error(
    collector_on: None,
) -> None:
    seen: list[bool] = []

    @without_collection
    def build(fail: bool) -> int:
        seen.append(gc.isenabled())
        with paused_collection():  # a pause inside another leaves it to the outer one
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
        if fail:
            raise RuntimeError("stopped half way")
        return 7

    assert build(False) == 7
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        build(True)
    assert gc.isenabled()
    assert seen == [False] * 6


def test_a_collector_the_caller_turned_off_stays_off(collector_on: None) -> None:
    gc.disable()
    with paused_collection():
        pass
    assert not gc.isenabled()


def test_cycles_made_during_a_pause_are_collected_once_it_ends(collector_on: None) -> None:
    class Node:
        other: Node | None = None

    with paused_collection():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ids = {id(a), id(b)}
        del a, b
    gc.collect()
    assert not ids & {id(o) for o in gc.get_objects() if isinstance(o, Node)}


def test_reading_the_ledger_and_previewing_a_plan_leave_the_collector_on(
    tmp_path: Path, store: Path, collector_on: None
) -> None:
    root = tmp_path / "r"
    write(root / "a.log", 10)
    api.scan_root(root, store=store)
    api.annotate([str(root / "a.log")], store=store, decision="delete")
    with Ledger.open(api.open_store(store)) as ledger:
        assert [a.path for a in ledger.annotations(under=str(root))] == [str(root / "a.log")]
    assert gc.isenabled()
    assert api.preview_plan(root, store=store)["delete_count"] == 1
    assert gc.isenabled()

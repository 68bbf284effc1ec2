"""The room a run reserves for its records before it moves anything (``receipts/.reserve-*``).

It is taken before the plan is claimed, so a store that cannot give it refuses the run with
nothing moved and the plan still issued; its lock tells ``recover`` the run is alive, and a run
removes only its own reserve.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.executor import execute_plan
from hygiene_nb.executor.fileops import DIR_FLAGS
from hygiene_nb.executor.reserve import Reserve, reserve_name, reserved_by_a_live_run
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, make_plan, snapshot
from tests.helpers import bind_mount, fill, tmpfs, write


@pytest.fixture
def small(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A root and its store on one 16 MiB tmpfs."""
    fs = tmp_path / "fs"
    fs.mkdir()
    with tmpfs(fs, "size=16m"):
        write(fs / "r" / "a.log", 3000)
        write(fs / "r" / "cache" / "b.bin", 5000)
        yield {"root": fs / "r", "store": fs / "store", "fs": fs}


def plan_state(store: Store, plan_id: str) -> str:
    with Ledger.open(store) as ledger:
        issued = ledger.issued_plan(plan_id)
    assert issued is not None
    return issued.state


def leftovers(store: Store) -> list[str]:
    """What a reserve left in ``receipts/`` (its file, or the name it was made under)."""
    return [p.name for p in store.receipts.iterdir() if p.name.startswith(".reserve-")]


def live(store: Store, plan_id: str) -> bool | None:
    fd = os.open(store.receipts, DIR_FLAGS)
    try:
        return reserved_by_a_live_run(fd, reserve_name(plan_id))
    finally:
        os.close(fd)


def test_a_store_with_no_room_for_the_records_refuses_before_anything_moves(
    small: dict[str, Path],
) -> None:
    store = Store(small["store"])
    plan = make_plan(small, "a.log", "cache")
    probe = Reserve.hold(store, "plan-probe", 2)  # as much room as this run reserves
    needed = os.fstat(probe.fd).st_size
    probe.close()
    before = snapshot(small["root"])
    filler = fill(small["fs"])
    os.truncate(filler, filler.stat().st_size - needed // 2)  # room for the ledger, not for it

    with pytest.raises(StoreError) as info:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))

    assert "no room for the records of this run" in info.value.message
    assert "Nothing was moved" in info.value.message
    assert snapshot(small["root"]) == before and leftovers(store) == []
    assert plan_state(store, plan.plan_id) == "issued"
    filler.unlink()  # once there is room, the plan executes
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "done" and len(result.moved) == 2 and leftovers(store) == []


def test_a_receipts_directory_the_reserve_cannot_be_made_in_refuses_the_run(
    tmp_path: Path,
) -> None:
    world = {"root": tmp_path / "r", "store": tmp_path / "store"}
    write(world["root"] / "a.log", 10)
    store = Store(world["store"])
    plan = make_plan(world, "a.log")
    before = snapshot(world["root"])

    with (
        bind_mount(store.receipts, store.receipts, read_only=True),
        pytest.raises(StoreError) as info,
    ):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))

    assert "cannot be reserved" in info.value.message
    assert os.strerror(errno.EROFS) in info.value.message
    assert "the plan can still be executed" in info.value.message
    assert snapshot(world["root"]) == before
    assert plan_state(store, plan.plan_id) == "issued"
    assert execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan)).status == "done"


def test_a_receipts_directory_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store").ensure()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store.receipts.rmdir()
    store.receipts.symlink_to(elsewhere)  # swapped in after the store was checked

    with pytest.raises(StoreError) as info:
        Reserve.hold(store, "plan-x", 1)

    assert f"{store.receipts} cannot be opened" in info.value.message
    assert list(elsewhere.iterdir()) == []


def test_without_fallocate_the_room_is_written_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store").ensure()
    allocated = Reserve.hold(store, "plan-a", 3)
    size = os.fstat(allocated.fd).st_size

    def unsupported(*_: object) -> None:  # what C libraries other than glibc answer there
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    written = Reserve.hold(store, "plan-b", 3)
    try:
        st = os.fstat(written.fd)
        assert st.st_size == size and st.st_blocks * 512 >= size  # the same room, on disk
        assert (store.receipts / ".reserve-plan-b").read_bytes() == b"\0" * size
        assert live(store, "plan-b") is True
    finally:
        written.close()
        allocated.close()
    assert leftovers(store) == []


def test_without_fallocate_a_full_store_refuses_too(
    small: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(small["store"]).ensure()
    fill(small["fs"])

    def unsupported(*_: object) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    with pytest.raises(StoreError) as info:
        Reserve.hold(store, "plan-x", 1)
    assert os.strerror(errno.ENOSPC) in info.value.message and leftovers(store) == []


def test_a_reserve_tells_whether_its_run_is_alive_and_removes_only_itself(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store").ensure()
    assert live(store, "plan-x") is None  # no run reserved anything
    first = Reserve.hold(store, "plan-x", 1)
    assert live(store, "plan-x") is True
    (store.receipts / ".reserve-plan-x").unlink()  # taken away by hand while the run goes on
    second = Reserve.hold(store, "plan-x", 1)
    first.close()  # the first run ends: the reserve by its name now is not its own
    assert live(store, "plan-x") is True
    second.close()
    assert live(store, "plan-x") is None and leftovers(store) == []
    write(store.receipts / ".reserve-plan-x", 10)  # a dead run's: nobody locks it
    assert live(store, "plan-x") is False

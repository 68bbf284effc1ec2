"""A store that fills up after the moves, and `hygiene-nb recover`.

The root and the store share a small tmpfs, filled to the last byte at a checkpoint after the
moves: the room reserved before the first move must carry the records; when even that is
taken, the error says what moved where, and `recover` writes the records from the manifests.
A run killed while `--allow-copy` removed an original is recovered too.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb.errors import HygieneError
from hygiene_nb.executor import execute_plan, list_store_batches, restore_batch, verify_receipt
from hygiene_nb.executor.reserve import Reserve
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import (
    confirm_for,
    contents,
    in_batch,
    kill_during_removal,
    make_plan,
    states,
    volume_unusable,
)
from tests.helpers import tmpfs, write


@pytest.fixture
def small(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A root and its store on one 16 MiB tmpfs."""
    fs = tmp_path / "fs"
    fs.mkdir()
    with tmpfs(fs, "size=16m"):
        root = fs / "r"
        write(root / "a.log", 3000)
        write(root / "cache" / "b.bin", 5000)
        write(root / "c.tmp", 70)
        yield {"root": root, "store": fs / "store", "fs": fs}


def fill(fs: Path) -> Path:
    """Take every free byte of the filesystem at ``fs`` (the file that holds them)."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


def fill_at(monkeypatch: pytest.MonkeyPatch, point: str, fs: Path) -> list[Path]:
    from hygiene_nb.executor import hooks

    filled: list[Path] = []
    real = hooks.checkpoint

    def at(name: str) -> None:
        if name == point:
            filled.append(fill(fs))
        real(name)

    monkeypatch.setattr("hygiene_nb.executor.execute.checkpoint", at)
    return filled


def plan_state(store: Path, plan_id: str) -> str:
    with Ledger.open(Store(store)) as ledger:
        issued = ledger.issued_plan(plan_id)
    assert issued is not None
    return issued.state


def cli(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def test_a_store_that_fills_up_after_the_moves_still_gets_its_records(
    small: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(small, "a.log", "cache", "c.tmp")
    filled = fill_at(monkeypatch, "before-receipt", small["fs"])
    result = execute_plan(plan.plan_path, store=Store(small["store"]), confirm=confirm_for(plan))
    assert filled and result.status == "done" and len(result.moved) == 3
    assert verify_receipt(str(result.receipt_path)).status == "verified"
    assert f"plan {plan.plan_id}: moved 3" in (small["store"] / "cleanup.log").read_text()
    assert plan_state(small["store"], plan.plan_id) == "executed"
    assert [p.name for p in (small["store"] / "receipts").iterdir() if p.name.startswith(".")] == []


def test_recover_writes_the_records_a_full_store_could_not(
    small: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(small["store"])
    plan = make_plan(small, "a.log", "cache", "c.tmp")
    filled = fill_at(monkeypatch, "before-records", small["fs"])
    with pytest.raises(HygieneError) as info:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (batch,) = list(store.quarantine.iterdir())
    assert info.value.code == "records-incomplete"
    assert f"3 item(s) were moved into {batch.name}" in info.value.message
    assert "hygiene-nb recover" in info.value.message
    assert list(store.receipts.glob("receipt-*.json")) == []
    assert plan_state(small["store"], plan.plan_id) == "executing"
    filled[0].unlink()  # the person frees space, then recovers

    code, out, err = cli("recover", "--store", str(store.root), "--json")

    assert code == 0, (out, err)
    (done,) = json.loads(out)["plans"]
    assert (done["plan_id"], done["status"], done["moved"]) == (plan.plan_id, "recovered", 3)
    (receipt,) = store.receipts.glob("receipt-*.json")
    assert str(receipt) == done["receipt_path"] and json.loads(receipt.read_text())["recovered"]
    assert verify_receipt(str(receipt)).status == "verified"
    assert plan_state(small["store"], plan.plan_id) == "executed"
    (line,) = (store.root / "cleanup.log").read_text().splitlines()
    assert f"plan {plan.plan_id}: moved 3 item(s)" in line and batch.name in line
    # a second recover finds nothing left to do, and records nothing twice
    code, out, _ = cli("recover", "--store", str(store.root))
    assert code == 0 and "recovered 0 stopped executions" in out
    assert len(list(store.receipts.glob("receipt-*.json"))) == 1


def test_recover_leaves_a_live_run_alone(small: dict[str, Path]) -> None:
    store = Store(small["store"])
    plan = make_plan(small, "a.log")
    with Ledger.open(store) as ledger:
        assert ledger.claim_plan(plan.plan_id, plan.plan_digest)
    reserve = Reserve.hold(store, plan.plan_id, 1)  # as a running execution holds it
    try:
        code, out, _ = cli("recover", "--store", str(store.root))
    finally:
        reserve.close()
    assert code == 4 and "[still-running]" in out and plan.plan_id in out
    assert plan_state(small["store"], plan.plan_id) == "executing"


def test_recover_puts_back_an_original_a_killed_removal_left(xworld: dict[str, Path]) -> None:
    mnt = xworld["mnt"]
    before = (mnt / "old.log").read_bytes()
    plan_path, staging = kill_during_removal(xworld, "mnt/old.log")
    store = Store(xworld["store"])

    code, out, _ = cli("recover", "--store", str(store.root))

    assert code == 0, out
    assert (mnt / "old.log").read_bytes() == before and not staging.exists()
    (batch,) = list(store.quarantine.iterdir())
    assert states(batch) == {os.fsencode(mnt / "old.log"): "returned"}
    (info,) = list_store_batches(store)
    # no removal left interrupted; the batch's copy is now only a duplicate, and named so
    assert [x["code"] for x in info.leftovers] == ["copy-not-moved"] and info.items == 0
    (receipt,) = store.receipts.glob("receipt-*.json")
    check = verify_receipt(str(receipt))
    assert check.status == "verified" and check.moved == 0 and check.removal_interrupted == []
    assert plan_path


def test_verify_and_recover_report_a_leftover_that_cannot_go_back(xworld: dict[str, Path]) -> None:
    mnt = xworld["mnt"]
    _, staging = kill_during_removal(xworld, "mnt/old.log")
    write(mnt / "old.log", data=b"someone made a new one")  # its place is taken now
    store = Store(xworld["store"])

    code, out, _ = cli("recover", "--store", str(store.root))

    assert code == 4 and "[removal-interrupted]" in out and str(staging / "old.log") in out
    assert (staging / "old.log").exists()  # never replaced anything
    assert (mnt / "old.log").read_bytes() == b"someone made a new one"
    (receipt,) = store.receipts.glob("receipt-*.json")
    code, out, _ = cli("verify", str(receipt), "--store", str(store.root), "--json")
    assert code == 4
    doc = json.loads(out)
    (left,) = doc["removal_interrupted"]
    assert left["code"] == "removal-interrupted" and left["staging"] == str(staging / "old.log")


def test_a_copy_cut_short_by_a_full_store_is_listed_as_a_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = tmp_path / "fs"
    fs.mkdir()
    with tmpfs(fs, "size=4m"):
        world = {"root": fs / "r", "store": fs / "store"}
        mnt = world["root"] / "mnt"
        mnt.mkdir(parents=True)
        with tmpfs(mnt, "size=32m"):
            data = os.urandom(6 * 1024 * 1024)  # more than the store's filesystem holds
            write(mnt / "big.bin", data=data)
            volume_unusable(monkeypatch)
            plan = make_plan(world, "mnt/big.bin")
            store = Store(world["store"])
            result = execute_plan(
                plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True
            )
            assert result.moved == [] and (mnt / "big.bin").read_bytes() == data
            assert verify_receipt(str(result.receipt_path)).status == "verified"
            (info,) = list_store_batches(store)
            assert info.items == 0
            (left,) = info.leftovers
            assert left["code"] == "copy-not-moved" and left["original"] == str(mnt / "big.bin")
            assert Path(left["path"]).exists() and "purged" in left["message"]
            code, out, _ = cli("quarantine", "list", "--store", str(store.root))
            assert code == 0 and "[copy-not-moved]" in out


def test_a_reserve_a_dead_run_left_before_claiming_does_not_block_the_plan(
    small: dict[str, Path],
) -> None:
    store = Store(small["store"])
    plan = make_plan(small, "a.log")
    stale = store.receipts / f".reserve-{plan.plan_id}"
    write(stale, 10)  # a run killed between its reservation and its claim: nobody locks it
    live = Reserve.hold(store, "plan-other", 1)  # another plan's live run is left alone
    try:
        result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    finally:
        live.close()
    assert result.status == "done" and not stale.exists()


def test_a_second_run_of_a_plan_whose_run_holds_the_reserve_is_refused(
    small: dict[str, Path],
) -> None:
    store = Store(small["store"])
    plan = make_plan(small, "a.log")
    held = Reserve.hold(store, plan.plan_id, 1)  # as a concurrent run that has not claimed yet
    try:
        with pytest.raises(HygieneError) as info:
            execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    finally:
        held.close()
    assert info.value.code == "plan-already-executed"
    assert (small["root"] / "a.log").exists()


def test_a_removal_killed_between_two_unlinks_keeps_the_item_in_its_batch(
    xworld: dict[str, Path],
) -> None:
    """Part of the original left in staging is never put back as if it were the item."""
    cache = xworld["mnt"] / "cache"
    whole = contents(cache)
    _, staging = kill_during_removal(xworld, "mnt/cache", at="between-unlinks")
    left = contents(staging / "cache")
    assert left != whole and set(left) < set(whole)  # the kill landed mid-removal
    store = Store(xworld["store"])
    (batch,) = list(store.quarantine.iterdir())
    assert contents(in_batch(batch, cache)) == whole

    code, out, _ = cli("recover", "--store", str(store.root))

    assert code == 4 and "[removal-interrupted]" in out and "not all of it" in out
    assert states(batch) == {os.fsencode(cache): "moved"}  # the batch's copy is the item
    assert not cache.exists()  # nothing partial was put in its place
    assert contents(staging / "cache") == left
    (info,) = list_store_batches(store)
    assert info.items == 1 and [x["code"] for x in info.leftovers] == ["removal-interrupted"]
    back = restore_batch(store, info.batch_id, execute=True)
    assert back.status == "done" and contents(cache) == whole

"""A store that fills up after the moves, and `hygiene-nb recover`.

The root and the store share a small tmpfs, filled to the last byte at a checkpoint after the
moves: the room reserved before the first move must carry the records; when even that is
taken, the error says what moved where, and `recover` writes the records from the manifests.
A run killed while `--allow-copy` removed an original is recovered too.

Then, in this process, runs stopped at a checkpoint (``stopped_at``) or at a ledger write, and
what a kill during a removal leaves built from a run stopped just before it: `recover` leaves a
live run alone, names what it cannot read, never records anything twice, puts back only a
whole original into a free place, and leaves every leftover it cannot vouch for where it is.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import HygieneError, UsageError
from hygiene_nb.executor import (
    execute_plan,
    list_store_batches,
    recover_store,
    restore_batch,
    verify_receipt,
)
from hygiene_nb.executor.crossdev import verify_copy
from hygiene_nb.executor.fileops import DIR_FLAGS
from hygiene_nb.executor.reserve import Reserve
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import (
    Stopped,
    confirm_for,
    contents,
    in_batch,
    kill_during_removal,
    located,
    make_plan,
    manifest_of,
    read_bytes,
    snapshot_of,
    stage_for_removal,
    states,
    stopped_at,
    volume_unusable,
)
from tests.helpers import fill, tmpfs, write


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


# -- in this process: runs stopped at a checkpoint, states built as a kill leaves them ------------


def receipt_of(path: str | None) -> dict[str, Any]:
    assert path is not None
    doc: dict[str, Any] = json.loads(Path(path).read_text())
    return doc


def log_lines(store: Store, plan_id: str) -> list[str]:
    log = store.root / "cleanup.log"
    text = log.read_text() if log.exists() else ""
    return [line for line in text.splitlines() if f" plan {plan_id}: " in line]


def executions_of(store: Store, plan_id: str) -> list[dict[str, Any]]:
    with Ledger.open(store) as ledger:
        return [e for e in ledger.executions() if e["plan_id"] == plan_id]


def test_recover_needs_the_store_that_executed(tmp_path: Path) -> None:
    nowhere = tmp_path / "not-a-store"
    with pytest.raises(UsageError) as info:
        recover_store(Store(nowhere))
    assert "holds no ledger" in info.value.message and not nowhere.exists()


def test_a_run_stopped_mid_move_is_recovered_from_its_manifest(world: dict[str, Path]) -> None:
    store = Store(world["store"])
    earlier = make_plan(world, "data/keep.txt")  # another plan, executed and recorded
    done = execute_plan(earlier.plan_path, store=store, confirm=confirm_for(earlier))
    earlier_receipt = Path(str(done.receipt_path)).read_bytes()
    root = world["root"]
    odd = os.fsencode(root) + b"/web/caf\xe9.log"  # a name that is not UTF-8
    write(Path(os.fsdecode(odd)), data=b"bytes of a name that is not UTF-8")
    write(root / "gone.tmp", 5)
    plan = make_plan(
        world,
        "web/node_modules",
        "web/app.log",
        "data/scratch.bin",
        os.fsdecode(b"web/caf\xe9.log"),
        "gone.tmp",
    )
    (root / "gone.tmp").unlink()  # skipped by the run before any batch records it
    files = {p: read_bytes(p) for p in snapshot_of(root) if os.path.isfile(p)}

    stopped_at(
        "after-move", lambda: execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    )

    batch = next(b for b in store.quarantine.iterdir() if b.name != done.batch_id)
    recorded = states(batch)
    assert set(recorded.values()) == {"pending"}  # the manifest never heard of the move
    moved = [raw for raw in recorded if not os.path.lexists(raw)]
    assert len(moved) == 1 and len(recorded) == 4  # the one the run renamed before it stopped
    assert list(store.receipts.glob(".reserve-*")) == []

    result = recover_store(store)

    assert (result.status, result.exit_code) == ("done", 0)
    (rec,) = result.plans  # the executed plan is not looked at again
    assert (rec.plan_id, rec.status, rec.moved, rec.skipped) == (plan.plan_id, "recovered", 1, 4)
    assert result.to_json()["plans"][0]["receipt_path"] == rec.receipt_path
    receipt = receipt_of(rec.receipt_path)
    assert receipt["recovered"] and receipt["batch_id"] == batch.name
    by_path = {i.get("path_b64") or i["path"]: i for i in receipt["items"]}
    (item,) = [i for i in receipt["items"] if i["outcome"] == "moved"]
    assert os.fsencode(item["path"]) == moved[0] and item["method"] == "rename"
    odd_item = by_path[base64.b64encode(odd).decode()]
    assert odd_item["outcome"] == "skipped" and "recorded pending" in odd_item["message"]
    gone = by_path[str(root / "gone.tmp")]
    assert (gone["outcome"], gone["code"]) == ("skipped", "aborted")
    assert "Not attempted" in gone["message"]
    assert verify_receipt(str(rec.receipt_path)).status == "verified"
    assert plan_state(store.root, plan.plan_id) == "executed"
    assert len(executions_of(store, plan.plan_id)) == 1
    assert len(log_lines(store, plan.plan_id)) == 1
    assert Path(str(done.receipt_path)).read_bytes() == earlier_receipt
    assert set(located(store.root, files).values()) == {1}

    back = restore_batch(store, batch.name, execute=True)
    assert back.status == "done" and all(read_bytes(p) == data for p, data in files.items())


def _stop(*_: object) -> None:
    raise Stopped("the process was killed here")


def test_a_run_stopped_after_its_receipt_keeps_it_and_nothing_is_recorded_twice(
    world: dict[str, Path],
) -> None:
    store = Store(world["store"])
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    with pytest.MonkeyPatch.context() as mp:  # killed between its receipt and its ledger rows
        mp.setattr(Ledger, "finish_plan", _stop)
        with pytest.raises(Stopped):
            execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (receipt,) = store.receipts.glob("receipt-*.json")
    written = receipt.read_bytes()
    assert plan_state(store.root, plan.plan_id) == "executing"
    assert executions_of(store, plan.plan_id) == [] and log_lines(store, plan.plan_id) == []
    damaged = store.receipts / "receipt-20000101T000000Z-00000000.json"  # another, unreadable
    damaged.write_text("{not a receipt")
    with pytest.MonkeyPatch.context() as mp:  # a recover killed in its turn, before its last step
        mp.setattr(Ledger, "finish_plan", _stop)
        with pytest.raises(Stopped):
            recover_store(store)
    assert len(executions_of(store, plan.plan_id)) == len(log_lines(store, plan.plan_id)) == 1
    assert plan_state(store.root, plan.plan_id) == "executing"

    result = recover_store(store)

    (rec,) = result.plans
    assert (rec.status, rec.moved, rec.receipt_path) == ("recovered", 2, str(receipt))
    assert receipt.read_bytes() == written  # the run's own receipt, as it wrote it
    assert sorted(store.receipts.glob("receipt-*.json")) == [damaged, receipt]
    assert damaged.read_text() == "{not a receipt"
    assert len(executions_of(store, plan.plan_id)) == len(log_lines(store, plan.plan_id)) == 1
    assert plan_state(store.root, plan.plan_id) == "executed"
    assert verify_receipt(str(receipt)).status == "verified"


def test_recover_leaves_a_run_that_holds_its_reserve_or_a_batch_alone(
    world: dict[str, Path],
) -> None:
    store = Store(world["store"])
    plan = make_plan(world, "web/app.log")
    stopped_at(
        "after-manifest",
        lambda: execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan)),
    )
    (batch,) = store.quarantine.iterdir()
    reserve = Reserve.hold(store, plan.plan_id, 1)  # as the live run holds it
    try:
        held = recover_store(store)
    finally:
        reserve.close()
    fd = os.open(batch, DIR_FLAGS)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a live run (or a restore of it) holds its batch
    try:
        locked = recover_store(store)
    finally:
        os.close(fd)

    for result, why in ((held, "holds its reserve"), (locked, "a batch is locked")):
        (rec,) = result.plans
        assert (result.status, result.exit_code, rec.status) == ("partial", 4, "running")
        assert why in rec.message and plan.plan_id in rec.message
    assert list(store.receipts.glob("receipt-*.json")) == []
    assert plan_state(store.root, plan.plan_id) == "executing"
    assert states(batch) == {os.fsencode(world["root"] / "web" / "app.log"): "moved"}

    (rec,) = recover_store(store).plans  # once they ended
    assert (rec.status, rec.moved) == ("recovered", 1)


def test_a_batch_whose_manifest_cannot_be_read_is_named_and_the_records_written(
    world: dict[str, Path],
) -> None:
    store = Store(world["store"])
    plan = make_plan(world, "web/app.log")
    stopped_at(
        "after-manifest",
        lambda: execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan)),
    )
    (batch,) = store.quarantine.iterdir()
    damaged = store.quarantine / "batch-20000101T000000Z-00000000"
    write(damaged / "manifest.json", data=b"{")  # whose plan it was cannot be told

    result = recover_store(store)

    (rec,) = result.plans
    assert (result.status, result.exit_code, rec.status) == ("partial", 4, "incomplete")
    assert str(damaged) in rec.message and rec.moved == 1
    assert rec.batches == [{"batch_id": batch.name, "batch_path": str(batch)}]
    assert verify_receipt(str(rec.receipt_path)).status == "verified"
    assert plan_state(store.root, plan.plan_id) == "executed"
    assert (damaged / "manifest.json").read_bytes() == b"{"


def test_a_manifest_of_the_plan_missing_a_field_leaves_its_batch_unlocked(
    world: dict[str, Path],
) -> None:
    store = Store(world["store"])
    app = world["root"] / "web" / "app.log"
    data = app.read_bytes()
    plan = make_plan(world, "web/app.log")
    stopped_at(
        "after-manifest",
        lambda: execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan)),
    )
    (batch,) = store.quarantine.iterdir()
    doc = manifest_of(batch)
    del doc["items"][0]["kind"]  # valid JSON of a known version, yet not a whole item
    (batch / "manifest.json").write_text(json.dumps(doc))
    open_before = sorted(os.listdir("/proc/self/fd"))

    (rec,) = recover_store(store).plans

    assert rec.status == "incomplete" and str(batch) in rec.message and rec.moved == 0
    assert sorted(os.listdir("/proc/self/fd")) == open_before  # no handle on the batch left
    fd = os.open(batch, DIR_FLAGS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds it: a restore can take it
    finally:
        os.close(fd)
    assert in_batch(batch, app).read_bytes() == data and not app.exists()


def copied_then_stopped(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch, rel: str
) -> tuple[Store, Path]:
    """Execute ``rel`` with --allow-copy, stopped once its copy is verified and recorded moved
    (the original still in place); the store and the batch."""
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, rel)
    store = Store(xworld["store"])
    stopped_at(
        "before-removal",
        lambda: execute_plan(
            plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True
        ),
    )
    (batch,) = store.quarantine.iterdir()
    assert states(batch) == {os.fsencode(xworld["root"] / rel): "moved"}
    return store, batch


def test_recover_puts_back_the_whole_original_a_stopped_removal_left(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = xworld["mnt"] / "cache"
    whole, inode = contents(cache), cache.stat().st_ino
    store, batch = copied_then_stopped(xworld, monkeypatch, "mnt/cache")
    staging = stage_for_removal(cache)  # where a kill during the removal leaves it

    result = recover_store(store)

    (rec,) = result.plans
    assert (result.status, rec.status, rec.leftovers) == ("done", "recovered", [])
    assert contents(cache) == whole and cache.stat().st_ino == inode  # the original itself
    assert not staging.exists()
    assert states(batch) == {os.fsencode(cache): "returned"}
    assert contents(in_batch(batch, cache)) == whole  # a duplicate now: it goes with a purge
    (item,) = receipt_of(rec.receipt_path)["items"]
    assert item["outcome"] == "skipped" and "it is in its place" in item["message"]
    assert (rec.moved, rec.skipped) == (0, 1)


def test_recover_reports_a_leftover_whose_place_is_taken_and_replaces_nothing(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = xworld["mnt"] / "old.log"
    before = old.read_bytes()
    store, batch = copied_then_stopped(xworld, monkeypatch, "mnt/old.log")
    staging = stage_for_removal(old)
    write(old, data=b"a new one, made since")

    result = recover_store(store)

    (rec,) = result.plans
    assert (result.status, result.exit_code, rec.status) == ("partial", 4, "recovered")
    (left,) = rec.leftovers
    assert (left["code"], left["path"]) == ("removal-interrupted", str(old))
    assert left["staging"] == str(staging / "old.log")
    assert "could not be put back" in left["message"] and "nothing was replaced" in left["message"]
    assert old.read_bytes() == b"a new one, made since"
    assert (staging / "old.log").read_bytes() == before == in_batch(batch, old).read_bytes()
    assert states(batch) == {os.fsencode(old): "moved"}
    (item,) = receipt_of(rec.receipt_path)["items"]
    assert (item["outcome"], item["leftover"]) == ("moved", str(staging / "old.log"))
    assert item["method"] == "copy"


def test_recover_never_puts_back_part_of_an_original(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = xworld["mnt"] / "cache"
    whole = contents(cache)
    store, batch = copied_then_stopped(xworld, monkeypatch, "mnt/cache")
    staging = stage_for_removal(cache)
    (staging / "cache" / "a.bin").unlink()  # a kill between two unlinks of the removal
    left = contents(staging / "cache")

    (rec,) = recover_store(store).plans

    (report,) = rec.leftovers
    assert "not all of it" in report["message"] and batch.name in report["message"]
    assert not cache.exists() and contents(staging / "cache") == left
    assert states(batch) == {os.fsencode(cache): "moved"}
    assert contents(in_batch(batch, cache)) == whole  # the batch holds the whole item
    assert rec.moved == 1


def _symlinked_staging(old: Path, batch: Path) -> Path:
    elsewhere = old.parent / "elsewhere"
    elsewhere.mkdir()
    old.rename(elsewhere / old.name)
    (old.parent / ".hygiene-nb-removing-000000000000").symlink_to(elsewhere)
    return elsewhere


def _not_ours(old: Path, batch: Path) -> Path:
    staging = stage_for_removal(old)
    os.chown(staging, 4242, 4242)  # another user's directory, holding the same bytes
    return staging


def _copy_dir_gone(old: Path, batch: Path) -> Path:
    staging = stage_for_removal(old)
    shutil.rmtree(in_batch(batch, old).parent)
    return staging


def _copy_gone(old: Path, batch: Path) -> Path:
    staging = stage_for_removal(old)
    in_batch(batch, old).unlink()
    return staging


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_symlinked_staging, "its staging directory cannot be read"),
        (_not_ours, "its staging directory is not ours"),
        (_copy_dir_gone, "its copy in the batch cannot be read"),
        (_copy_gone, "the leftover could not be compared with its copy"),
    ],
)
def test_recover_leaves_a_leftover_it_cannot_vouch_for_where_it_is(
    xworld: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[Path, Path], Path],
    why: str,
) -> None:
    old = xworld["mnt"] / "old.log"
    before = old.read_bytes()
    store, batch = copied_then_stopped(xworld, monkeypatch, "mnt/old.log")
    holder = damage(old, batch)

    result = recover_store(store)

    (rec,) = result.plans
    (left,) = rec.leftovers
    assert result.status == "partial" and left["code"] == "removal-interrupted"
    assert left["message"].startswith(why) and left["path"] == str(old)
    assert not old.exists() and (holder / "old.log").read_bytes() == before
    assert states(batch) == {os.fsencode(old): "moved"}


def test_recover_reports_a_place_that_went_away_before_the_put_back(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = xworld["mnt"] / "cache" / "sub"
    before = (sub / "b.bin").read_bytes()
    store, batch = copied_then_stopped(xworld, monkeypatch, "mnt/cache/sub/b.bin")
    staging = stage_for_removal(sub / "b.bin")

    def then_move_the_place(*args: Any) -> Any:
        found = verify_copy(*args)
        sub.rename(sub.with_name("sub-moved"))  # between the comparison and the put back
        return found

    monkeypatch.setattr("hygiene_nb.executor.recover.verify_copy", then_move_the_place)

    (rec,) = recover_store(store).plans

    (left,) = rec.leftovers
    assert left["message"].startswith("its place cannot be opened")
    moved_staging = sub.with_name("sub-moved") / staging.name
    assert (moved_staging / "b.bin").read_bytes() == before  # where the move took it
    assert in_batch(batch, sub / "b.bin").read_bytes() == before
    assert states(batch) == {os.fsencode(sub / "b.bin"): "moved"}


def test_recover_needs_neither_the_plan_file_nor_the_root_it_emptied(tmp_path: Path) -> None:
    root = tmp_path / "solo"
    files = {}
    for name in ("a.log", "b.tmp"):
        data = name.encode() * 100
        files[os.fsencode(write(root / name, data=data))] = data
    world = {"root": root, "store": tmp_path / "store"}
    store = Store(world["store"])
    plan = make_plan(world, "a.log", "b.tmp")
    stopped_at(
        "before-receipt",
        lambda: execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan)),
    )
    Path(plan.plan_path).unlink()  # the person tidied up: the plan file and the empty root
    root.rmdir()

    (rec,) = recover_store(store).plans

    assert (rec.status, rec.moved, rec.skipped) == ("recovered", 2, 0)
    receipt = receipt_of(rec.receipt_path)
    assert receipt["free_before"] == receipt["free_after"] == 0  # nothing there to measure
    assert {i["method"] for i in receipt["items"]} == {"unknown"}  # nor to compare with
    assert verify_receipt(str(rec.receipt_path)).status == "verified"
    assert set(located(store.root, files).values()) == {1}

"""Verify a receipt where its batch's manifest cannot decide, and where a removal was cut short."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hygiene_nb.executor import execute_plan, recover_store, verify_receipt
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, in_batch, kill_during_removal, make_plan
from tests.helpers import write


@pytest.mark.parametrize("manifest", ["gone", "not JSON"])
def test_without_a_readable_manifest_the_receipts_identities_decide(
    world: dict[str, Path], manifest: str
) -> None:
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    batch = Path(str(result.batches[0]["batch_path"]))
    if manifest == "gone":
        (batch / "manifest.json").unlink()
    else:
        (batch / "manifest.json").write_text("{not json")

    assert verify_receipt(str(result.receipt_path)).status == "verified"  # both where recorded

    moved = in_batch(batch, world["root"] / "data" / "scratch.bin")
    os.rename(moved, moved.with_name("renamed"))  # the inode the receipt names is not there
    write(moved, 100)  # another file under its name
    checked = verify_receipt(str(result.receipt_path))
    assert checked.status == "mismatch"
    assert checked.missing_from_batch == [str(world["root"] / "data" / "scratch.bin")]


def test_a_recovered_receipt_names_an_original_a_killed_removal_left(
    xworld: dict[str, Path],
) -> None:
    mnt = xworld["mnt"]
    _, staging = kill_during_removal(xworld, "mnt/old.log")
    write(mnt / "old.log", data=b"someone made a new one")  # so it cannot go back
    store = Store(xworld["store"])
    recover_store(store)
    (receipt,) = store.receipts.glob("receipt-*.json")

    checked = verify_receipt(str(receipt))

    assert checked.status == "mismatch"
    (left,) = checked.removal_interrupted
    assert left["code"] == "removal-interrupted" and left["path"] == str(mnt / "old.log")
    assert left["staging"] == str(staging / "old.log")
    assert "hygiene-nb recover" in left["message"]

"""The test checkpoints: inert unless named, then a SIGKILL of the process or an error there."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from hygiene_nb.executor import execute_plan, restore_batch, verify_receipt
from hygiene_nb.executor.hooks import CHECKPOINTS, CheckpointFault, checkpoint
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, located, make_plan, read_bytes, snapshot_of


def test_a_checkpoint_acts_only_when_a_test_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT", raising=False)
    for name in CHECKPOINTS:
        checkpoint(name)
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "after-move:kill")
    for name in CHECKPOINTS:
        checkpoint(name)
    assert sent == [(os.getpid(), signal.SIGKILL)]  # at after-move only, to itself
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "no-such-checkpoint:kill")
    checkpoint("no-such-checkpoint")  # only the executor's own checkpoints act
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "after-move:sleep")
    checkpoint("after-move")  # an action it does not know does nothing
    assert len(sent) == 1


def test_a_run_failing_at_a_checkpoint_writes_its_receipt_then_raises(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error mid-run (a bug): what moved is recorded, then the error surfaces."""
    root, store = world["root"], Store(world["store"])
    files = {p: read_bytes(p) for p in snapshot_of(root) if os.path.isfile(p)}
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "after-move:fail")

    with pytest.raises(CheckpointFault, match="after-move"):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))

    (receipt,) = store.receipts.glob("receipt-*.json")
    doc = json.loads(receipt.read_text())
    assert doc["plan_state"] == "aborted" and "after-move" in doc["aborted"]
    assert {i["code"] for i in doc["items"]} == {"aborted"} and doc["moved"] == 0
    assert all("it was being moved" in i["message"] for i in doc["items"])  # both recorded
    gone = [i for i in doc["items"] if not os.path.lexists(i["path"])]
    assert len(gone) == 1  # the one renamed into the batch before the fault
    assert verify_receipt(str(receipt)).status == "verified"
    assert set(located(store.root, files).values()) == {1}
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT")
    back = restore_batch(store, str(doc["batch_id"]), execute=True)
    assert back.status == "done" and all(read_bytes(p) == d for p, d in files.items())

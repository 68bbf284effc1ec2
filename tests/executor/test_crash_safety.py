"""SIGKILL in the middle of a 5,000-item execution, at a point the test sees the run reach.

The test watches the batch's manifest while the run goes on (it is replaced atomically, so every
read is a whole manifest): at each new version it stops the run, reads it, and kills the run
there once it shows the chosen progress. The manifest the dead run left proves where the kill
landed: at least that far, and before the end (not every item moved, no receipt). Then every
file's bytes are in exactly one place, ``recover`` writes the run's records from the manifest,
the plan never acts again, and ``restore`` puts every file back.

The executor records a group of items ``pending``, moves them, then records them ``moved``, so
the manifest moves on a group at a time: "the last items" is the last group recorded pending
while the rest is moved.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import Refused
from hygiene_nb.executor import (
    execute_plan,
    list_store_batches,
    recover_store,
    restore_batch,
    verify_receipt,
)
from hygiene_nb.executor.batches import read_manifest
from hygiene_nb.executor.fileops import DIR_FLAGS
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import KILLER, confirm_for, located, manifest_of, read_bytes

ITEMS = 5_000  # twenty groups of the executor's smallest group size (256)

Counts = tuple[int, int]  # (moved, pending) in a manifest


def build(root: Path, seed: int) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    files: dict[bytes, bytes] = {}
    base = os.fsencode(root)
    for d in range(100):
        directory = base + b"/d%03d" % d
        os.makedirs(directory)
        for f in range(ITEMS // 100):
            path = directory + b"/f%03d" % f
            data = b"%d:%d:" % (d, f) + rng.randbytes(rng.randint(0, 64))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            os.close(fd)
            files[path] = data
    return files


def counts(doc: dict[str, Any]) -> Counts:
    states = [i["state"] for i in doc["items"]]
    return states.count("moved"), states.count("pending")


def manifest_version(quarantine: Path) -> tuple[Path, tuple[int, int, int]] | None:
    """The (single) batch and which version of its manifest is there now (None: none yet)."""
    for batch in quarantine.iterdir() if quarantine.exists() else ():
        try:
            st = os.stat(batch / "manifest.json")
        except FileNotFoundError:
            return None
        return batch, (st.st_ino, st.st_mtime_ns, st.st_size)
    return None


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop ``proc`` (SIGSTOP) and wait until it is stopped or dead."""
    proc.send_signal(signal.SIGSTOP)
    while True:
        try:
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state in ("T", "t", "Z", "X"):
            return
        time.sleep(0.001)


def kill_when(
    quarantine: Path, proc: subprocess.Popen[bytes], reached: Callable[[Counts], bool]
) -> list[Counts]:
    """Kill the run at the first manifest that shows ``reached``; what each version showed.

    Each time a new version of the manifest appears the run is stopped while the manifest is
    read (reading takes longer than the run needs for its next group), then killed there, or
    let go on.
    """
    seen: list[Counts] = []
    last = None
    deadline = time.monotonic() + 600
    while proc.poll() is None:
        assert time.monotonic() < deadline, "the execution did not end in 10 minutes"
        time.sleep(0.002)
        found = manifest_version(quarantine)
        if found is None or found[1] == last:
            continue
        stop(proc)
        batch, last = manifest_version(quarantine) or found
        fd = os.open(batch, DIR_FLAGS)
        try:
            doc = read_manifest(fd)
        finally:
            os.close(fd)
        assert doc is not None
        seen.append(counts(doc))
        if reached(seen[-1]):
            proc.send_signal(signal.SIGKILL)
            break
        proc.send_signal(signal.SIGCONT)
    return seen


# How far the run must have got when it is killed, read from its manifest.
REACHED: dict[str, Callable[[Counts], bool]] = {
    "first-items": lambda c: c[0] >= 1,
    "half": lambda c: c[0] >= ITEMS // 2,
    "last-items": lambda c: c[1] > 0 and c[0] + c[1] == ITEMS,  # the rest moved
}


@pytest.mark.parametrize(("point", "seed"), [("first-items", 1), ("half", 2), ("last-items", 3)])
def test_a_sigkill_mid_run_loses_nothing_and_recover_and_restore_undo_it(
    tmp_path: Path, point: str, seed: int
) -> None:
    root, store = tmp_path / "r", tmp_path / "store"
    files = build(root, seed)
    api.scan_root(root, store=store)
    api.annotate(list(files), store=store, decision="delete")
    plan = api.make_plan(root, store=store)
    assert plan.candidates == ITEMS
    reached = REACHED[point]
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, plan.plan_path, str(store), plan.plan_id,
         plan.plan_digest],
    )  # fmt: skip
    try:
        seen = kill_when(store / "quarantine", proc, reached)
        assert seen and reached(seen[-1]), f"the run ended first; its manifests showed {seen}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # killed, not finished

    # the kill landed mid-run: as far as was seen, not every item moved, no records written
    (batch,) = list((store / "quarantine").iterdir())
    moved, pending = counts(manifest_of(batch))
    assert reached((moved, pending)) and moved < ITEMS, (moved, pending)
    assert list((store / "receipts").glob("receipt-*.json")) == []
    with Ledger.open(Store(store)) as ledger:
        issued = ledger.issued_plan(plan.plan_id)
    assert issued is not None and issued.state == "executing"
    assert set(located(store, files).values()) == {1}

    # recover writes the records of what the manifest says moved; the plan never acts again
    recovered = recover_store(Store(store))
    assert recovered.status == "done", recovered
    (done,) = recovered.plans
    assert (done.plan_id, done.status) == (plan.plan_id, "recovered")
    assert moved <= done.moved <= moved + pending
    assert done.receipt_path is not None
    assert verify_receipt(done.receipt_path).status == "verified"
    with pytest.raises(Refused) as again:
        execute_plan(plan.plan_path, store=Store(store), confirm=confirm_for(plan))
    assert again.value.code == "plan-already-executed"

    # restore puts every file back with its bytes, and the batch holds nothing after
    back = restore_batch(Store(store), batch.name, execute=True)
    assert back.status == "done", back.blocked[:3]
    assert len(back.restored) == done.moved
    assert all(read_bytes(p) == data for p, data in files.items())
    assert set(located(store, files).values()) == {1}
    assert list_store_batches(Store(store)) == []  # an emptied batch is removed

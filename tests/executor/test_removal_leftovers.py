"""SIGKILL while ``--allow-copy`` removes an original: the duplicate it leaves is found and named.

The original is renamed into ``.hygiene-nb-removing-*`` beside its place before it is removed;
a run killed there leaves it in that directory (a duplicate of the verified copy in the batch).
``quarantine list`` (text and ``--json``) reports it as ``removal-interrupted`` with what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hygiene_nb.executor import list_store_batches
from hygiene_nb.store import Store
from tests.executor.helpers import in_batch, kill_during_removal, states


def cli(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout


def test_quarantine_list_reports_an_original_left_by_a_killed_removal(
    xworld: dict[str, Path],
) -> None:
    mnt = xworld["mnt"]
    before = (mnt / "old.log").read_bytes()
    _, staging = kill_during_removal(xworld, "mnt/old.log")
    # the state a kill there leaves: the original in staging, its verified copy in the batch
    assert not (mnt / "old.log").exists() and (staging / "old.log").read_bytes() == before
    store = Store(xworld["store"])
    (batch,) = list(store.quarantine.iterdir())
    assert in_batch(batch, mnt / "old.log").read_bytes() == before
    assert states(batch) == {os.fsencode(mnt / "old.log"): "moved"}

    (info,) = list_store_batches(store)
    (left,) = info.leftovers
    assert left["code"] == "removal-interrupted"
    assert left["path"] == str(staging / "old.log") and left["original"] == str(mnt / "old.log")
    assert "hygiene-nb recover" in left["message"] and batch.name in left["message"]

    code, out = cli("quarantine", "list", "--store", str(store.root), "--json")
    assert code == 0
    (row,) = json.loads(out)["batches"]
    assert [x["code"] for x in row["leftovers"]] == ["removal-interrupted"]
    code, out = cli("quarantine", "list", "--store", str(store.root))
    assert code == 0
    assert "[removal-interrupted]" in out and str(staging / "old.log") in out

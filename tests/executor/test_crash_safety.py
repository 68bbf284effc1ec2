"""Random SIGKILLs during a 20,000-item execution: every file's bytes are found exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hygiene_nb import api
from tests.executor.helpers import KILLER, located

ITEMS = 20_000


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


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sigkill_during_a_large_execution_loses_nothing(tmp_path: Path, seed: int) -> None:
    root, store = tmp_path / "r", tmp_path / "store"
    files = build(root, seed)
    api.scan_root(root, store=store)
    api.annotate(list(files), store=store, decision="delete")
    plan = api.make_plan(root, store=store)
    assert plan.candidates == ITEMS
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, plan.plan_path, str(store), plan.plan_id,
         plan.plan_digest],
    )  # fmt: skip
    # Kill somewhere in the middle: after start-up (~1 s) and before it could finish.
    time.sleep(random.Random(seed).uniform(1.0, 3.0))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    counts = located(store, files)
    assert set(counts.values()) == {1}, {p: c for p, c in counts.items() if c != 1}
    moved = sum(not os.path.exists(p) for p in files)
    print(f"seed {seed}: killed with {moved} of {ITEMS} moved")

"""The store's registry of quarantines on other filesystems: what it refuses to read or follow.

(Registering, bad records and concurrent writers are in test_batches.py.)
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.registry import (
    QUARANTINES_NAME,
    QUARANTINES_SCHEMA,
    known_quarantines,
    read_registry,
    register_quarantine,
    registry_problems,
)
from hygiene_nb.store import Store
from tests.helpers import deadline, write

OTHER = Path("/mnt/disk") / QUARANTINE_NAME


def _symlink(registry: Path, tmp_path: Path) -> None:
    good = tmp_path / "elsewhere.json"
    good.write_text(json.dumps({"schema": QUARANTINES_SCHEMA, "quarantines": []}))
    registry.symlink_to(good)


def _directory(registry: Path, tmp_path: Path) -> None:
    registry.mkdir()


def _fifo(registry: Path, tmp_path: Path) -> None:
    os.mkfifo(registry)  # opened without blocking, then refused for what it is


def _huge(registry: Path, tmp_path: Path) -> None:
    with registry.open("wb") as out:
        out.truncate(4 * 1024 * 1024 + 1)  # sparse: larger than any registry of paths


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_symlink, "Too many levels of symbolic links"),
        (_directory, "Is a directory"),
        (_fifo, "not a regular file"),
        (_huge, "absurdly large"),
    ],
)
def test_a_registry_that_is_not_a_plain_file_of_sane_size_is_one_problem(
    qstore: Store, tmp_path: Path, make: Callable[[Path, Path], None], says: str
) -> None:
    registry = qstore.root / QUARANTINES_NAME
    make(registry, tmp_path)
    with deadline(10):
        found, (problem,) = read_registry(qstore)
        assert found == [] and says in problem
        assert known_quarantines(qstore) == [qstore.quarantine]
        (listed,) = registry_problems(qstore)
        assert listed.manifest == "invalid" and says in listed.problems[0]
        with pytest.raises(StoreError, match="cannot be used"):
            register_quarantine(qstore, OTHER)  # never rewritten over what it could not read


def test_a_quarantine_recorded_twice_is_known_once(qstore: Store) -> None:
    record = {"path_b64": base64.b64encode(os.fsencode(OTHER)).decode()}
    (qstore.root / QUARANTINES_NAME).write_text(
        json.dumps({"schema": QUARANTINES_SCHEMA, "quarantines": [record, record]})
    )
    assert known_quarantines(qstore) == [qstore.quarantine, OTHER]


def test_a_lock_file_planted_as_a_symlink_is_not_followed(qstore: Store, tmp_path: Path) -> None:
    canary = write(tmp_path / "canary", data=b"do not touch")
    (qstore.root / (QUARANTINES_NAME + ".lock")).symlink_to(canary)
    with pytest.raises(StoreError, match="cannot lock"):
        register_quarantine(qstore, OTHER)
    assert canary.read_bytes() == b"do not touch"
    assert not (qstore.root / QUARANTINES_NAME).exists()

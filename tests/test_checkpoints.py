"""The test checkpoints shared by the executor and the fleet's publish: inert unless a test
names one, and then acting at that one only (a publish stopped there is never read)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.checkpoints import CHECKPOINTS, EXECUTOR, PUBLISH, CheckpointFault, checkpoint
from hygiene_nb.executor import hooks
from hygiene_nb.fleet.answers import ask
from hygiene_nb.fleet.publish import publish
from hygiene_nb.scan.index import root_slug
from tests.helpers_fleet_cli import make_tree, walked


def test_the_executor_names_its_checkpoints_and_shares_the_mechanism() -> None:
    assert hooks.CHECKPOINTS == EXECUTOR and set(CHECKPOINTS) == set(EXECUTOR) | set(PUBLISH)
    assert not set(EXECUTOR) & set(PUBLISH)
    assert hooks.checkpoint is checkpoint and hooks.CheckpointFault is CheckpointFault


def test_publish_checkpoints_act_only_when_a_test_names_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT", raising=False)
    for name in CHECKPOINTS:
        checkpoint(name)
    assert sent == []
    for wanted in PUBLISH:
        monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", f"{wanted}:kill")
        for name in CHECKPOINTS:
            checkpoint(name)
    assert sent == [(os.getpid(), signal.SIGKILL)] * len(PUBLISH)  # each at its own only


@pytest.mark.parametrize("point", PUBLISH)
def test_a_publish_failing_at_a_checkpoint_is_not_read_until_published_again(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    root = make_tree(tmp_path / "data", {"a/b/c.bin": 12_345, "d.txt": 678}, seed=9)
    info = api.scan_root(root, store=store)
    dest = tmp_path / "fleet"
    key = f"host=h1/root={root_slug(info.root)}/scan={info.scan_id}"
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", f"{point}:fail")
    with pytest.raises(CheckpointFault, match=point):
        publish(str(dest), str(root), store=store, host="h1")
    answer = ask(str(dest))
    assert answer.scans == 0 and answer.frame().empty
    assert [(s.code, s.partition) for s in answer.skipped] == [("partition-incomplete", key)]

    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT")
    assert publish(str(dest), str(root), store=store, host="h1").status == "published"
    answer = ask(str(dest))
    assert answer.skipped == []
    (row,) = answer.frame().to_dict("records")
    walk = walked(root)
    assert (row["host"], row["files"], row["alloc"]) == ("h1", walk["files"], walk["alloc"])
    assert publish(str(dest), str(root), store=store, host="h1").status == "already-published"

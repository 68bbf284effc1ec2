"""Whole-plan checks before anything moves, where the disk no longer holds the plan's root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hygiene_nb.errors import RootReplaced
from hygiene_nb.executor import execute_plan
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, make_plan, snapshot_of


def test_a_root_that_is_gone_is_refused_and_nothing_moves(
    world: dict[str, Path], tmp_path: Path
) -> None:
    plan = make_plan(world, "web/app.log")
    shutil.move(world["root"], tmp_path / "elsewhere")  # the whole tree went away
    store = Store(world["store"])
    before = snapshot_of(tmp_path / "elsewhere", world["canary"], store.quarantine)

    for confirm in (None, confirm_for(plan)):  # the dry run checks the same
        with pytest.raises(RootReplaced) as info:
            execute_plan(plan.plan_path, store=store, confirm=confirm)
        assert info.value.code == "root-replaced"
        assert f"the plan's root {world['root']} cannot be read" in info.value.message

    assert snapshot_of(tmp_path / "elsewhere", world["canary"], store.quarantine) == before
    assert not world["root"].exists()

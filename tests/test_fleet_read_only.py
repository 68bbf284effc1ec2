"""A fleet dataset is evidence, never authority: no store, plan or execution acts in one.

Each command is refused with ``fleet-is-read-only`` (exit 3) and nothing is created inside the
dataset (nor, for execute, moved out of the tree).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.fleet.publish import publish
from hygiene_nb.store import FLEET_MARKER
from tests.helpers_fleet_cli import hnb_error, hnb_json, make_tree, tree_state


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """A scanned tree in its own store, and a fleet dataset it was published into."""
    root = make_tree(tmp_path / "data", {"keep.txt": 4000, "old/junk.log": 9000}, seed=7)
    store = tmp_path / "store"
    api.scan_root(root, store=store)
    dest = tmp_path / "fleet"
    assert publish(str(dest), str(root), store=store, host="hA").status == "published"
    return {"root": root, "store": store, "dest": dest, "tmp": tmp_path}


def assert_refused(world: dict[str, Path], *args: str, env: dict[str, str] | None = None) -> str:
    """``args`` is refused as fleet-is-read-only, exit 3, and the dataset is as it was."""
    before = tree_state(world["dest"])
    code, error, message = hnb_error(*args, extra_env=env)
    assert (code, error) == (3, "fleet-is-read-only"), message
    assert "the fleet dataset" in message and FLEET_MARKER in message
    assert tree_state(world["dest"]) == before
    return message


STORE_COMMANDS = [
    ["summary", "{root}"],
    ["scan", "{root}"],
    ["annotate", "{root}/keep.txt", "--decision", "delete"],
    ["snapshots", "list"],
    ["plan", "{root}"],
]


@pytest.mark.parametrize("where", ["", "snapshots", "published/host=hA", "new-store"])
def test_a_store_in_a_fleet_dataset_is_refused(world: dict[str, Path], where: str) -> None:
    store = world["dest"] / where if where else world["dest"]
    for command in STORE_COMMANDS:
        args = [a.replace("{root}", str(world["root"])) for a in command]
        message = assert_refused(world, *args, "--store", str(store))
        assert "used as a store" in message
    assert not (world["dest"] / "new-store").exists()


def test_a_store_named_by_the_environment_or_a_symlink_is_refused(world: dict[str, Path]) -> None:
    link = world["tmp"] / "store-link"
    link.symlink_to(world["dest"])
    # a symlink to a directory inside the dataset: no marker on the path as given
    inner = world["tmp"] / "inner-link"
    inner.symlink_to(world["dest"] / "snapshots")
    # and '..' after it, which the kernel takes from where the symlink leads: into the dataset
    for store in (
        world["dest"],
        link,
        link / "dirs",
        inner,
        inner / "new-store",
        inner / ".." / "x",
    ):
        assert_refused(world, "summary", str(world["root"]), env={"HYGIENE_NB_STORE": str(store)})
        assert_refused(world, "scan", str(world["root"]), "--store", str(store))
    assert not (world["dest"] / "snapshots" / "new-store").exists()
    assert not (world["dest"] / "x").exists() and not (world["tmp"] / "x").exists()


def test_a_fleet_dataset_cannot_be_planned_in(world: dict[str, Path]) -> None:
    # scanning a fleet dataset only reads it: allowed, and the store is this host's
    code, out, _ = hnb_json("scan", str(world["dest"]), "--store", str(world["store"]))
    assert (code, out["status"]) == (0, "done")
    for root in (world["dest"], world["dest"] / "dirs", world["dest"] / "published" / "host=hA"):
        message = assert_refused(world, "plan", str(root), "--store", str(world["store"]))
        assert "planned in" in message
    plans = world["store"] / "plans"
    assert not plans.exists() or list(plans.iterdir()) == []


def test_a_plan_is_never_written_into_a_fleet_dataset(world: dict[str, Path]) -> None:
    api.annotate([str(world["root"] / "old" / "junk.log")], store=world["store"], decision="delete")
    out = world["dest"] / "plan.json"
    message = assert_refused(
        world, "plan", str(world["root"]), "--out", str(out), "--store", str(world["store"])
    )
    assert "written into" in message
    assert not out.exists() and not out.with_suffix(".md").exists()


def _issued_plan(world: dict[str, Path]) -> dict[str, Any]:
    api.annotate([str(world["root"] / "old" / "junk.log")], store=world["store"], decision="delete")
    code, plan, _ = hnb_json("plan", str(world["root"]), "--store", str(world["store"]))
    assert code == 0 and plan["candidates"] == 1
    return plan


def _execute_args(plan: dict[str, Any], path: Path, store: Path) -> list[list[str]]:
    dry = ["execute", str(path), "--store", str(store)]
    real = [
        *dry, "--execute", "--confirm-plan-id", plan["plan_id"], "--plan-digest",
        plan["plan_digest"], "--acknowledge-risk", "quarantine",
    ]  # fmt: skip
    return [dry, real]


def test_a_plan_file_inside_a_fleet_dataset_is_not_executed(world: dict[str, Path]) -> None:
    plan = _issued_plan(world)
    inside = world["dest"] / "plans" / Path(plan["plan_path"]).name
    inside.parent.mkdir()
    shutil.copy2(plan["plan_path"], inside)
    receipts = (
        tree_state(world["store"] / "receipts") if (world["store"] / "receipts").exists() else {}
    )
    for args in _execute_args(plan, inside, world["store"]):
        message = assert_refused(world, *args)
        assert "executed from" in message
    assert (world["root"] / "old" / "junk.log").stat().st_size == 9000  # nothing moved
    after = world["store"] / "receipts"
    assert (tree_state(after) if after.exists() else {}) == receipts
    # the same plan from the store it was issued into is not refused: it is the fleet that is
    code, out, _ = hnb_json(*_execute_args(plan, Path(plan["plan_path"]), world["store"])[0])
    assert code == 0, out


def test_a_plan_whose_root_became_a_fleet_dataset_is_not_executed(world: dict[str, Path]) -> None:
    plan = _issued_plan(world)
    record = json.loads((world["dest"] / FLEET_MARKER).read_bytes())
    (world["root"] / FLEET_MARKER).write_text(json.dumps(record))  # the root is one now
    before = tree_state(world["root"])
    for args in _execute_args(plan, Path(plan["plan_path"]), world["store"]):
        code, error, message = hnb_error(*args)
        assert (code, error) == (3, "fleet-is-read-only"), message
        assert "executed in" in message
    assert tree_state(world["root"]) == before


def test_a_fleet_dataset_inside_a_scanned_root_is_never_planned(world: dict[str, Path]) -> None:
    home = world["tmp"] / "home"
    dest = home / "fleet"
    shutil.copytree(world["dest"], dest)  # a fleet dataset that a scanned tree holds
    (home / "junk.log").write_bytes(b"x" * 5000)
    store = world["tmp"] / "store2"
    api.scan_root(home, store=store)
    inside = [dest, dest / FLEET_MARKER, *sorted((dest / "published").rglob("*.json"))]
    paths = [str(p) for p in [home / "junk.log", *inside]]
    code, out, _ = hnb_json("annotate", *paths, "--decision", "delete", "--store", str(store))
    assert code == 0, out
    code, out, _ = hnb_json("plan", str(home), "--store", str(store))
    assert code == 0 and out["candidates"] == 1, out
    plan = json.loads(Path(out["plan_path"]).read_text())
    assert [c["path"] for c in plan["candidates"]] == [str(home / "junk.log")]
    left_out = {e["path"]: e["code"] for e in plan["excluded"]}
    assert left_out == {str(p): "protected" for p in inside}


def test_nothing_is_moved_into_a_store_quarantine_that_holds_a_fleet_marker(
    world: dict[str, Path],
) -> None:
    plan = _issued_plan(world)
    quarantine = world["store"] / "quarantine"
    quarantine.mkdir(mode=0o700, exist_ok=True)
    (quarantine / FLEET_MARKER).write_bytes((world["dest"] / FLEET_MARKER).read_bytes())
    before = tree_state(world["root"]), tree_state(quarantine)
    for args in _execute_args(plan, Path(plan["plan_path"]), world["store"]):
        code, error, message = hnb_error(*args)
        assert (code, error) == (3, "fleet-is-read-only"), message
        assert "moved into" in message and str(quarantine) in message
    assert (tree_state(world["root"]), tree_state(quarantine)) == before

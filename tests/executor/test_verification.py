"""Verification around an execution: a failing baseline refuses, a failing after-run rolls back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hygiene_nb.errors import HygieneError
from hygiene_nb.executor import execute_plan, verify_receipt
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import (
    NEEDS_LOG,
    assert_a_kill_at_loses_nothing,
    configure,
    confirm_for,
    make_plan,
    read_bytes,
    snapshot_of,
)
from tests.helpers import confirmed_execute


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed process nobody reaped yet is a zombie: not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def receipt_of(result: object) -> dict[str, object]:
    return json.loads(Path(str(result.receipt_path)).read_text())  # type: ignore[attr-defined]


def plan_state(world: dict[str, Path], plan_id: str) -> str:
    with Ledger.open(Store(world["store"])) as ledger:
        issued = ledger.issued_plan(plan_id)
    assert issued is not None
    return issued.state


def test_without_a_verify_command_the_receipt_says_static_only(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log")
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert result.status == "done"
    assert receipt_of(result)["verification"]["mode"] == "static-only"  # type: ignore[index]


def test_a_failing_baseline_refuses_and_nothing_moves(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log")
    configure(world, f'[[{sys.executable!r}, "-c", "import sys; sys.exit(7)"]]')
    store = Store(world["store"])
    before = snapshot_of(world["root"])
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert refused.value.code == "baseline-failed" and refused.value.exit_code == 3
    assert "exited 7" in refused.value.message and "nothing moved" in refused.value.message
    assert snapshot_of(world["root"]) == before
    assert not list(store.quarantine.iterdir()) and not list(store.receipts.glob("*.json"))
    assert plan_state(world, plan.plan_id) == "issued"  # fix the project, then execute again
    configure(world, NEEDS_LOG)
    again = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert again.status == "rolled-back"  # the log is needed: see the next test


def test_a_baseline_that_times_out_refuses(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log")
    configure(world, f'[[{sys.executable!r}, "-c", "import time; time.sleep(30)"]]', timeout=1)
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert refused.value.code == "baseline-failed" and "timed out" in refused.value.message
    assert (world["root"] / "web" / "app.log").exists()


def test_a_verify_command_that_cannot_start_fails_the_baseline(
    world: dict[str, Path], tmp_path: Path
) -> None:
    plan = make_plan(world, "web/app.log")
    missing = tmp_path / "not-installed" / "pytest"
    configure(world, f'[["{missing}", "-q"]]')
    store = Store(world["store"])
    before = snapshot_of(world["root"])
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert refused.value.code == "baseline-failed"
    assert f"could not start '{missing}'" in refused.value.message
    assert "No such file or directory" in refused.value.message
    assert snapshot_of(world["root"]) == before
    assert plan_state(world, plan.plan_id) == "issued"


def test_a_failing_after_run_rolls_everything_back_and_the_receipt_says_so(
    world: dict[str, Path],
) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log", "data/scratch.bin")
    configure(world, NEEDS_LOG)
    store = Store(world["store"])
    before = snapshot_of(world["root"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "rolled-back"
    assert snapshot_of(world["root"]) == before  # every item back, same inode, same bytes
    receipt = receipt_of(result)
    verification = receipt["verification"]
    assert isinstance(verification, dict)
    assert [r["returncode"] for r in verification["baseline"]] == [0]
    assert [r["returncode"] for r in verification["after"]] == [3]
    assert verification["rollback"] == {"restored": 3, "blocked": []}
    assert plan_state(world, plan.plan_id) == "rolled-back"
    # the receipt counts net moves: nothing moved, three rolled back; verify agrees
    assert receipt["moved"] == 0 and receipt["moved_bytes"] == 0 and receipt["rolled_back"] == 3
    items = receipt["items"]
    assert isinstance(items, list) and {i["outcome"] for i in items} == {"rolled-back"}
    assert result.moved == [] and len(result.rolled_back) == 3
    checked = verify_receipt(str(result.receipt_path))
    assert checked.status == "verified" and checked.moved == 0 and checked.not_back == []
    (world["root"] / "web" / "app.log").unlink()  # gone again: verify notices
    assert verify_receipt(str(result.receipt_path)).not_back == [
        str(world["root"] / "web" / "app.log")
    ]


def test_a_passing_after_run_keeps_the_move(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "data/scratch.bin")
    configure(world, NEEDS_LOG)
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert result.status == "done" and not (world["root"] / "data" / "scratch.bin").exists()
    verification = receipt_of(result)["verification"]
    assert isinstance(verification, dict) and verification["outcome"] == "passed"
    assert len(verification["baseline"]) == len(verification["after"]) == 1


def test_a_rollback_never_overwrites_what_took_an_items_place(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    script = (
        "import pathlib, sys; p = pathlib.Path('data/scratch.bin'); "
        "sys.exit(0 if p.exists() else (p.write_text('regenerated'), 1)[1])"
    )
    recreate = f'[[{sys.executable!r}, "-c", "{script}"]]'
    configure(world, recreate)
    store = Store(world["store"])
    original = read_bytes(os.fsencode(world["root"] / "data" / "scratch.bin"))
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "rolled-back"
    assert (world["root"] / "data" / "scratch.bin").read_text() == "regenerated"
    assert (world["root"] / "web" / "app.log").exists()  # the other item came back
    rollback = receipt_of(result)["verification"]["rollback"]  # type: ignore[index]
    assert rollback["restored"] == 1
    assert [b["code"] for b in rollback["blocked"]] == ["target-occupied"]
    kept = store.quarantine / str(result.batch_id) / "tree"
    assert (
        read_bytes(os.fsencode(kept) + os.fsencode(world["root"] / "data" / "scratch.bin"))
        == original
    )  # nothing lost: the moved bytes wait in quarantine


def test_the_cli_exits_4_on_a_rollback_and_shows_it(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log")
    configure(world, NEEDS_LOG)
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *confirmed_execute(plan, world["store"])],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 4, done.stderr
    assert "verification FAILED after the move: rolled back, 1 item restored" in done.stdout


def test_a_kill_before_the_rollback_loses_nothing(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log")
    configure(world, NEEDS_LOG)
    assert_a_kill_at_loses_nothing(world, plan, "before-rollback")


def test_the_dry_run_says_what_verification_will_run_and_runs_nothing(
    world: dict[str, Path], tmp_path: Path
) -> None:
    plan = make_plan(world, "web/app.log")
    marker = tmp_path / "ran"
    touch = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    configure(world, f'[[{sys.executable!r}, "-c", "{touch}"]]')
    result = execute_plan(plan.plan_path, store=Store(world["store"]))
    assert result.verification["mode"] == "commands"
    assert result.verification["commands"][0][0] == sys.executable
    assert not marker.exists() and "baseline" not in result.verification
    dry = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "execute", plan.plan_path, "--store",
         str(world["store"])], capture_output=True, text=True,
    )  # fmt: skip
    assert dry.returncode == 0 and "runs before (a failure refuses the plan)" in dry.stdout
    assert not marker.exists()
    execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert marker.exists()  # the same command does run when it executes


def test_a_timeout_stops_the_whole_process_group_and_outlived_children_do_not_hang(
    world: dict[str, Path], tmp_path: Path
) -> None:
    from hygiene_nb.executor.verification import run_commands

    started = time.monotonic()
    (record,) = run_commands(
        [["sh", "-c", "setsid sleep 20 & sleep 0.2; exit 0"]], cwd=str(tmp_path), timeout=10
    )
    assert record["returncode"] == 0 and not record["timed_out"]
    assert time.monotonic() - started < 5  # the setsid child holds no pipe to wait on
    child = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {child}; sleep 30"
    (record,) = run_commands([["sh", "-c", script]], cwd=str(tmp_path), timeout=1)
    assert record["timed_out"] and record["returncode"] == -9
    pid = int(child.read_text())
    time.sleep(0.2)
    assert not alive(pid)  # the group's other member was killed too


def test_a_plan_that_expires_during_the_baseline_is_refused(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log", ttl=2)
    configure(world, f'[[{sys.executable!r}, "-c", "import time; time.sleep(3)"]]')
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert refused.value.code == "plan-expired"
    assert (world["root"] / "web" / "app.log").exists()
    assert plan_state(world, plan.plan_id) == "issued"

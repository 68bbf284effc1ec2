"""Same size, mtime put back with ``touch -d``, new content: the change time still tells.

A user can set a file's mtime to anything, but not its ctime. These tests rewrite files in place,
put their mtime back with the real ``touch``, check that size and mtime are exactly what the
scan saw, and expect the plan and the executor to notice all the same.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.store import Store
from tests.helpers import write


def rewrite_keeping_size_and_mtime(path: Path) -> None:
    """New bytes of the same length, then the old mtime back (GNU touch, to the nanosecond)."""
    before = os.lstat(path)
    data = path.read_bytes()
    path.write_bytes(bytes(b ^ 0xFF for b in data))
    sec, ns = divmod(before.st_mtime_ns, 1_000_000_000)
    subprocess.run(["touch", "-h", "-d", f"@{sec}.{ns:09d}", str(path)], check=True)
    after = os.lstat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert after.st_ctime_ns != before.st_ctime_ns


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "r"
    write(root / "scratch.bin", 100)
    write(root / "build" / "deep" / "out.o", 300)
    write(root / "build" / "other.o", 20)
    return {"root": root, "store": tmp_path / "store"}


def plan_for(tree: dict[str, Path], *rels: str) -> api.PlanResult:
    api.scan_root(tree["root"], store=tree["store"])
    api.annotate([str(tree["root"] / r) for r in rels], store=tree["store"], decision="delete")
    return api.make_plan(tree["root"], store=tree["store"])


def test_plan_leaves_out_a_file_rewritten_with_its_mtime_put_back(tree: dict[str, Path]) -> None:
    root, store = tree["root"], tree["store"]
    api.scan_root(root, store=store)
    api.annotate([str(root / "scratch.bin")], store=store, decision="delete")
    rewrite_keeping_size_and_mtime(root / "scratch.bin")
    plan = api.make_plan(root, store=store)
    assert plan.candidates == 0
    [left_out] = plan.plan["excluded"]
    assert left_out["code"] == "changed-since-review"
    assert "ctime" in left_out["message"].lower()


def test_plan_leaves_out_a_directory_whose_deep_file_was_rewritten(tree: dict[str, Path]) -> None:
    root, store = tree["root"], tree["store"]
    api.scan_root(root, store=store)
    api.annotate([str(root / "build")], store=store, decision="delete")
    rewrite_keeping_size_and_mtime(root / "build" / "deep" / "out.o")
    plan = api.make_plan(root, store=store)
    assert plan.candidates == 0
    assert [e["code"] for e in plan.plan["excluded"]] == ["changed-since-review"]


def test_execute_skips_a_file_rewritten_after_the_plan(tree: dict[str, Path]) -> None:
    plan = plan_for(tree, "scratch.bin")
    assert plan.candidates == 1
    assert (
        plan.plan["candidates"][0]["ctime_ns"] == os.lstat(tree["root"] / "scratch.bin").st_ctime_ns
    )
    target = tree["root"] / "scratch.bin"
    rewrite_keeping_size_and_mtime(target)
    content = target.read_bytes()
    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    store = Store(tree["store"])
    dry = execute_plan(plan.plan_path, store=store)
    assert [s.code for s in dry.skipped] == ["changed-since-review"]
    result = execute_plan(plan.plan_path, store=store, confirm=confirm)
    assert result.moved == []
    [skip] = result.skipped
    assert skip.code == "changed-since-review"
    assert "ctime" in skip.message.lower()
    assert target.read_bytes() == content


def test_execute_skips_a_directory_whose_deep_file_was_rewritten(tree: dict[str, Path]) -> None:
    plan = plan_for(tree, "build")
    assert plan.candidates == 1
    deep = tree["root"] / "build" / "deep" / "out.o"
    rewrite_keeping_size_and_mtime(deep)
    content = deep.read_bytes()
    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    result = execute_plan(plan.plan_path, store=Store(tree["store"]), confirm=confirm)
    assert result.moved == []
    assert [s.code for s in result.skipped] == ["changed-since-review"]
    assert deep.read_bytes() == content


def test_an_unchanged_plan_still_moves(tree: dict[str, Path]) -> None:
    plan = plan_for(tree, "scratch.bin", "build")
    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    result = execute_plan(plan.plan_path, store=Store(tree["store"]), confirm=confirm)
    assert result.skipped == []
    assert len(result.moved) == 2
    assert not (tree["root"] / "scratch.bin").exists()


def test_a_write_between_the_check_and_the_move_puts_the_file_back(tree: dict[str, Path]) -> None:
    """The kernel's rename takes whatever the file is then: what arrived is compared again."""
    from hygiene_nb.executor.fileops import LocalFileOps

    target = tree["root"] / "scratch.bin"
    plan = plan_for(tree, "scratch.bin")

    class WriteFirst(LocalFileOps):
        def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
            if src == b"scratch.bin" and target.exists():
                with target.open("ab") as handle:  # another program appends, just in time
                    handle.write(b"late")
            super().rename_noreplace(src_dir, src, dst_dir, dst)

    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    result = execute_plan(
        plan.plan_path, store=Store(tree["store"]), confirm=confirm, ops=WriteFirst()
    )
    assert result.moved == []
    [skip] = result.skipped
    assert skip.code == "changed-since-review" and "written to" in skip.message
    assert target.read_bytes().endswith(b"late")  # put back, with the late bytes

"""Mounts inside what would be moved or destroyed, and a root that is itself a bind mount.

A bind mount of another directory of the *same* filesystem has the same ``st_dev`` as its
surroundings: only mount ids tell it apart. Every test mounts for real (``mount --bind``,
``mount -t tmpfs``) and is skipped, with the reason, where mounting is impossible.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import HygieneError
from hygiene_nb.executor import execute_plan, list_store_batches, restore_batch
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, LocalFileOps, remove_tree
from hygiene_nb.executor.purge import purge_batch
from hygiene_nb.fs.mounts import MountInside, mount_points_below
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, in_store_batch, quarantine_items, volume_unusable
from tests.helpers import bind_mount, confirmed_execute, tmpfs, write


def hashes(path: Path) -> dict[str, str]:
    """Every file below ``path`` and its SHA-256 (what must keep its bytes)."""
    out = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(path))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def mworld(tmp_path: Path) -> dict[str, Path]:
    """A root with a candidate directory ``cache`` and, outside it, precious files to mount."""
    root = tmp_path / "r"
    write(root / "cache" / "junk.bin", 500)
    write(root / "cache" / "deep" / "more.bin", 300)
    (root / "cache" / "mnt").mkdir()
    write(root / "other.log", 20)
    outside = tmp_path / "precious"
    write(outside / "thesis.tex", data=b"four years of work\n")
    write(outside / "data" / "results.csv", data=b"1,2,3\n")
    return {"root": root, "store": tmp_path / "store", "outside": outside, "tmp": tmp_path}


def plan_of(world: dict[str, Path], *rels: str, one_file_system: bool = False) -> api.PlanResult:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store, one_file_system=one_file_system)
    api.annotate([str(root / r) for r in rels], store=store, decision="delete")
    return api.make_plan(root, store=store)


def excluded(plan: api.PlanResult) -> dict[str, str]:
    return {Path(e["path"]).name: e["code"] for e in plan.plan["excluded"]}


def outcomes(result: Any) -> dict[str, str]:
    out = {Path(m.path).name: "moved" for m in result.moved}
    out.update({Path(s.path).name: s.code for s in result.skipped})
    return out


# -- plan time ---------------------------------------------------------------------------------


@pytest.mark.parametrize("one_file_system", [False, True])
def test_a_candidate_holding_a_same_filesystem_bind_mount_is_left_out_of_the_plan(
    mworld: dict[str, Path], one_file_system: bool
) -> None:
    mnt = mworld["root"] / "cache" / "mnt"
    with bind_mount(mworld["outside"], mnt):
        assert os.stat(mnt).st_dev == os.stat(mworld["root"]).st_dev  # st_dev cannot tell
        plan = plan_of(mworld, "cache", "other.log", one_file_system=one_file_system)
    assert excluded(plan) == {"cache": "contains-mount"}
    assert [Path(c["path"]).name for c in plan.plan["candidates"]] == ["other.log"]
    (entry,) = plan.plan["excluded"]
    assert "mounted" in entry["message"] and "unmount" in entry["message"]


def test_a_candidate_holding_a_tmpfs_is_left_out_of_the_plan(mworld: dict[str, Path]) -> None:
    mnt = mworld["root"] / "cache" / "mnt"
    with tmpfs(mnt):
        write(mnt / "volatile.bin", 40)
        plan = plan_of(mworld, "cache")
    assert excluded(plan) == {"cache": "contains-mount"}


def test_a_file_bind_mounted_inside_a_candidate_keeps_it_out(mworld: dict[str, Path]) -> None:
    """No directory walk sees a file mounted over a file; the mount table does."""
    cache = mworld["root"] / "cache"
    thesis = mworld["outside"] / "thesis.tex"
    with bind_mount(thesis, cache / "junk.bin"):
        plan = plan_of(mworld, "cache")
    assert excluded(plan) == {"cache": "contains-mount"}
    later = plan_of(mworld, "cache")
    with bind_mount(thesis, cache / "junk.bin"):
        done = execute_plan(
            later.plan_path, store=Store(mworld["store"]), confirm=confirm_for(later)
        )
    assert outcomes(done) == {"cache": "contains-mount"}
    assert thesis.read_bytes() == b"four years of work\n"


def test_a_candidate_that_is_itself_a_mount_point_is_left_out(mworld: dict[str, Path]) -> None:
    cache = mworld["root"] / "cache"
    with bind_mount(cache, cache):  # the same directory mounted on itself: same dev and inode
        plan = plan_of(mworld, "cache")
    assert excluded(plan) == {"cache": "contains-mount"}


# -- execute time ------------------------------------------------------------------------------


def test_a_bind_mount_made_after_planning_is_skipped_and_its_files_untouched(
    mworld: dict[str, Path],
) -> None:
    plan = plan_of(mworld, "cache", "other.log")
    assert len(plan.plan["candidates"]) == 2
    store = Store(mworld["store"])
    before = hashes(mworld["outside"])
    mnt = mworld["root"] / "cache" / "mnt"
    with bind_mount(mworld["outside"], mnt):
        dry = execute_plan(plan.plan_path, store=store)
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        assert hashes(mnt) == before  # still mounted where it was
    assert outcomes(dry) == outcomes(done) == {"cache": "contains-mount", "other.log": "moved"}
    (skip,) = done.skipped
    assert "unmount" in skip.message
    assert hashes(mworld["outside"]) == before
    assert (mworld["root"] / "cache" / "junk.bin").exists()


def test_a_directory_bind_mounted_on_itself_after_planning_is_not_moved(
    mworld: dict[str, Path],
) -> None:
    """Same device, inode, size and mtime, same fingerprint: only the mount id differs."""
    plan = plan_of(mworld, "cache")
    store = Store(mworld["store"])
    deep = mworld["root"] / "cache" / "deep"
    with bind_mount(deep, deep):
        dry = execute_plan(plan.plan_path, store=store)
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        assert outcomes(dry) == outcomes(done) == {"cache": "contains-mount"}
    assert (deep / "more.bin").stat().st_size == 300
    assert all(b.items == 0 for b in list_store_batches(store))


def test_a_mount_made_between_the_check_and_the_move_is_put_back(
    mworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory is checked, then (before the rename) a directory inside it is mounted on
    itself: identical fingerprint, so only the walk inside the batch can see it."""
    from hygiene_nb.executor import moves as moves_module
    from hygiene_nb.executor.hooks import checkpoint as real_checkpoint

    plan = plan_of(mworld, "cache")
    deep = mworld["root"] / "cache" / "deep"
    with ExitStack() as stack:

        def mount_then(name: str) -> None:
            if name == "after-intent":
                stack.enter_context(bind_mount(deep, deep))
            real_checkpoint(name)

        monkeypatch.setattr(moves_module, "checkpoint", mount_then)
        done = execute_plan(plan.plan_path, store=Store(mworld["store"]), confirm=confirm_for(plan))
        assert outcomes(done) == {"cache": "contains-mount"}
        assert "put back" in done.skipped[0].message
        # still mounted at its place (os.path.ismount cannot see a directory mounted on itself)
        assert mount_points_below(os.fsencode(deep)) == [os.fsencode(deep)]
        assert (deep / "more.bin").stat().st_size == 300
    assert (mworld["root"] / "cache" / "junk.bin").exists()
    assert list_store_batches(Store(mworld["store"])) == []


def test_a_tmpfs_mounted_after_planning_is_skipped(mworld: dict[str, Path]) -> None:
    plan = plan_of(mworld, "cache")
    store = Store(mworld["store"])
    mnt = mworld["root"] / "cache" / "mnt"
    with tmpfs(mnt):
        write(mnt / "volatile.bin", data=b"only copy")
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        assert (mnt / "volatile.bin").read_bytes() == b"only copy"
    assert outcomes(done) == {"cache": "contains-mount"}


def test_a_mount_in_a_copied_tree_is_never_copied_or_removed(
    mworld: dict[str, Path],
) -> None:
    """The verified copy's own walks (inventory, removal) stop at another mount too."""
    from hygiene_nb.executor.inventory import Unverifiable, inventory

    cache = mworld["root"] / "cache"
    with bind_mount(mworld["outside"], cache / "mnt"):
        fd = os.open(mworld["root"], DIR_FLAGS)
        try:
            with pytest.raises(Unverifiable, match="mount"):
                inventory(fd, b"cache", os.fstat(fd).st_dev)
        finally:
            os.close(fd)


# -- purge -------------------------------------------------------------------------------------


def test_purge_refuses_a_batch_holding_a_mount_and_deletes_nothing(
    mworld: dict[str, Path],
) -> None:
    """A batch that older code filled with a live mount inside: purge must not reach through."""
    store = Store(mworld["store"]).ensure()
    cache = mworld["root"] / "cache"
    bid = quarantine_items(store, [cache])
    held = Path(os.fsdecode(in_store_batch(store, bid, cache)))
    before_outside = hashes(mworld["outside"])
    before_batch = hashes(held)
    with bind_mount(mworld["outside"], held / "mnt"):
        with pytest.raises(HygieneError) as dry:
            purge_batch(store, bid)
        with pytest.raises(HygieneError) as refused:
            purge_batch(
                store,
                bid,
                execute=True,
                confirm_batch_id=bid,
                acknowledge_risk="permanent-delete",
                include_incomplete=True,
            )
        assert hashes(held / "mnt") == before_outside
    assert dry.value.code == refused.value.code == "batch-contains-mount"
    assert refused.value.exit_code == 3 and "umount" in str(refused.value)
    assert hashes(mworld["outside"]) == before_outside
    assert hashes(held) == before_batch  # nothing of the batch either


def test_remove_tree_stops_at_a_mount_before_anything_under_it(
    mworld: dict[str, Path],
) -> None:
    """The destroying walk checks every directory it opens (a mount raced in after the count)."""
    cache = mworld["root"] / "cache"
    before = hashes(mworld["outside"])
    with bind_mount(mworld["outside"], cache / "mnt"):
        fd = os.open(mworld["root"], DIR_FLAGS)
        try:
            with pytest.raises(MountInside):
                remove_tree(fd, b"cache")
        finally:
            os.close(fd)
        assert hashes(cache / "mnt") == before
    assert hashes(mworld["outside"]) == before


def test_purge_of_a_batch_holding_a_tmpfs_refuses(mworld: dict[str, Path]) -> None:
    store = Store(mworld["store"]).ensure()
    cache = mworld["root"] / "cache"
    bid = quarantine_items(store, [cache])
    held = Path(os.fsdecode(in_store_batch(store, bid, cache)))
    with tmpfs(held / "mnt"):
        write(held / "mnt" / "volatile", data=b"v")
        with pytest.raises(HygieneError) as refused:
            purge_batch(
                store, bid, execute=True, confirm_batch_id=bid, acknowledge_risk="permanent-delete"
            )
        assert (held / "mnt" / "volatile").read_bytes() == b"v"
    assert refused.value.code == "batch-contains-mount"


# -- a root that is a bind mount (item 18) -----------------------------------------------------


@contextmanager
def bound_root(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """``r`` is a bind mount of ``real`` (same filesystem); the store is beside it, outside."""
    real = tmp_path / "real"
    write(real / "f.log", data=b"log\n")
    write(real / "d" / "g.bin", 64)
    root = tmp_path / "r"
    root.mkdir()
    with bind_mount(real, root):
        assert os.stat(root).st_dev == os.stat(tmp_path).st_dev
        yield {"root": root, "store": tmp_path / "store", "real": real}


def test_a_bind_mounted_root_moves_what_the_dry_run_predicts(tmp_path: Path) -> None:
    with bound_root(tmp_path) as world:
        plan = plan_of(world, "f.log", "d")
        store = Store(world["store"])
        dry = execute_plan(plan.plan_path, store=store)
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        predicted = {Path(m.path).name: (m.dest.quarantine, m.dest.method) for m in dry.moved}
        assert outcomes(dry) == outcomes(done) == {"f.log": "moved", "d": "moved"}
        quarantine = str(world["root"] / QUARANTINE_NAME)  # the top of the root's own mount
        assert predicted == {"f.log": (quarantine, "rename"), "d": (quarantine, "rename")}
        assert [Path(b["batch_path"]).parent for b in done.batches] == [Path(quarantine)]
        assert not (world["root"] / "f.log").exists()
        batches = list_store_batches(store)
        assert [(b.items, b.manifest) for b in batches] == [(2, "ok")]
        assert not store.quarantine.exists() or os.listdir(store.quarantine) == []
        back = restore_batch(store, done.batches[0]["batch_id"], execute=True)
        assert back.status == "done" and (world["root"] / "f.log").read_bytes() == b"log\n"
        assert (world["real"] / "d" / "g.bin").stat().st_size == 64


def test_a_bind_mounted_root_copies_with_allow_copy_when_its_quarantine_is_unusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with bound_root(tmp_path) as world:
        plan = plan_of(world, "f.log", "d")
        store = Store(world["store"])
        volume_unusable(monkeypatch)
        without = execute_plan(plan.plan_path, store=store)
        assert outcomes(without) == {"f.log": "cross-device", "d": "cross-device"}
        dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
        assert {m.dest.method for m in dry.moved} == {"copy"}
        assert outcomes(dry) == outcomes(done) == {"f.log": "moved", "d": "moved"}
        assert not (world["real"] / "f.log").exists() and not (world["real"] / "d").exists()
        (batch,) = list_store_batches(store)
        assert (batch.items, batch.manifest) == (2, "ok")
        assert Path(batch.path).parent == store.quarantine


def test_cli_a_run_that_moved_nothing_gives_the_plan_back(mworld: dict[str, Path]) -> None:
    plan = plan_of(mworld, "other.log", "cache")
    (mworld["root"] / "other.log").write_bytes(b"grew since the plan")
    write(mworld["root"] / "cache" / "new.tex", 9)
    argv = [sys.executable, "-m", "hygiene_nb", *confirmed_execute(plan, mworld["store"])]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert run.returncode == 4, run.stderr
    assert "not used up" in run.stdout and "Traceback" not in run.stderr
    again = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 4, again.stderr  # not refused: the plan was given back
    out = json.loads(again.stdout)
    assert out["plan_state"] == "issued" and out["batches"] == [] and out["moved"] == []
    assert {s["code"] for s in out["skipped"]} == {"changed-since-review"}
    assert list_store_batches(Store(mworld["store"])) == []


class _FailingRenames(LocalFileOps):
    """Every rename of a user's item fails as a rename across mounts does (``EXDEV``)."""

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src)


def test_a_plan_whose_every_item_failed_before_moving_stays_usable(
    mworld: dict[str, Path],
) -> None:
    plan = plan_of(mworld, "other.log", "cache")
    store = Store(mworld["store"])
    failed = execute_plan(
        plan.plan_path, store=store, confirm=confirm_for(plan), ops=_FailingRenames()
    )
    assert outcomes(failed) == {"other.log": "move-failed", "cache": "move-failed"}
    assert failed.batches == [] and failed.batch_id is None
    assert list_store_batches(store) == []  # no empty batch left behind
    assert not store.quarantine.exists() or os.listdir(store.quarantine) == []
    receipt = json.loads(Path(failed.receipt_path or "").read_text())
    assert receipt["moved"] == 0 and receipt["batches"] == []
    assert failed.plan_state == "issued" and receipt["plan_state"] == "issued"
    with Ledger.open(store) as ledger:
        issued = ledger.issued_plan(plan.plan_id)
    assert issued is not None and issued.state == "issued"

    done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert outcomes(done) == {"other.log": "moved", "cache": "moved"}
    with pytest.raises(HygieneError) as again:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert again.value.code == "plan-already-executed"


def test_a_file_mount_is_found_when_the_root_is_reached_through_a_symlinked_ancestor(
    mworld: dict[str, Path],
) -> None:
    """The mount table lists kernel paths; ``~/link/R`` must be compared by the kernel's path."""
    link = mworld["tmp"] / "link"
    link.symlink_to(mworld["tmp"])  # tmp/link/r is the root, through a symlinked ancestor
    world = {**mworld, "root": link / "r"}
    cache = mworld["root"] / "cache"
    thesis = mworld["outside"] / "thesis.tex"
    with bind_mount(thesis, cache / "junk.bin"):
        plan = plan_of(world, "cache")
    assert excluded(plan) == {"cache": "contains-mount"}
    later = plan_of(world, "cache")
    assert len(later.plan["candidates"]) == 1
    with bind_mount(thesis, cache / "junk.bin"):
        done = execute_plan(
            later.plan_path, store=Store(mworld["store"]), confirm=confirm_for(later)
        )
    assert outcomes(done) == {"cache": "contains-mount"}
    assert thesis.read_bytes() == b"four years of work\n"

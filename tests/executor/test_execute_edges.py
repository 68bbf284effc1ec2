"""Execute at its edges: what goes wrong between one step of a run and the next.

Each test makes one real thing happen at one moment of a run (another execution of the plan,
the root swapped, a batch another process holds, a store with no room for a directory, a
filesystem turned read-only, an item replaced or written to while it is copied, a file that
arrives while an original is removed, no file handle left) and checks what a person would: the
skip code and its message, that every byte is still in one place, and what the batch's
manifest records.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hygiene_nb.errors import HygieneError
from hygiene_nb.executor import execute_plan, list_store_batches, restore_batch
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, REMOVING_PREFIX, LocalFileOps
from hygiene_nb.executor.hooks import CheckpointFault
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.executor.helpers import (
    NEEDS_LOG,
    configure,
    confirm_for,
    contents,
    in_batch,
    make_plan,
    outcomes,
    snapshot_of,
    states,
    volume_unusable,
)
from tests.helpers import tmpfs, write


def at_checkpoints(monkeypatch: pytest.MonkeyPatch, actions: dict[str, Callable[[], None]]) -> None:
    """Run ``actions[name]`` when a run reaches checkpoint ``name`` (in whichever module)."""
    from hygiene_nb.executor import hooks

    real = hooks.checkpoint

    def at(name: str) -> None:
        if name in actions:
            actions[name]()
        real(name)

    for module in ("execute", "moves", "verification", "fileops"):
        monkeypatch.setattr(f"hygiene_nb.executor.{module}.checkpoint", at)


def the_batch(store: Store) -> Path:
    """The one batch in the store's quarantine."""
    (batch,) = [p for p in store.quarantine.iterdir() if p.is_dir()]
    return batch


def plan_state(store: Store, plan_id: str) -> str:
    with Ledger.open(store) as ledger:
        issued = ledger.issued_plan(plan_id)
    assert issued is not None
    return issued.state


class FullFor(LocalFileOps):
    """A store with no room left for one more directory: making ``name`` fails (``ENOSPC``)."""

    def __init__(self, name: bytes) -> None:
        self.name = name

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        if name == self.name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        super().make_dir(dir_fd, name)


# -- the whole run ---------------------------------------------------------------------------------

# Executes the plan itself while the outer run's baseline check runs (the same command, run
# again as the inner run's own baseline and after-check, only passes).
CONCURRENT = """
import os, sys
if os.environ.get("HNB_INNER"):
    sys.exit(0)
os.environ["HNB_INNER"] = "1"
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.store import resolve_store
execute_plan(sys.argv[1], store=resolve_store(sys.argv[2]),
             confirm=Confirmation(sys.argv[3], sys.argv[4], "quarantine"))
"""


def test_a_plan_executed_by_another_run_meanwhile_is_refused_at_its_claim(
    world: dict[str, Path],
) -> None:
    plan = make_plan(world, "web/app.log")
    store = Store(world["store"])
    argv = [sys.executable, "-c", CONCURRENT, plan.plan_path, str(store.root)]
    configure(world, json.dumps([[*argv, plan.plan_id, plan.plan_digest]]))
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert refused.value.code == "plan-already-executed"
    # the other run moved it, once; this one wrote nothing and held no room after
    original = world["root"] / "web" / "app.log"
    assert not original.exists()
    assert in_batch(the_batch(store), original).read_bytes() == b"x" * 40
    (receipt,) = [json.loads(p.read_text()) for p in store.receipts.glob("*.json")]
    assert receipt["moved"] == 1 and receipt["plan_state"] == "executed"
    assert list(store.receipts.glob(".reserve-*")) == []
    assert plan_state(store, plan.plan_id) == "executed"


def test_a_root_replaced_after_the_claim_aborts_the_run_before_anything_moves(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world["root"]
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    store = Store(world["store"])
    before = snapshot_of(root)
    old = root.with_name("r-before")

    def swap() -> None:
        root.rename(old)
        (root / "web").mkdir(parents=True)  # a new root, with the same names in it

    at_checkpoints(monkeypatch, {"after-claim": swap})
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert set(outcomes(result).values()) == {"aborted"} and len(result.skipped) == 2
    assert result.plan_state == "aborted" and result.moved == []
    receipt = json.loads(Path(result.receipt_path or "").read_text())
    assert "was replaced just before acting on it" in receipt["aborted"]
    assert snapshot_of(old) == {
        path.replace(os.fsencode(root), os.fsencode(old), 1): v for path, v in before.items()
    }
    assert list_store_batches(store) == []


def test_a_rollback_that_finds_its_batch_busy_leaves_the_items_in_it(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world, "web/app.log")
    configure(world, NEEDS_LOG)  # passes before the move, fails after it: a rollback
    store = Store(world["store"])
    held: list[int] = []

    def another_restore_holds_it() -> None:
        fd = os.open(the_batch(store), DIR_FLAGS)
        fcntl.flock(fd, fcntl.LOCK_EX)  # as ``restore`` and ``purge`` lock a batch
        held.append(fd)

    at_checkpoints(monkeypatch, {"before-rollback": another_restore_holds_it})
    try:
        result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    finally:
        for fd in held:
            os.close(fd)
    batch = the_batch(store)
    rollback = result.verification["rollback"]
    assert rollback["restored"] == 0
    assert [(b["batch_id"], b["code"]) for b in rollback["blocked"]] == [(batch.name, "batch-busy")]
    assert result.status == "rolled-back" and result.exit_code == 4
    original = world["root"] / "web" / "app.log"
    assert [m.path for m in result.moved] == [str(original)] and result.rolled_back == []
    assert states(batch) == {os.fsencode(original): "moved"}
    assert in_batch(batch, original).read_bytes() == b"x" * 40
    restore_batch(store, batch.name, execute=True)  # once the other process let go
    assert original.read_bytes() == b"x" * 40


def test_a_run_stopped_after_a_reference_skip_reports_both(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world["root"]
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    write(root / "web" / "NOTES.md", data=b"the server writes to app.log\n")  # after the plan
    store = Store(world["store"])
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "after-intent:fail")
    with pytest.raises(CheckpointFault):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (receipt,) = [json.loads(p.read_text()) for p in store.receipts.glob("*.json")]
    found = {i["path"]: (i["code"], i["message"]) for i in receipt["items"]}
    log, scratch = str(root / "web" / "app.log"), str(root / "data" / "scratch.bin")
    assert found[log][0] == "referenced-by" and "NOTES.md" in found[log][1]
    assert found[scratch][0] == "aborted" and "it was being moved" in found[scratch][1]
    assert (root / "web" / "app.log").read_bytes() == b"x" * 40
    assert (root / "data" / "scratch.bin").read_bytes() == b"x" * 100
    assert plan_state(store, plan.plan_id) == "aborted"


# -- where an item goes ----------------------------------------------------------------------------


def open_handles() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_an_interrupt_while_a_volume_quarantine_is_made_leaves_no_handle_open(
    xworld: dict[str, Path],
) -> None:
    class Interrupted(LocalFileOps):
        def make_dir(self, dir_fd: int, name: bytes) -> None:
            if name == QUARANTINE_NAME.encode():
                raise KeyboardInterrupt
            super().make_dir(dir_fd, name)

    mnt = xworld["mnt"]
    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    before = open_handles()
    with pytest.raises(KeyboardInterrupt):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), ops=Interrupted())
    assert open_handles() == before  # the item's parent too
    assert (mnt / "old.log").read_bytes() == b"old log line\n" * 10
    assert not (mnt / QUARANTINE_NAME).exists() and list_store_batches(store) == []


def test_a_quarantine_the_store_cannot_register_keeps_its_items_in_place(
    xworld: dict[str, Path],
) -> None:
    mnt = xworld["mnt"]
    plan = make_plan(xworld, "mnt/old.log", "local.log")
    store = Store(xworld["store"])
    (store.root / "quarantines.json.lock").mkdir()  # the registry's lock cannot be opened
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert outcomes(result) == {
        str(mnt / "old.log"): "cross-device",
        str(xworld["root"] / "local.log"): "moved",
    }
    (skip,) = result.skipped
    assert "cannot be registered" in skip.message
    assert (mnt / "old.log").read_bytes() == b"old log line\n" * 10
    assert list((mnt / QUARANTINE_NAME).iterdir()) == []  # no batch was made in it


def test_a_filesystem_turned_read_only_before_its_quarantine_is_made_is_not_copied_from(
    xworld: dict[str, Path],
) -> None:
    mnt = xworld["mnt"]

    class TurnsReadOnly(LocalFileOps):
        def make_dir(self, dir_fd: int, name: bytes) -> None:
            if name == QUARANTINE_NAME.encode():
                subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, timeout=30)
            super().make_dir(dir_fd, name)

    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    try:
        result = execute_plan(
            plan.plan_path,
            store=store,
            confirm=confirm_for(plan),
            ops=TurnsReadOnly(),
            allow_copy=True,
        )
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True, timeout=30)
    assert outcomes(result) == {str(mnt / "old.log"): "read-only-filesystem"}  # not a copy
    assert (mnt / "old.log").read_bytes() == b"old log line\n" * 10
    assert list_store_batches(store) == [] and result.plan_state == "issued"


@pytest.mark.parametrize("change", ["moved-away", "replaced"])
def test_an_item_changed_between_its_check_and_its_inventory_is_not_copied(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    mnt = xworld["mnt"]
    item = mnt / "old.log"
    kept = mnt / "old.log.kept"

    def meanwhile() -> None:
        item.rename(kept)
        if change == "replaced":
            write(item, data=b"someone else's log\n")

    volume_unusable(monkeypatch, meanwhile)
    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    (skip,) = result.skipped
    if change == "moved-away":
        assert skip.code == "copy-failed" and os.strerror(errno.ENOENT) in skip.message
        assert not item.exists()
    else:
        assert skip.code == "changed-since-review" and skip.message.startswith("It was replaced;")
        assert item.read_bytes() == b"someone else's log\n"
    assert kept.read_bytes() == b"old log line\n" * 10
    assert list_store_batches(store) == [] and result.plan_state == "issued"  # nothing copied


# -- the moves -------------------------------------------------------------------------------------


def test_a_store_with_no_room_for_the_items_directory_keeps_it_in_place(
    world: dict[str, Path],
) -> None:
    root = world["root"]
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    store = Store(world["store"])
    result = execute_plan(
        plan.plan_path, store=store, confirm=confirm_for(plan), ops=FullFor(b"web")
    )
    log = root / "web" / "app.log"
    assert outcomes(result) == {
        str(log): "move-failed",
        str(root / "data" / "scratch.bin"): "moved",
    }
    assert os.strerror(errno.ENOSPC) in result.skipped[0].message
    assert log.read_bytes() == b"x" * 40
    assert states(the_batch(store))[os.fsencode(log)] == "returned"


def test_a_store_with_no_room_for_a_copys_directory_keeps_the_original(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/old.log", "local.log")
    store = Store(xworld["store"])
    result = execute_plan(
        plan.plan_path, store=store, confirm=confirm_for(plan), ops=FullFor(b"mnt"), allow_copy=True
    )
    item = mnt / "old.log"
    assert outcomes(result) == {
        str(item): "copy-failed",
        str(xworld["root"] / "local.log"): "moved",
    }
    (skip,) = result.skipped
    assert os.strerror(errno.ENOSPC) in skip.message and "a partial copy may stay" in skip.message
    assert item.read_bytes() == b"old log line\n" * 10
    assert states(the_batch(store))[os.fsencode(item)] == "returned"


def test_an_original_written_to_while_it_is_copied_stays_with_its_new_bytes(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    inside = mnt / "cache" / "sub" / "b.bin"
    written = inside.read_bytes() + b"written while copying"

    class WritesDuringTheCopy(LocalFileOps):
        def make_dir(self, dir_fd: int, name: bytes) -> None:
            if name == b"cache":  # the copy's top directory: the copy has begun
                inside.write_bytes(written)
            super().make_dir(dir_fd, name)

    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/cache")
    store = Store(xworld["store"])
    result = execute_plan(
        plan.plan_path,
        store=store,
        confirm=confirm_for(plan),
        ops=WritesDuringTheCopy(),
        allow_copy=True,
    )
    (skip,) = result.skipped
    assert skip.code == "copy-failed" and skip.message.startswith(
        "The original changed while it was copied;"
    )
    assert inside.read_bytes() == written
    assert states(the_batch(store))[os.fsencode(mnt / "cache")] == "returned"


def test_a_file_that_arrives_while_an_original_is_removed_stays_with_what_is_left(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    item = mnt / "cache"
    whole = contents(item)
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/cache")
    store = Store(xworld["store"])
    arrived: list[Path] = []

    def a_file_arrives() -> None:
        if not arrived:  # after the first file of it was unlinked
            (staging,) = [
                p for p in mnt.iterdir() if os.fsencode(p.name).startswith(REMOVING_PREFIX)
            ]
            arrived.append(write(staging / "cache" / "late.txt", data=b"new work"))

    at_checkpoints(monkeypatch, {"between-unlinks": a_file_arrives})
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    (skip,) = result.skipped
    assert skip.code == "copy-failed" and "A verified copy is in batch" in skip.message
    assert os.strerror(errno.ENOTEMPTY) in skip.message
    assert (item / "late.txt").read_bytes() == b"new work"  # put back with what is left
    batch = the_batch(store)
    assert contents(in_batch(batch, item)) == whole  # the copy holds all of the original
    assert states(batch)[os.fsencode(item)] == "moved"
    assert [p for p in mnt.iterdir() if os.fsencode(p.name).startswith(REMOVING_PREFIX)] == []


def free_only(count: int) -> None:
    """Lower this process's limit on open files so that only about ``count`` more can open."""
    used = {int(n) for n in os.listdir("/proc/self/fd")}
    limit = free = 0
    while free < count:
        free += limit not in used
        limit += 1
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def test_a_directory_that_cannot_be_read_again_in_the_batch_is_put_back(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world["root"]
    deep = root / "deep"
    write(deep.joinpath(*(f"d{i}" for i in range(24)), "leaf.txt"), data=b"at the bottom")
    plan = make_plan(world, "deep")
    store = Store(world["store"])
    before = snapshot_of(deep)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    # reading it again in the batch needs a handle per level; the manifest needs two at most
    at_checkpoints(
        monkeypatch,
        {
            "after-move": lambda: free_only(3),
            "after-manifest": lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limits),
        },
    )
    try:
        result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    (skip,) = result.skipped
    assert skip.code == "changed-since-review"
    assert f"could not be read again ({os.strerror(errno.EMFILE)})" in skip.message
    assert "it was put back" in skip.message
    assert snapshot_of(deep) == before
    assert list_store_batches(store) == [] and result.plan_state == "issued"  # nothing moved


def test_a_moved_item_that_cannot_be_reached_in_its_batch_is_not_counted_as_freed(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = world["root"] / "web" / "app.log"
    plan = make_plan(world, "web/app.log")
    store = Store(world["store"])
    hidden: list[Path] = []

    def hide_its_directory() -> None:
        mirror = in_batch(the_batch(store), original.parent)
        mirror.rename(mirror.with_name("web-hidden"))
        hidden.append(mirror)

    def bring_it_back() -> None:
        mirror = hidden.pop()
        mirror.with_name("web-hidden").rename(mirror)

    at_checkpoints(monkeypatch, {"after-move": hide_its_directory, "after-manifest": bring_it_back})
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (moved,) = result.moved
    assert moved.dest.open_at_move
    assert "it cannot be reached in the batch to ask" in moved.dest.open_at_move_detail
    assert result.bytes == 0  # whether a program still holds it could not be told
    batch = the_batch(store)
    assert in_batch(batch, original).read_bytes() == b"x" * 40
    assert states(batch) == {os.fsencode(original): "moved"}


def test_a_filesystem_with_no_room_for_a_batch_keeps_its_items_in_place(tmp_path: Path) -> None:
    root = tmp_path / "r"
    small = root / "small"
    small.mkdir(parents=True)
    world = {"root": root, "store": tmp_path / "store"}
    with tmpfs(small, "size=1m,nr_inodes=64"):
        item = write(small / "old.log", data=b"an old log\n")
        (small / "filler").mkdir()
        plan = make_plan(world, "small/old.log")
        (small / QUARANTINE_NAME).mkdir(mode=0o700)  # the quarantine is there, trusted
        for number in itertools.count():  # and no inode is left for a batch in it
            try:
                (small / "filler" / str(number)).touch()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        store = Store(world["store"])
        result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        (skip,) = result.skipped
        assert skip.code == "cross-device"
        assert skip.message.startswith(f"No batch can be made in {small / QUARANTINE_NAME} (")
        assert os.strerror(errno.ENOSPC) in skip.message
        assert item.read_bytes() == b"an old log\n"
        assert list((small / QUARANTINE_NAME).iterdir()) == []
        assert list_store_batches(store) == [] and result.plan_state == "issued"


def test_a_baseline_command_that_cannot_start_refuses_and_says_so(world: dict[str, Path]) -> None:
    missing = world["root"].parent / "no-such-command"
    plan = make_plan(world, "web/app.log")
    configure(world, json.dumps([[str(missing), "-q"]]))
    store = Store(world["store"])
    with pytest.raises(HygieneError) as refused:
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert refused.value.code == "baseline-failed"
    message = refused.value.message
    assert f"`{missing} -q` could not start before anything moved" in message
    assert os.strerror(errno.ENOENT) in message
    assert (world["root"] / "web" / "app.log").read_bytes() == b"x" * 40
    assert plan_state(store, plan.plan_id) == "issued"

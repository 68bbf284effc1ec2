"""Items on another filesystem: a quarantine at the top of that filesystem, or a verified copy.

A tmpfs is mounted on a directory inside the plan's root, so candidates there are on another
device than the store. Where no tmpfs can be mounted (not root, no mount permission) every test
here is skipped with the reason.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.executor import execute_plan, list_store_batches, restore_batch, verify_receipt
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import DIR_FLAGS, remove_original_after_verified_copy
from hygiene_nb.executor.registry import known_quarantines
from hygiene_nb.store import FLEET_MARKER, Store
from tests.executor.helpers import (
    confirm_for,
    contents,
    in_batch,
    make_plan,
    outcomes,
    states,
    volume_unusable,
)
from tests.helpers import as_nobody, tmpfs, world_readable_tmpdir, write


def test_a_per_filesystem_quarantine_takes_items_by_rename(xworld: dict[str, Path]) -> None:
    root, mnt = xworld["root"], xworld["mnt"]
    before = contents(mnt / "cache")
    inode = os.stat(mnt / "cache").st_ino
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log", "local.log")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "done" and result.skipped == []
    quarantine = mnt / QUARANTINE_NAME
    st = os.lstat(quarantine)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.geteuid() and st.st_dev == os.stat(mnt).st_dev
    # one batch per quarantine directory: the store's and the one on the tmpfs
    assert len(result.batches) == 2 and result.batch_id == result.batches[0]["batch_id"]
    (volume,) = [
        Path(b["batch_path"]) for b in result.batches if b["batch_path"].startswith(str(quarantine))
    ]
    moved = in_batch(volume, mnt / "cache")
    assert os.stat(moved).st_ino == inode  # a rename, not a copy
    assert contents(moved) == before and not (mnt / "cache").exists()
    assert states(volume) == {
        os.fsencode(mnt / "cache"): "moved",
        os.fsencode(mnt / "old.log"): "moved",
    }
    receipt = json.loads(Path(str(result.receipt_path)).read_text())
    assert receipt["batch_id"] == result.batch_id
    assert sorted(b["batch_id"] for b in receipt["batches"]) == sorted(
        b["batch_id"] for b in result.batches
    )
    methods = {Path(i["path"]).name: (i["method"], i["batch_id"]) for i in receipt["items"]}
    assert methods["cache"] == ("rename", volume.name)
    # the store knows the quarantine: list, restore
    assert known_quarantines(store) == [store.quarantine, quarantine]
    assert volume.name in {b.batch_id for b in list_store_batches(store)}
    back = restore_batch(store, volume.name, execute=True)
    assert back.status == "done" and sorted(back.restored) == sorted(
        [str(mnt / "cache"), str(mnt / "old.log")]
    )
    assert os.stat(mnt / "cache").st_ino == inode and contents(mnt / "cache") == before
    assert not (root / "local.log").exists()  # that one stays in the store's batch


def test_verify_finds_items_in_a_single_volume_batch(xworld: dict[str, Path]) -> None:
    plan = make_plan(xworld, "mnt/old.log")
    result = execute_plan(plan.plan_path, store=Store(xworld["store"]), confirm=confirm_for(plan))
    assert result.status == "done" and len(result.batches) == 1
    assert verify_receipt(str(result.receipt_path)).status == "verified"


def test_the_dry_run_names_each_items_quarantine_and_makes_none(xworld: dict[str, Path]) -> None:
    root, mnt = xworld["root"], xworld["mnt"]
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log", "local.log")
    store = Store(xworld["store"])
    dry = execute_plan(plan.plan_path, store=store)
    where = {m.path: (m.dest.quarantine, m.dest.method) for m in dry.moved}
    assert where == {
        str(root / "local.log"): (str(store.quarantine), "rename"),
        str(mnt / "cache"): (str(mnt / QUARANTINE_NAME), "rename"),
        str(mnt / "old.log"): (str(mnt / QUARANTINE_NAME), "rename"),
    }
    assert not (mnt / QUARANTINE_NAME).exists()
    done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert outcomes(done) == outcomes(dry)
    assert (mnt / QUARANTINE_NAME).is_dir()


@pytest.mark.parametrize("allow_copy", [False, True])
def test_on_a_read_only_filesystem_the_dry_run_predicts_what_execute_does(
    xworld: dict[str, Path], allow_copy: bool
) -> None:
    import subprocess

    mnt = xworld["mnt"]
    plan = make_plan(xworld, "mnt/cache", "local.log")
    store = Store(xworld["store"])
    remount = subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True)
    if remount.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {remount.stderr!r}")
    try:
        dry = execute_plan(plan.plan_path, store=store, allow_copy=allow_copy)
        done = execute_plan(
            plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=allow_copy
        )
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
    # nothing can leave a read-only filesystem, with or without --allow-copy (a copy could
    # never remove its original): both say so, and no copy is made
    assert (
        outcomes(dry)
        == outcomes(done)
        == {
            str(xworld["root"] / "local.log"): "moved",
            str(mnt / "cache"): "read-only-filesystem",
        }
    )
    (skip,) = done.skipped
    assert "read-only" in skip.message and "--allow-copy" not in skip.message
    assert (mnt / "cache" / "a.bin").exists()
    (batch,) = [Path(b["batch_path"]) for b in done.batches]
    assert batch.parent == store.quarantine and list(batch.rglob("*.bin")) == []


def test_a_read_only_bind_mount_inside_the_root_is_read_only_in_dry_run_and_execution(
    tmp_path: Path,
) -> None:
    import subprocess

    world = {"root": tmp_path / "r", "store": tmp_path / "store"}
    sub = world["root"] / "sub"
    write(sub / "f", data=b"kept")
    write(world["root"] / "g", data=b"goes")
    plan = make_plan(world, "sub/f", "g")
    store = Store(world["store"])
    mounted = subprocess.run(["mount", "--bind", str(sub), str(sub)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr!r}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(sub)], check=True)
        assert os.stat(sub).st_dev == os.stat(world["root"]).st_dev  # same filesystem
        dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
        done = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    finally:
        subprocess.run(["umount", str(sub)], check=True)
    expected = {str(sub / "f"): "read-only-filesystem", str(world["root"] / "g"): "moved"}
    assert outcomes(dry) == outcomes(done) == expected
    assert (sub / "f").read_bytes() == b"kept"


@pytest.mark.parametrize(
    ("quarantine_mode", "top_mode", "expected"),
    [
        (0o700, 0o755, "usable"),  # exists, ours, writable
        (0o500, 0o755, "EACCES"),  # exists, ours, but no batch can be made in it
        (None, 0o777 | 0o1000, "usable"),  # missing; a sticky top anyone may write: creatable
        (None, 0o755, "EACCES"),  # missing; a top we may not write
    ],
)
def test_the_dry_runs_volume_quarantine_prediction_applies_permissions(
    quarantine_mode: int | None, top_mode: int, expected: str
) -> None:
    from hygiene_nb.executor.volume import predict_volume_quarantine

    with world_readable_tmpdir() as base:
        mnt = base / "mnt"
        mnt.mkdir()
        with tmpfs(mnt, f"size=1m,mode={top_mode:o}"):
            (mnt / "data").mkdir()
            os.chown(mnt / "data", 65534, 65534)
            if quarantine_mode is not None:
                (mnt / QUARANTINE_NAME).mkdir()
                os.chown(mnt / QUARANTINE_NAME, 65534, 65534)
                (mnt / QUARANTINE_NAME).chmod(quarantine_mode)
            before = sorted(p.name for p in mnt.iterdir())

            def predict() -> str:
                fd = os.open(mnt / "data", DIR_FLAGS)
                try:
                    predict_volume_quarantine(fd, os.fsencode(mnt / "data"))
                    return "usable"
                except OSError as exc:
                    return errno.errorcode[exc.errno or 0]
                finally:
                    os.close(fd)

            assert as_nobody(predict) == expected
            assert sorted(p.name for p in mnt.iterdir()) == before  # it creates nothing


@pytest.mark.parametrize(
    "kind", ["symlink", "world-writable", "group-readable", "a-file", "a-fleet-dataset"]
)
def test_an_untrusted_volume_quarantine_moves_nothing(xworld: dict[str, Path], kind: str) -> None:
    mnt = xworld["mnt"]
    quarantine = mnt / QUARANTINE_NAME
    elsewhere = xworld["tmp"] / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if kind == "symlink":
        quarantine.symlink_to(elsewhere)
    elif kind == "a-file":
        write(quarantine, 1)
    elif kind == "a-fleet-dataset":  # private and ours, but published evidence
        quarantine.mkdir(mode=0o700)
        write(quarantine / FLEET_MARKER, data=b'{"fleet_format": 1}\n')
    else:
        quarantine.mkdir()
        quarantine.chmod(0o777 if kind == "world-writable" else 0o750)
    before = contents(mnt / "cache")
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log")
    store = Store(xworld["store"])
    dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
    assert {s.code for s in dry.skipped} == {"quarantine-untrusted"} and dry.moved == []
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert result.status == "partial" and result.moved == []
    assert {s.code for s in result.skipped} == {"quarantine-untrusted"}
    assert contents(mnt / "cache") == before and (mnt / "old.log").exists()
    assert list(elsewhere.iterdir()) == []
    if kind == "a-fleet-dataset":
        assert [p.name for p in quarantine.iterdir()] == [FLEET_MARKER]
        assert "fleet dataset" in result.skipped[0].message
    elif kind not in ("symlink", "a-file"):
        assert list(quarantine.iterdir()) == []
    assert result.batches == [] and list(store.quarantine.iterdir()) == []


def test_without_allow_copy_an_unusable_volume_quarantine_skips_cross_device(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/cache", "local.log")
    store = Store(xworld["store"])
    dry = execute_plan(plan.plan_path, store=store)
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert outcomes(dry) == outcomes(result)
    assert result.status == "partial"
    (skip,) = result.skipped
    assert skip.code == "cross-device" and "--allow-copy" in skip.message
    assert (xworld["mnt"] / "cache" / "a.bin").exists()
    assert [Path(m.path).name for m in result.moved] == ["local.log"]


def test_allow_copy_copies_verifies_and_only_then_removes(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    before = contents(mnt / "cache")
    a_mtime = os.stat(mnt / "cache" / "a.bin").st_mtime_ns
    inode = os.stat(mnt / "cache").st_ino
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log")
    store = Store(xworld["store"])
    seen: list[str] = []
    real = remove_original_after_verified_copy

    def checked(dir_fd: int, name: bytes, verified: dict[bytes, Any]) -> int:
        # at the moment of removal, the copy is whole and the manifest records it as moved
        (batch,) = list(store.quarantine.iterdir())
        original = mnt / os.fsdecode(name)
        copy = in_batch(batch, original)
        assert contents(copy) == contents(original)
        assert states(batch)[os.fsencode(original)] == "moved"
        seen.append(os.fsdecode(name))
        return real(dir_fd, name, verified)

    monkeypatch.setattr("hygiene_nb.executor.moves.remove_original_after_verified_copy", checked)
    dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
    assert {(m.dest.quarantine, m.dest.method) for m in dry.moved} == {
        (str(store.quarantine), "copy")
    }
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert result.status == "done" and result.skipped == []
    assert sorted(seen) == ["cache", "old.log"]
    assert not (mnt / "cache").exists() and not (mnt / "old.log").exists()
    (batch,) = list(store.quarantine.iterdir())
    copy = in_batch(batch, mnt / "cache")
    assert contents(copy) == before  # byte for byte, same modes
    assert os.stat(copy / "a.bin").st_mtime_ns == a_mtime
    assert os.stat(copy).st_ino != inode and os.stat(copy).st_dev != os.stat(mnt).st_dev
    assert set(states(batch).values()) == {"moved"}
    receipt = json.loads(Path(str(result.receipt_path)).read_text())
    assert {i["method"] for i in receipt["items"]} == {"copy"}
    assert not (mnt / QUARANTINE_NAME).exists()


def test_a_copied_item_is_restored_across_filesystems_byte_for_byte(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    os.chown(mnt / "old.log", 4321, 4322)  # someone else's file: root copies keep its owner
    os.chown(mnt / "cache" / "sub", 4321, 4322)
    (mnt / "cache" / "sub").chmod(0o2775)  # setgid: a copy drops it, a restore gives it back
    (mnt / "cache" / "emptydir").chmod(0o555)  # read-only: a copy must add u+w to fill it
    before = contents(mnt / "cache")
    a_mtime = os.stat(mnt / "cache" / "a.bin").st_mtime_ns
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert result.status == "done" and result.batch_id and not (mnt / "cache").exists()
    in_store = in_batch(store.quarantine / result.batch_id, mnt / "old.log")
    assert (os.stat(in_store).st_uid, os.stat(in_store).st_gid) == (4321, 4322)

    back = restore_batch(store, result.batch_id, execute=True)

    assert back.status == "done" and back.blocked == []
    assert sorted(back.restored) == sorted([str(mnt / "cache"), str(mnt / "old.log")])
    assert contents(mnt / "cache") == before
    assert os.stat(mnt / "cache" / "a.bin").st_mtime_ns == a_mtime
    assert os.stat(mnt / "cache").st_dev == os.stat(mnt).st_dev
    for owned in (mnt / "old.log", mnt / "cache" / "sub"):
        assert (os.stat(owned).st_uid, os.stat(owned).st_gid) == (4321, 4322)
    assert stat.S_IMODE(os.stat(mnt / "cache" / "sub").st_mode) == 0o2775
    assert stat.S_IMODE(os.stat(mnt / "cache" / "emptydir").st_mode) == 0o555
    assert [p.name for p in mnt.iterdir() if p.name.startswith(".hygiene-nb-")] == []
    assert list(store.quarantine.iterdir()) == []  # every copy went back, the batch is gone
    check = verify_receipt(str(result.receipt_path))  # as after any restore: they are back
    assert sorted(check.reappeared) == sorted(back.restored)


def test_the_restore_dry_run_names_a_leftover_of_an_interrupted_copy_back(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.executor import crossdev

    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/cache")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert result.status == "done" and result.batch_id
    real, calls = crossdev._copy_file, []

    def dies_on_second(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise Crash
        real(*args)

    monkeypatch.setattr(crossdev, "_copy_file", dies_on_second)
    with pytest.raises(Crash):
        restore_batch(store, result.batch_id, execute=True)
    monkeypatch.undo()
    (leftover,) = [p for p in mnt.iterdir() if p.name.startswith(".hygiene-nb-restoring-")]

    dry = restore_batch(store, result.batch_id)

    assert [b.code for b in dry.blocked] == ["restore-leftover"]
    assert str(leftover) in dry.blocked[0].message and not (mnt / "cache").exists()


@pytest.mark.parametrize("trouble", ["hard-link-inside", "hard-link-outside", "symlink"])
def test_a_tree_a_copy_cannot_verify_is_kept(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch, trouble: str
) -> None:
    mnt = xworld["mnt"]
    cache = mnt / "cache"
    if trouble == "hard-link-inside":
        os.link(cache / "a.bin", cache / "sub" / "a-again")
    elif trouble == "hard-link-outside":
        os.link(cache / "a.bin", mnt / "a-outside")
    else:
        (cache / "sub" / "link").symlink_to(xworld["tmp"] / "canary")
        write(xworld["tmp"] / "canary", data=b"canary")
    volume_unusable(monkeypatch)
    before = contents(cache)
    plan = make_plan(xworld, "mnt/cache")
    assert plan.candidates == 1
    store = Store(xworld["store"])
    dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert outcomes(dry) == outcomes(result)
    assert [s.code for s in result.skipped] == ["copy-unverifiable"]
    assert contents(cache) == before
    assert result.batches == [] and list(store.quarantine.iterdir()) == []


class Crash(BaseException):
    """Stands for the process dying in the middle of a copy."""


def test_a_crash_mid_copy_leaves_the_original_and_a_pending_partial_copy(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.executor import crossdev

    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    before = contents(mnt / "cache")
    plan = make_plan(xworld, "mnt/cache")
    store = Store(xworld["store"])
    real = crossdev._copy_file
    calls: list[bytes] = []

    def dies_on_second(src_dir: int, name: bytes, dst_dir: int, *rest: Any) -> None:
        calls.append(name)
        if len(calls) == 2:
            raise Crash
        real(src_dir, name, dst_dir, *rest)

    monkeypatch.setattr(crossdev, "_copy_file", dies_on_second)
    with pytest.raises(Crash):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert contents(mnt / "cache") == before  # the original is whole
    (batch,) = list(store.quarantine.iterdir())
    assert states(batch) == {os.fsencode(mnt / "cache"): "pending"}
    assert in_batch(batch, mnt / "cache").is_dir()  # the partial copy, recorded
    (info,) = list_store_batches(store)
    assert info.manifest == "ok" and info.items == 0


def test_the_original_is_not_removed_if_it_changed_after_verification(tmp_path: Path) -> None:
    item = tmp_path / "item"
    write(item / "f", data=b"one")
    st_dir, st_f = os.stat(item), os.stat(item / "f")
    verified = {
        b"": (st_dir.st_dev, st_dir.st_ino, -1, -1, st_dir.st_ctime_ns, ""),
        b"f": (st_f.st_dev, st_f.st_ino, st_f.st_size, st_f.st_mtime_ns, st_f.st_ctime_ns, ""),
    }
    write(item / "new", data=b"arrived later")
    fd = os.open(tmp_path, DIR_FLAGS)
    try:
        with pytest.raises(OSError) as info:
            remove_original_after_verified_copy(fd, b"item", verified)
        assert info.value.errno == errno.ESTALE
        assert (item / "f").read_bytes() == b"one"  # nothing was removed
        (item / "new").unlink()
        assert remove_original_after_verified_copy(fd, b"item", verified) == 2
    finally:
        os.close(fd)
    assert not item.exists()


def test_an_unreadable_quarantine_registry_fails_closed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store").ensure()
    assert known_quarantines(store) == [store.quarantine]
    (store.root / "quarantines.json").write_text("{not json")
    # listed as one invalid entry (the store's own batches stay listed), never as "empty";
    # a batch that is nowhere it could look is not "not found" but the registry's fault
    (entry,) = list_store_batches(store)
    assert entry.manifest == "invalid" and entry.path == str(store.root / "quarantines.json")
    with pytest.raises(StoreError):
        restore_batch(store, "batch-20250101T000000Z-00000000")


def test_purge_finds_a_volume_batch(xworld: dict[str, Path]) -> None:
    from hygiene_nb.executor import purge_batch

    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    batch = str(result.batch_id)
    assert Path(result.batches[0]["batch_path"]).parent == xworld["mnt"] / QUARANTINE_NAME
    shown = purge_batch(store, batch)
    assert shown.would_destroy == {"items": 1, "files": 1, "bytes": 130}
    purge_batch(
        store, batch, execute=True, confirm_batch_id=batch, acknowledge_risk="permanent-delete"
    )
    assert list((xworld["mnt"] / QUARANTINE_NAME).iterdir()) == []

"""Restore, purge and verify at the filesystem's edges, acted out on real mounts, users, writers.

A filesystem mounted over the original place, a parent directory someone else re-created, a
file still written after it was quarantined, a remount that gives the filesystem a new device
number, a root reached through a symlinked ancestor and a corrupt quarantine registry. Tests
that need root (mounts, a second user, loop devices) skip with the reason where that is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hygiene_nb.cli import cli, main
from hygiene_nb.errors import BatchChanged
from hygiene_nb.executor import (
    execute_plan,
    list_store_batches,
    purge_batch,
    restore_batch,
    verify_receipt,
)
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.filesystems import same_filesystem
from hygiene_nb.store import Store
from tests.executor.helpers import codes, confirm_for, in_store_batch, make_plan, quarantine_items
from tests.executor.helpers import manifest_of as manifest
from tests.helpers import tmpfs, write


def quarantine(world: dict[str, Path], *rels: str) -> tuple[Store, str, Path]:
    """Plan ``rels`` for deletion and execute the plan: (store, batch id, receipt path)."""
    plan = make_plan(world, *rels)
    store = Store(world["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "done", result.skipped
    return store, str(result.batch_id), Path(str(result.receipt_path))


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("this case needs root (a mount, a second user or a loop device)")


# -- item 3: a filesystem mounted over the original place ------------------------------------


def test_the_manifest_records_each_items_filesystem_owner_and_parents(
    world: dict[str, Path],
) -> None:
    store, bid, _ = quarantine(world, "data/scratch.bin")
    doc = manifest(store.quarantine / bid)
    assert str(doc["schema"]).endswith("@2")
    (item,) = doc["items"]
    assert item["fs"]["fstype"] and item["ctime_ns"] > 0
    assert item["uid"] == os.geteuid()
    st = os.stat(world["root"] / "data")
    assert item["parents"][-1] == [st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)]
    assert len(item["parents"]) == 2  # the root, then data/


def test_restore_onto_a_filesystem_mounted_over_the_original_parent_is_blocked(
    world: dict[str, Path],
) -> None:
    store, bid, _ = quarantine(world, "data/scratch.bin")
    original = world["root"] / "data" / "scratch.bin"
    inside = Path(os.fsdecode(in_store_batch(store, bid, original)))
    held = inside.read_bytes()
    with tmpfs(world["root"] / "data", "size=1m,mode=1777"):
        dry = restore_batch(store, bid)
        assert dry.restored == [] and codes(dry) == ["target-other-filesystem"]
        assert "tmpfs" in dry.blocked[0].message or "filesystem" in dry.blocked[0].message
        done = restore_batch(store, bid, execute=True)
        assert done.status == "partial" and codes(done) == ["target-other-filesystem"]
        assert os.listdir(world["root"] / "data") == []  # nothing written on the tmpfs
        assert inside.read_bytes() == held
    # the mount gone, the item comes back by rename
    assert restore_batch(store, bid, execute=True).restored == [str(original)]
    assert original.read_bytes() == held


def test_when_the_filesystem_cannot_be_told_restore_refuses(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, bid, _ = quarantine(world, "data/scratch.bin")

    def unknown(_fd: int) -> None:
        return None

    monkeypatch.setattr("hygiene_nb.executor.restore_target.fs_identity", unknown)
    result = restore_batch(store, bid, execute=True)
    assert codes(result) == ["target-filesystem-unknown"]
    assert not (world["root"] / "data" / "scratch.bin").exists()


# -- item 4: a parent someone else now owns --------------------------------------------------


@pytest.fixture
def deep_world(world: dict[str, Path]) -> dict[str, Path]:
    write(world["root"] / "a" / "b" / "file", data=b"thesis draft")
    return world


def test_a_parent_recreated_by_another_user_is_not_restored_into(
    deep_world: dict[str, Path], other_user: tuple[int, int]
) -> None:
    store, bid, _ = quarantine(deep_world, "a/b/file")
    b = deep_world["root"] / "a" / "b"
    b.rmdir()
    b.mkdir(mode=0o755)
    os.chown(b, *other_user)

    assert codes(restore_batch(store, bid)) == ["target-unsafe-parent"]
    result = restore_batch(store, bid, execute=True)
    assert codes(result) == ["target-unsafe-parent"] and os.listdir(b) == []
    assert str(b) in result.blocked[0].message


def test_a_world_writable_parent_without_the_sticky_bit_is_not_restored_into(
    deep_world: dict[str, Path],
) -> None:
    store, bid, _ = quarantine(deep_world, "a/b/file")
    b = deep_world["root"] / "a" / "b"
    os.chmod(b, 0o777)
    result = restore_batch(store, bid, execute=True)
    assert codes(result) == ["target-unsafe-parent"] and os.listdir(b) == []
    os.chmod(b, 0o1777)  # sticky: others cannot remove what is not theirs
    assert restore_batch(store, bid, execute=True).restored == [str(b / "file")]


def test_a_shared_parent_with_its_recorded_owner_and_mode_stays_usable(
    deep_world: dict[str, Path], other_user: tuple[int, int]
) -> None:
    b = deep_world["root"] / "a" / "b"
    os.chown(b, *other_user)  # like /srv/lab: another user's group directory
    os.chmod(b, 0o2775)
    store, bid, _ = quarantine(deep_world, "a/b/file")
    assert restore_batch(store, bid, execute=True).restored == [str(b / "file")]


def test_a_recreated_parent_gets_the_recorded_owner_and_mode(
    deep_world: dict[str, Path], other_user: tuple[int, int]
) -> None:
    a, b = deep_world["root"] / "a", deep_world["root"] / "a" / "b"
    os.chown(b, *other_user)
    os.chmod(b, 0o750)
    os.chmod(a, 0o711)
    store, bid, _ = quarantine(deep_world, "a/b/file")
    shutil.rmtree(a)

    result = restore_batch(store, bid, execute=True)

    assert result.restored == [str(b / "file")] and (b / "file").read_bytes() == b"thesis draft"
    sa, sb = os.stat(a), os.stat(b)
    assert (sa.st_uid, sa.st_gid, stat.S_IMODE(sa.st_mode)) == (0, 0, 0o711)
    assert (sb.st_uid, sb.st_gid, stat.S_IMODE(sb.st_mode)) == (*other_user, 0o750)


# -- item 11: a file still written after it was quarantined ----------------------------------

_WRITER = """
import sys
f = open(sys.argv[1], "ab", buffering=0)
f.write(b"first line\\n")
print("ready", flush=True)
sys.stdin.readline()
f.write(b"written after the quarantine\\n")
print("wrote", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def writer(world: dict[str, Path]) -> Iterator[subprocess.Popen[str]]:
    """A process that keeps ``data/live.log`` open and writes on each line it is sent."""
    path = world["root"] / "data" / "live.log"
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            yield proc
        finally:
            proc.kill()
            proc.wait(timeout=10)


def _write_late(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "wrote\n"


def test_a_file_written_after_quarantine_is_restored_and_reported(
    world: dict[str, Path], writer: subprocess.Popen[str]
) -> None:
    store, bid, receipt = quarantine(world, "data/live.log")
    _write_late(writer)

    checked = verify_receipt(receipt)
    assert checked.status != "verified"
    assert checked.changed_in_quarantine == [str(world["root"] / "data" / "live.log")]
    dry = restore_batch(store, bid)
    assert codes(dry) == ["changed-in-quarantine"]
    assert dry.restored == [str(world["root"] / "data" / "live.log")]
    result = restore_batch(store, bid, execute=True)

    assert codes(result) == ["changed-in-quarantine"] and result.status == "done"
    assert (world["root"] / "data" / "live.log").read_bytes() == (
        b"first line\nwritten after the quarantine\n"
    )
    assert not (store.quarantine / bid).exists()


def test_a_changed_item_is_never_restored_over_anything(
    world: dict[str, Path], writer: subprocess.Popen[str]
) -> None:
    store, bid, _ = quarantine(world, "data/live.log")
    _write_late(writer)
    (world["root"] / "data" / "live.log").write_bytes(b"a new file")
    assert codes(restore_batch(store, bid, execute=True)) == ["target-occupied"]
    assert (world["root"] / "data" / "live.log").read_bytes() == b"a new file"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    """The exit code of ``hygiene-nb ARGS`` (output left in ``capsys``)."""
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code or 0)


def test_purging_a_batch_whose_items_changed_needs_include_changed(
    world: dict[str, Path], writer: subprocess.Popen[str], capsys: pytest.CaptureFixture[str]
) -> None:
    store, bid, _ = quarantine(world, "data/live.log")
    _write_late(writer)
    inside = Path(os.fsdecode(in_store_batch(store, bid, world["root"] / "data" / "live.log")))

    shown = purge_batch(store, bid)
    assert shown.changed == [str(world["root"] / "data" / "live.log")]
    with pytest.raises(BatchChanged) as info:
        purge_batch(
            store, bid, execute=True, confirm_batch_id=bid, acknowledge_risk="permanent-delete"
        )
    assert info.value.code == "batch-changed" and inside.exists()
    args = [
        "purge",
        bid,
        "--store",
        str(world["store"]),
        "--execute",
        "--confirm-batch-id",
        bid,
        "--acknowledge-risk",
        "permanent-delete",
    ]
    assert run_cli(args, capsys) == 3
    said = capsys.readouterr()
    assert "--include-changed" in said.err + said.out
    assert inside.exists()
    assert run_cli([*args, "--include-changed"], capsys) == 0
    assert not (store.quarantine / bid).exists()


def test_a_changed_directory_item_counts_as_changed(world: dict[str, Path]) -> None:
    store, bid, _ = quarantine(world, "web/node_modules")
    inside = Path(os.fsdecode(in_store_batch(store, bid, world["root"] / "web" / "node_modules")))
    with (inside / "pkg" / "index.js").open("ab") as handle:  # a writer deep inside
        handle.write(b"late")
    assert purge_batch(store, bid).changed == [str(world["root"] / "web" / "node_modules")]


# -- item 12: a remount with a new device number ---------------------------------------------


@pytest.fixture
def loop_image(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """An ext4 image on a loop device, mounted at ``tmp_path/vol``; remount with ``remount``."""
    needs_root()
    if shutil.which("mkfs.ext4") is None or shutil.which("losetup") is None:
        pytest.skip("mkfs.ext4 or losetup is not available")
    image, mnt = tmp_path / "vol.img", tmp_path / "vol"
    mnt.mkdir()
    with image.open("wb") as handle:
        handle.truncate(16 * 1024 * 1024)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    devices: list[str] = []
    mounted: list[bool] = [False]

    def attach_and_mount() -> None:
        loop = subprocess.run(
            ["losetup", "-f", "--show", str(image)], capture_output=True, text=True
        )
        if loop.returncode != 0:
            pytest.skip(f"no loop device: {loop.stderr.strip()}")
        devices.append(loop.stdout.strip())
        done = subprocess.run(["mount", devices[-1], str(mnt)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a loop device here: {done.stderr.strip()}")
        mounted[0] = True

    def unmount() -> None:
        if mounted[0]:
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
            mounted[0] = False

    def remount() -> None:
        """Unmount, then mount the same image from another loop device (a new st_dev)."""
        unmount()
        old = devices[-1]
        attach_and_mount()  # the old device is still attached, so this is another one
        subprocess.run(["losetup", "-d", old], capture_output=True)

    attach_and_mount()
    try:
        yield {"mnt": mnt, "remount": remount}  # type: ignore[dict-item]
    finally:
        unmount()
        for device in devices:
            subprocess.run(["losetup", "-d", device], capture_output=True)


def test_a_remount_with_a_new_device_number_keeps_batches_restorable(
    tmp_path: Path, loop_image: dict[str, Path]
) -> None:
    root = loop_image["mnt"] / "r"
    write(root / "data" / "scratch.bin", data=b"on the volume")
    write(root / "data" / "swapped.bin", data=b"to be swapped")
    world = {"root": root, "store": tmp_path / "store"}
    store, bid, _ = quarantine(world, "data/scratch.bin", "data/swapped.bin")
    batch = loop_image["mnt"] / QUARANTINE_NAME / bid
    assert batch.is_dir()
    before = os.stat(root).st_dev
    loop_image["remount"]()  # type: ignore[operator]
    if os.stat(root).st_dev == before:
        pytest.skip("the remount kept the device number; nothing to test here")
    swapped = batch / "tree" / str(root / "data" / "swapped.bin").lstrip("/")
    os.rename(swapped, loop_image["mnt"] / "kept")  # kept: its inode number is not reused
    swapped.write_bytes(b"to be swapped")  # another inode: really not what was moved

    result = restore_batch(store, bid, execute=True)

    assert result.restored == [str(root / "data" / "scratch.bin")]
    assert (root / "data" / "scratch.bin").read_bytes() == b"on the volume"
    assert codes(result) == ["batch-item-changed"]
    assert str(batch) in result.blocked[0].message
    assert "device" not in result.blocked[0].message


# -- item 13: a root reached through a symlinked ancestor ------------------------------------


def test_an_item_back_under_a_symlinked_ancestor_is_already_and_the_batch_closes(
    qstore: Store, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    (real / "root").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    item = tmp_path / "link" / "root" / "f"
    item.write_bytes(b"x")
    bid = quarantine_items(qstore, [item])
    os.rename(in_store_batch(qstore, bid, item), item)  # a crash between the rename and the record

    assert codes(restore_batch(qstore, bid)) == ["already"]
    result = restore_batch(qstore, bid, execute=True)
    assert result.status == "done" and codes(result) == ["already"]
    assert not (qstore.quarantine / bid).exists()


# -- item 15: a corrupt quarantine registry --------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "one-bad-record"])
def test_a_corrupt_registry_hides_none_of_the_stores_own_batches(
    qstore: Store, root: Path, damage: str
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    registry = qstore.root / "quarantines.json"
    if damage == "garbage":
        registry.write_text("{not json")
    else:
        good = root.parent / "elsewhere" / QUARANTINE_NAME
        good.mkdir(parents=True, mode=0o700)
        doc = {
            "schema": "hygiene-nb/quarantines@1",
            "quarantines": [
                {"path": "x", "path_b64": "!!not base64"},
                {
                    "path": str(good),
                    "path_b64": __import__("base64").b64encode(os.fsencode(good)).decode(),
                },
            ],
        }
        registry.write_text(json.dumps(doc))

    found = list_store_batches(qstore)
    assert [b.batch_id for b in found if b.manifest == "ok"] == [bid]
    (bad,) = [b for b in found if b.manifest == "invalid"]
    assert str(registry) in bad.path and bad.problems
    listed = CliRunner().invoke(cli, ["quarantine", "list", "--store", str(qstore.root), "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)["batches"]
    assert {r["manifest"] for r in rows} == {"ok", "invalid"}
    assert next(r["problems"] for r in rows if r["manifest"] == "invalid")
    shown = CliRunner().invoke(cli, ["quarantine", "list", "--store", str(qstore.root)])
    assert "quarantine registry" in shown.output and bid in shown.output
    assert restore_batch(qstore, bid, execute=True).restored == [str(root / "f")]


def _edit_manifest(batch: Path, edit: Any) -> None:
    path = batch / "manifest.json"
    doc = json.loads(path.read_bytes())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_a_device_number_changed_by_a_remount_is_told_by_the_filesystem_identity(
    world: dict[str, Path],
) -> None:
    """Without a loop device: the manifest says the batch was on device N+1 (as if remounted)."""
    store, bid, _ = quarantine(world, "data/scratch.bin")

    def remounted(doc: dict[str, Any]) -> None:
        doc["root"]["dev"] += 1
        for item in doc["items"]:
            item["dev"] += 1

    _edit_manifest(store.quarantine / bid, remounted)
    assert restore_batch(store, bid, execute=True).restored == [
        str(world["root"] / "data" / "scratch.bin")
    ]


def test_a_version_1_manifest_is_still_read_and_restored(qstore: Store, root: Path) -> None:
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"old batch")
    bid = quarantine_items(qstore, [root / "d" / "f"])

    def version_1(doc: dict[str, Any]) -> None:
        doc["schema"] = "hygiene-nb/quarantine-manifest@1"
        doc.pop("fs", None)
        doc["root"].pop("fs", None)
        for item in doc["items"]:
            for key in ("uid", "fs", "parents", "ctime_ns"):
                item.pop(key, None)

    _edit_manifest(qstore.quarantine / bid, version_1)
    (root / "d").rmdir()
    result = restore_batch(qstore, bid, execute=True)
    assert result.status == "done" and (root / "d" / "f").read_bytes() == b"old batch"
    assert stat.S_IMODE(os.stat(root / "d").st_mode) == 0o700  # nothing recorded: ours, 0700


def test_same_filesystem_answers_true_false_or_cannot_tell() -> None:
    mount = {"fstype": "ext4", "source": "/dev/loop3", "root": "/", "mount_point": "/mnt/v"}
    then = {"dev": 1793, "fsid": "ab12", **mount}
    assert same_filesystem(then, {**then, "dev": 1794, "source": "/dev/loop4"}) is True
    assert same_filesystem(then, {**then, "fsid": "cd34", "mount_point": "/mnt/v/d"}) is False
    assert same_filesystem(then, {**then, "dev": 1794, "fsid": "cd34"}) is None  # dev-derived
    assert same_filesystem(then, None) is None and same_filesystem(None, then) is None
    tmp = {"fstype": "tmpfs", "source": "tmpfs", "root": "/", "mount_point": "/mnt/t"}
    assert same_filesystem({"dev": 50, **tmp}, {"dev": 50, **tmp}) is True
    assert same_filesystem({"dev": 50, **tmp}, {"dev": 51, **tmp}) is None  # cannot tell
    assert same_filesystem({"dev": 50, **tmp}, {"dev": 51, **tmp, "fstype": "ext4"}) is False
    nfs = {"fstype": "nfs4", "source": "server:/export", "root": "/", "mount_point": "/n"}
    assert same_filesystem({"dev": 60, **nfs}, {"dev": 61, **nfs}) is True


def test_a_file_still_open_for_writing_in_the_batch_is_not_purged_unasked(
    world: dict[str, Path], writer: subprocess.Popen[str]
) -> None:
    """Not yet written to, but open: a purge now would send its next writes nowhere."""
    store, bid, _ = quarantine(world, "data/live.log")
    inside = Path(os.fsdecode(in_store_batch(store, bid, world["root"] / "data" / "live.log")))
    before = inside.read_bytes()
    assert purge_batch(store, bid).changed == [str(world["root"] / "data" / "live.log")]
    with pytest.raises(BatchChanged):
        purge_batch(
            store, bid, execute=True, confirm_batch_id=bid, acknowledge_risk="permanent-delete"
        )
    assert inside.read_bytes() == before
    writer.kill()
    writer.wait(timeout=10)
    assert purge_batch(store, bid).changed == []  # closed: nothing will write to it any more
    purge_batch(store, bid, execute=True, confirm_batch_id=bid, acknowledge_risk="permanent-delete")
    assert not (store.quarantine / bid).exists()

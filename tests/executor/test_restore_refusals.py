"""Every way restore refuses a batch or an item, and what it leaves: nothing lost, nothing replaced.

A batch that cannot be found or opened safely (a symlinked or shared quarantine, one writable by
others, a manifest that does not say where its items belong); an item whose way back cannot be
trusted (a link inside the batch, a root that is not the plan's, a path that is not clean, a name
the filesystem cannot look up, a directory its owner may not search, a rename that fails); an
item gone from the batch; copy-backs that cannot be verified or that find something only looking
like their own copy; and a batch left in place because it holds what nobody recorded. Each case
checks the code and message restore gives, the bytes on disk and the manifest's states.
"""

from __future__ import annotations

import base64
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import BatchInvalid, BatchNotFound
from hygiene_nb.executor import restore_batch
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.crossdev import copy_verified as real_copy_verified
from hygiene_nb.executor.fileops import open_dir_at as real_open_dir_at
from hygiene_nb.executor.registry import register_quarantine
from hygiene_nb.store import Store
from tests.executor.helpers import (
    codes,
    edit_manifest,
    first_rename_fails,
    in_store_batch,
    quarantine_items,
    snapshot,
    states,
)
from tests.helpers import acting_as, tmpfs


class Crash(BaseException):
    """Stands for the process dying at that instant."""


def held(store: Store, batch_id: str, original: Path) -> Path:
    """Where the batch ``batch_id`` holds ``original``."""
    return Path(os.fsdecode(in_store_batch(store, batch_id, original)))


def one_file(store: Store, root: Path, rel: str = "d/f", data: bytes = b"ours") -> tuple[Path, str]:
    """``root/rel`` written with ``data`` and quarantined: (its original path, the batch id)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path, quarantine_items(store, [path])


# -- the batch: found, opened and read only where it is safe ---------------------------------


def test_a_quarantine_that_is_a_symlink_is_not_opened(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    f, bid = one_file(qstore, root)
    aside = tmp_path / "aside"
    os.rename(qstore.quarantine, aside)
    qstore.quarantine.symlink_to(aside)  # the batch is there, but only through a link

    with pytest.raises(BatchInvalid) as info:
        restore_batch(qstore, bid, execute=True)

    assert "its quarantine cannot be opened" in info.value.message
    assert not f.exists()
    assert (aside / bid / "tree" / str(f).lstrip("/")).read_bytes() == b"ours"
    assert states(aside / bid) == {os.fsencode(f): "moved"}


def _registered_elsewhere(qstore: Store, tmp_path: Path, bid: str, mode: int) -> Path:
    """Move batch ``bid`` into a quarantine registered elsewhere (made with ``mode``)."""
    quarantine = tmp_path / "volume" / QUARANTINE_NAME
    quarantine.mkdir(parents=True)
    os.chmod(quarantine, mode)
    register_quarantine(qstore, quarantine)
    os.rename(qstore.quarantine / bid, quarantine / bid)
    return quarantine


def test_a_registered_quarantine_others_may_read_is_refused(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    f, bid = one_file(qstore, root)
    quarantine = _registered_elsewhere(qstore, tmp_path, bid, 0o755)

    with pytest.raises(BatchInvalid) as info:
        restore_batch(qstore, bid, execute=True)

    assert f"its quarantine {quarantine} is not private to you" in info.value.message
    assert not f.exists() and states(quarantine / bid) == {os.fsencode(f): "moved"}
    os.chmod(quarantine, 0o700)  # private again: the very batch is found and restored
    assert restore_batch(qstore, bid, execute=True).restored == [str(f)]
    assert f.read_bytes() == b"ours"


def test_a_registered_quarantine_that_is_gone_is_passed_over(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    f, bid = one_file(qstore, root)
    gone = tmp_path / "unmounted" / QUARANTINE_NAME
    gone.mkdir(parents=True, mode=0o700)
    register_quarantine(qstore, gone)
    gone.rmdir()  # a volume not mounted now
    quarantine = _registered_elsewhere(qstore, tmp_path, bid, 0o700)

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and result.restored == [str(f)]
    assert f.read_bytes() == b"ours" and not (quarantine / bid).exists()


def test_a_registered_quarantine_reached_through_a_symlink_is_not_searched(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    f, bid = one_file(qstore, root)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    os.rename(qstore.quarantine / bid, real / bid)
    (tmp_path / "volume").mkdir()
    link = tmp_path / "volume" / QUARANTINE_NAME
    link.symlink_to(real)
    register_quarantine(qstore, link)

    with pytest.raises(BatchNotFound):
        restore_batch(qstore, bid, execute=True)

    assert not f.exists() and states(real / bid) == {os.fsencode(f): "moved"}


def test_a_batch_writable_by_others_is_refused(qstore: Store, root: Path) -> None:
    f, bid = one_file(qstore, root)
    os.chmod(qstore.quarantine / bid, 0o777)

    with pytest.raises(BatchInvalid) as info:
        restore_batch(qstore, bid, execute=True)

    assert "is writable by others" in info.value.message
    assert not f.exists() and held(qstore, bid, f).read_bytes() == b"ours"


def test_a_batch_that_goes_between_the_look_and_the_open_is_not_found(
    qstore: Store, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = one_file(qstore, root)
    aside = tmp_path / "purged-meanwhile"

    def moved_away_first(dir_fd: int, name: bytes) -> int:
        os.rename(qstore.quarantine / bid, aside)  # another process takes it, just now
        return real_open_dir_at(dir_fd, name)

    monkeypatch.setattr("hygiene_nb.executor.batch_access.open_dir_at", moved_away_first)
    with pytest.raises(BatchNotFound):
        restore_batch(qstore, bid, execute=True)
    assert not f.exists() and states(aside) == {os.fsencode(f): "moved"}


def _unknown_state(doc: dict[str, Any]) -> None:
    doc["items"][0]["state"] = "somewhere"


def _duplicate_item(doc: dict[str, Any]) -> None:
    doc["items"].append(dict(doc["items"][0]))


def _no_root(doc: dict[str, Any]) -> None:
    del doc["root"]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_unknown_state, "duplicate items or an unknown item state"),
        (_duplicate_item, "duplicate items or an unknown item state"),
        (_no_root, "it does not record the root its items came from"),
    ],
    ids=["unknown-state", "duplicate-item", "no-root"],
)
def test_a_manifest_that_does_not_place_its_items_is_refused(
    qstore: Store, root: Path, tmp_path: Path, damage: Any, why: str
) -> None:
    _, bid = one_file(qstore, root)
    edit_manifest(qstore.quarantine / bid, damage)
    before = snapshot(tmp_path)

    with pytest.raises(BatchInvalid) as info:
        restore_batch(qstore, bid, execute=True)

    assert f"its manifest is invalid ({why})" in info.value.message
    assert snapshot(tmp_path) == before


# -- one item: the way back and the target ----------------------------------------------------


def test_an_item_path_that_is_not_clean_is_not_restored(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    _, bid = one_file(qstore, root)
    unclean = os.fsencode(root) + b"//d/f"  # an empty component: not what quarantine records

    def alter(doc: dict[str, Any]) -> None:
        doc["items"][0]["original_b64"] = base64.b64encode(unclean).decode()
        doc["items"][0]["original"] = os.fsdecode(unclean)

    edit_manifest(qstore.quarantine / bid, alter)
    before = snapshot(tmp_path)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-unusable"] and result.status == "partial"
    assert "is not a clean absolute path" in result.blocked[0].message
    assert snapshot(tmp_path) == before


def test_a_link_inside_the_batch_is_not_followed(qstore: Store, root: Path) -> None:
    f, bid = one_file(qstore, root)
    mirror = held(qstore, bid, f).parent
    aside = mirror.with_name("aside")
    os.rename(mirror, aside)
    mirror.symlink_to(aside)  # the item is reachable, but only through a link

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["batch-item-changed"]
    assert "no longer a plain directory" in result.blocked[0].message
    assert str(qstore.quarantine / bid) in result.blocked[0].message
    assert not f.exists() and (aside / "f").read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


def test_an_item_whose_name_cannot_be_looked_up_blocks_that_item_only(
    qstore: Store, root: Path
) -> None:
    (root / "a").write_bytes(b"a")
    (root / "b").write_bytes(b"b")
    bid = quarantine_items(qstore, [root / "a", root / "b"])
    too_long = os.fsencode(root) + b"/" + b"x" * 300  # longer than any name can be

    def alter(doc: dict[str, Any]) -> None:
        doc["items"][0]["original_b64"] = base64.b64encode(too_long).decode()
        doc["items"][0]["original"] = os.fsdecode(too_long)

    edit_manifest(qstore.quarantine / bid, alter)

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "partial" and result.restored == [str(root / "b")]
    assert codes(result) == ["batch-item-changed"]
    assert result.blocked[0].path == os.fsdecode(too_long)
    assert "cannot be looked up inside the batch (File name too long)" in result.blocked[0].message
    assert result.exit_code == 4
    assert result.to_json()["blocked"] == [
        {
            "path": os.fsdecode(too_long),
            "code": "batch-item-changed",
            "message": result.blocked[0].message,
        }
    ]
    assert (root / "b").read_bytes() == b"b" and not (root / "a").exists()
    assert held(qstore, bid, root / "a").read_bytes() == b"a"
    assert states(qstore.quarantine / bid) == {
        too_long: "moved",
        os.fsencode(root / "b"): "restored",
    }


@pytest.mark.parametrize("how", ["outside", "gone", "replaced"])
def test_a_root_that_is_not_the_plans_is_never_walked(
    qstore: Store, root: Path, tmp_path: Path, how: str
) -> None:
    _, bid = one_file(qstore, root)
    if how == "outside":
        (tmp_path / "other").mkdir()
        edit_manifest(
            qstore.quarantine / bid, lambda doc: doc["root"].update(path=str(tmp_path / "other"))
        )
        said = f"is not inside {tmp_path / 'other'}, the root the plan acted on"
    elif how == "gone":
        shutil.rmtree(root)
        said = f"the plan's root {root} cannot be opened (No such file or directory)"
    else:
        os.rename(root, tmp_path / "old-root")
        root.mkdir()  # the same path, another directory
        said = f"{root} is not the directory the items came from (it was replaced)"
    before = snapshot(tmp_path)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-unusable"] and said in result.blocked[0].message
    assert snapshot(tmp_path) == before  # nothing created, the batch as it was


def test_a_version_1_item_under_a_mount_cannot_be_told_and_stays(qstore: Store, root: Path) -> None:
    f, bid = one_file(qstore, root)

    def version_1(doc: dict[str, Any]) -> None:  # no filesystem recorded for the item
        doc["schema"] = "hygiene-nb/quarantine-manifest@1"
        for item in doc["items"]:
            for key in ("uid", "fs", "parents", "ctime_ns"):
                item.pop(key, None)

    edit_manifest(qstore.quarantine / bid, version_1)
    with tmpfs(root / "d", "size=1m"):
        result = restore_batch(qstore, bid, execute=True)

        assert codes(result) == ["target-filesystem-unknown"]
        assert str(root / "d") in result.blocked[0].message
        assert os.listdir(root / "d") == []  # nothing written on the mount
    assert held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


def test_a_rename_that_fails_leaves_the_item_in_the_batch(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = one_file(qstore, root)
    first_rename_fails(monkeypatch, errno.EIO)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["restore-failed"] and result.status == "partial"
    assert f"{f} could not be moved back (Input/output error)" in result.blocked[0].message
    assert not f.exists() and held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}
    assert restore_batch(qstore, bid, execute=True).restored == [str(f)]  # the next one works
    assert f.read_bytes() == b"ours"


# -- one item gone from the batch ------------------------------------------------------------


@pytest.mark.parametrize("keeps_mtime", [False, True])
def test_a_new_file_given_the_lost_items_inode_number_is_not_taken_for_it(
    qstore: Store, root: Path, tmp_path: Path, keeps_mtime: bool
) -> None:
    """The kernel hands a freed inode number to the next file: the record is edited to what
    such a reuse gives (the item's number on a new file at its path), and restore must still
    say the item is missing, not back."""
    f, bid = one_file(qstore, root)
    os.rename(held(qstore, bid, f), tmp_path / "taken")
    f.write_bytes(b"someone else's")
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    newcomer = os.lstat(f)

    def reuse(doc: dict[str, Any]) -> None:
        (item,) = doc["items"]
        item["inode"] = newcomer.st_ino
        if keeps_mtime:  # even the mtime it left with: the size still tells
            item["mtime_ns"] = newcomer.st_mtime_ns

    edit_manifest(qstore.quarantine / bid, reuse)
    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["missing-from-batch"] and result.status == "partial"
    assert f.read_bytes() == b"someone else's"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


@pytest.mark.parametrize("what", ["mirror-gone", "root-gone", "parent-gone", "another-entry"])
def test_an_item_gone_from_the_batch_and_not_back_is_missing(
    qstore: Store, root: Path, tmp_path: Path, what: str
) -> None:
    f, bid = one_file(qstore, root)
    inside = held(qstore, bid, f)
    if what == "mirror-gone":  # its directory in the batch went with it
        os.rename(inside.parent, tmp_path / "taken")
    else:
        os.rename(inside, tmp_path / "taken")  # kept: its inode number is not reused
    if what == "root-gone":
        shutil.rmtree(root)
    elif what == "parent-gone":
        (root / "d").rmdir()
    else:
        f.write_bytes(b"someone else's")  # the same path, not the item

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["missing-from-batch"] and result.status == "partial"
    assert "look for it by hand" in result.blocked[0].message
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}
    if what == "another-entry":
        assert f.read_bytes() == b"someone else's"


def test_an_item_put_back_by_hand_after_a_remount_is_already(qstore: Store, root: Path) -> None:
    f, bid = one_file(qstore, root)
    os.rename(held(qstore, bid, f), f)  # put back by hand

    def remounted(doc: dict[str, Any]) -> None:  # the device number changed since
        doc["items"][0]["dev"] += 1

    edit_manifest(qstore.quarantine / bid, remounted)
    assert codes(restore_batch(qstore, bid)) == ["already"]

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and codes(result) == ["already"]
    assert f.read_bytes() == b"ours"
    assert not (qstore.quarantine / bid).exists()  # recorded back, then the empty batch went


# -- copy-backs ------------------------------------------------------------------------------


def _restoring_temps(root: Path) -> list[Path]:
    return list(root.rglob(".hygiene-nb-restoring-*"))


def test_a_copy_back_of_what_cannot_be_verified_changes_nothing(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"ours")
    (root / "d" / "link").symlink_to("f")  # a copy could not verify a link
    bid = quarantine_items(qstore, [root / "d"])
    tree = qstore.quarantine / bid / "tree"
    before = snapshot(root, tree)
    first_rename_fails(monkeypatch, errno.EXDEV)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["restore-copy-failed"] and result.status == "partial"
    assert "cannot be copied back" in result.blocked[0].message
    assert "is a symlink" in result.blocked[0].message
    assert not (root / "d").exists() and _restoring_temps(root) == []
    assert snapshot(root, tree) == before  # no copy begun, the batch's copy as it was
    assert states(qstore.quarantine / bid) == {os.fsencode(root / "d"): "moved"}


def test_a_leftover_that_cannot_be_looked_up_is_refused_like_one_that_is_there(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = one_file(qstore, root)
    unlookable = ".hygiene-nb-restoring-" + "0" * 300

    def interrupted(doc: dict[str, Any]) -> None:
        doc["items"][0]["restoring_at"] = unlookable

    edit_manifest(qstore.quarantine / bid, interrupted)
    first_rename_fails(monkeypatch, errno.EXDEV)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["restore-leftover"] and unlookable in result.blocked[0].message
    assert os.listdir(root / "d") == []  # nothing copied beside it
    assert held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


def test_an_occupant_that_is_not_the_recorded_copy_is_left_alone(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = one_file(qstore, root)
    first_rename_fails(monkeypatch, errno.EXDEV)

    def copy_then_someone_writes(*args: Any, **kwargs: Any) -> Any:
        verified = real_copy_verified(*args, **kwargs)
        f.write_bytes(b"ours")  # the same bytes, but someone else's file
        return verified

    monkeypatch.setattr("hygiene_nb.executor.copy_back.copy_verified", copy_then_someone_writes)
    assert codes(restore_batch(qstore, bid, execute=True)) == ["target-occupied"]
    monkeypatch.undo()
    (temp,) = _restoring_temps(root)  # the verified copy, recorded as the one to take
    occupant = os.stat(f).st_ino

    again = restore_batch(qstore, bid, execute=True)

    assert codes(again) == ["target-occupied"] and "move it aside" in again.blocked[0].message
    assert f.read_bytes() == b"ours" and temp.read_bytes() == b"ours"
    assert os.stat(f).st_ino == occupant  # still theirs, not replaced by the copy
    assert held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


def _copy_back_dies_after_its_rename(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """A file copied back across filesystems, the process dead before the record said so."""
    f, bid = one_file(qstore, root)
    first_rename_fails(monkeypatch, errno.EXDEV)

    def dies(*_: object) -> None:
        raise Crash

    monkeypatch.setattr("hygiene_nb.executor.copy_back.record", dies)
    with pytest.raises(Crash):
        restore_batch(qstore, bid, execute=True)
    monkeypatch.undo()
    assert f.read_bytes() == b"ours" and held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}
    return f, bid


def test_a_dry_run_says_an_own_copy_is_back_and_finishes_nothing(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = _copy_back_dies_after_its_rename(qstore, root, monkeypatch)

    dry = restore_batch(qstore, bid)

    assert dry.status == "dry-run" and codes(dry) == ["already"]
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}
    assert held(qstore, bid, f).read_bytes() == b"ours"  # the duplicate stays until executed
    assert restore_batch(qstore, bid, execute=True).status == "done"
    assert f.read_bytes() == b"ours" and not (qstore.quarantine / bid).exists()


def test_an_own_copy_written_to_since_is_not_taken_for_it(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f, bid = _copy_back_dies_after_its_rename(qstore, root, monkeypatch)
    with f.open("ab") as handle:
        handle.write(b" and a line written since")

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-occupied"] and result.status == "partial"
    assert f.read_bytes() == b"ours and a line written since"
    assert held(qstore, bid, f).read_bytes() == b"ours"
    assert states(qstore.quarantine / bid) == {os.fsencode(f): "moved"}


# -- the emptied batch -----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["in-tree", "beside-tree"])
def test_a_batch_holding_what_nobody_recorded_stays_with_its_manifest(
    qstore: Store, root: Path, where: str
) -> None:
    f, bid = one_file(qstore, root)
    batch = qstore.quarantine / bid
    stray = batch / "tree" / "stray" if where == "in-tree" else batch / "notes"
    stray.write_bytes(b"nobody recorded me")

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and result.restored == [str(f)]
    assert f.read_bytes() == b"ours" and stray.read_bytes() == b"nobody recorded me"
    assert states(batch) == {os.fsencode(f): "restored"}
    expected = {"tree", "manifest.json"} if where == "in-tree" else {"notes", "manifest.json"}
    assert set(os.listdir(batch)) == expected  # the empty mirrors went, nothing else
    if where == "in-tree":
        assert os.listdir(batch / "tree") == ["stray"]


# -- as a user who may not search a directory ------------------------------------------------


@pytest.fixture
def user_dir(other_user: tuple[int, int]) -> Iterator[Path]:
    """A directory owned by the second user, under a fresh one everyone may pass through."""
    base = Path(tempfile.mkdtemp(prefix="hygiene-nb-user-"))
    try:
        os.chmod(base, 0o711)
        mine = base / "home"
        mine.mkdir()
        os.chown(mine, *other_user)
        yield mine
    finally:
        shutil.rmtree(base)


def test_a_target_directory_its_owner_may_not_search_is_not_restored_into(
    user_dir: Path, other_user: tuple[int, int]
) -> None:
    with acting_as(*other_user):
        store = Store(user_dir / "store").ensure()
        (user_dir / "root").mkdir()
        f, bid = one_file(store, user_dir / "root")
        os.chmod(f.parent, 0o600)  # readable, not searchable: what is in it cannot be told

        result = restore_batch(store, bid, execute=True)

    assert codes(result) == ["target-unusable"]
    assert f"{f} cannot be checked (Permission denied)" in result.blocked[0].message
    assert os.listdir(f.parent) == [] and held(store, bid, f).read_bytes() == b"ours"
    assert states(store.quarantine / bid) == {os.fsencode(f): "moved"}


def test_a_quarantine_its_owner_may_not_search_is_refused(
    user_dir: Path, other_user: tuple[int, int]
) -> None:
    with acting_as(*other_user):
        store = Store(user_dir / "store").ensure()
        (user_dir / "root").mkdir()
        f, bid = one_file(store, user_dir / "root")
        os.chmod(store.quarantine, 0o600)
        with pytest.raises(BatchInvalid) as info:
            restore_batch(store, bid, execute=True)

    assert "it is not a directory we can open (Permission denied)" in info.value.message
    assert not f.exists() and held(store, bid, f).read_bytes() == b"ours"

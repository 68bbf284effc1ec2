"""Batches at their edges: a claim that collides, a batch that cannot be removed or opened,
and a manifest that does not read back or is not a file.

Every case is made real on disk (a directory made under the batch's name, a mirror directory
that is not private, a batch renamed away, a fifo as the manifest, a process's directory that
is gone mounted as a batch).
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.executor import batches
from hygiene_nb.executor.batches import (
    Batch,
    claim_batch,
    mirror_parent,
    read_manifest,
    remove_empty_dir_below,
    remove_unused_batch,
    write_manifest,
)
from hygiene_nb.executor.fileops import DIR_FLAGS, LocalFileOps, replace_own_file
from hygiene_nb.executor.listing import list_batches
from hygiene_nb.store import Store
from tests.executor.helpers import (
    PLAN_DIGEST,
    PLAN_ID,
    in_store_batch,
    made_up_item,
    new_batch,
    open_fds,
    quarantine_items,
)
from tests.helpers import bind_mount, deadline, write

# -- claiming and mirroring --------------------------------------------------------------------


class ClaimedFirst(LocalFileOps):
    """Another claimant makes the first batch directory asked for (with a file in it) first."""

    def __init__(self) -> None:
        self.taken: list[bytes] = []

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        if not self.taken and name.startswith(b"batch-"):
            os.mkdir(name, 0o700, dir_fd=dir_fd)
            os.close(os.open(name + b"/theirs", os.O_WRONLY | os.O_CREAT, dir_fd=dir_fd))
            self.taken.append(name)
        super().make_dir(dir_fd, name)


def test_a_claim_never_takes_a_directory_that_appeared_under_its_name(qstore: Store) -> None:
    ops = ClaimedFirst()
    batch = claim_batch(qstore.quarantine, plan_id=PLAN_ID, plan_digest=PLAN_DIGEST, ops=ops)
    batch.close()
    (taken,) = ops.taken
    assert batch.batch_id.encode() != taken
    assert os.listdir(batch.path) == []  # a new directory of its own
    assert os.listdir(qstore.quarantine / os.fsdecode(taken)) == ["theirs"]  # theirs untouched
    assert sorted(os.listdir(qstore.quarantine)) == sorted([batch.batch_id, os.fsdecode(taken)])


def test_a_mirror_directory_not_private_to_us_stops_the_item_and_keeps_no_handle(
    qstore: Store,
) -> None:
    batch = new_batch(qstore.quarantine)
    try:
        shared = batch.path / "tree" / "a"
        shared.mkdir(parents=True)
        (batch.path / "tree").chmod(0o700)
        shared.chmod(0o755)
        before = open_fds()
        with pytest.raises(StoreError, match="not private to you"):
            mirror_parent(batch, b"/a/b/c/f", LocalFileOps())
        assert open_fds() == before
        assert os.listdir(shared) == []  # nothing made below the directory refused
    finally:
        batch.close()


# -- removing a batch that holds nothing -------------------------------------------------------


def returned_batch(qstore: Store, root: Path) -> tuple[Batch, bytes]:
    """A batch whose one item was moved back at once; its mirror directory is left."""
    batch = new_batch(qstore.quarantine)
    raw = os.fsencode(root / "d" / "f")
    batch.items[raw] = made_up_item(raw, "returned")
    write_manifest(batch)
    os.makedirs(in_store_batch(qstore, batch.batch_id, root / "d"))
    return batch, raw


def test_a_batch_that_never_held_anything_nor_a_manifest_is_removed(qstore: Store) -> None:
    batch = new_batch(qstore.quarantine)
    try:
        assert remove_unused_batch(batch)
    finally:
        batch.close()
    assert os.listdir(qstore.quarantine) == []


def test_an_unrecorded_entry_in_the_tree_keeps_the_batch(qstore: Store, root: Path) -> None:
    batch, _ = returned_batch(qstore, root)
    write(batch.path / "tree" / "stray", 1)
    try:
        assert not remove_unused_batch(batch)
    finally:
        batch.close()
    assert sorted(os.listdir(batch.path)) == ["manifest.json", "tree"]
    assert os.listdir(batch.path / "tree") == ["stray"]  # the mirrors of the item went


def test_anything_beside_the_manifest_keeps_the_batch(qstore: Store, root: Path) -> None:
    batch, _ = returned_batch(qstore, root)
    write(batch.path / "notes", 1)
    try:
        assert not remove_unused_batch(batch)
    finally:
        batch.close()
    assert sorted(os.listdir(batch.path)) == ["manifest.json", "notes"]


def test_another_directory_under_the_batchs_name_is_never_removed(
    qstore: Store, root: Path
) -> None:
    batch, _ = returned_batch(qstore, root)
    moved_away = qstore.quarantine / "elsewhere"
    os.rename(batch.path, moved_away)
    batch.path.mkdir(mode=0o700)  # a directory of unknown content now has its name
    try:
        assert not remove_unused_batch(batch)
    finally:
        batch.close()
    assert batch.path.is_dir() and moved_away.is_dir()


def test_a_batch_gone_from_its_quarantine_is_not_removed_elsewhere(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    batch, _ = returned_batch(qstore, root)
    moved_away = tmp_path / "moved-away"
    os.rename(batch.path, moved_away)
    try:
        assert not remove_unused_batch(batch)
    finally:
        batch.close()
    assert moved_away.is_dir() and not batch.path.exists()


def test_an_empty_directory_below_is_removed_and_anything_else_kept(tmp_path: Path) -> None:
    write(tmp_path / "full" / "x", 1)
    write(tmp_path / "file", 1)
    (tmp_path / "a" / "empty").mkdir(parents=True)
    fd = os.open(tmp_path, DIR_FLAGS)
    try:
        assert remove_empty_dir_below(fd, [b"missing", b"x"])  # never was
        assert remove_empty_dir_below(fd, [b"a", b"missing"])
        assert not remove_empty_dir_below(fd, [b"file", b"x"])  # ENOTDIR: cannot tell
        assert not remove_empty_dir_below(fd, [b"full"])
        assert remove_empty_dir_below(fd, [b"a", b"empty"])
    finally:
        os.close(fd)
    assert (tmp_path / "full" / "x").is_file() and (tmp_path / "file").is_file()
    assert os.listdir(tmp_path / "a") == []


# -- the manifest ------------------------------------------------------------------------------


def test_a_manifest_changed_right_after_it_was_put_in_place_stops_the_run(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    def and_someone_writes(dir_fd: int, tmp: bytes, final: bytes) -> None:
        replace_own_file(dir_fd, tmp, final)
        with open(os.open(final, os.O_WRONLY | os.O_APPEND, dir_fd=dir_fd), "ab") as handle:
            handle.write(b" ")  # another writer, between the rename and the read-back

    monkeypatch.setattr("hygiene_nb.executor.batches.replace_own_file", and_someone_writes)
    batch = new_batch(qstore.quarantine)
    raw = os.fsencode(root / "f")
    batch.items[raw] = made_up_item(raw, "pending")
    try:
        with pytest.raises(StoreError, match="did not read back as written"):
            write_manifest(batch)
    finally:
        batch.close()


def test_a_manifest_that_is_a_fifo_is_not_read(qstore: Store) -> None:
    batch = new_batch(qstore.quarantine)
    batch.close()
    os.mkfifo(batch.path / "manifest.json")
    keep_open = os.open(batch.path / "manifest.json", os.O_RDWR)  # so opening it cannot block
    try:
        fd = os.open(batch.path, DIR_FLAGS)
        try:
            with deadline(10), pytest.raises(ValueError, match="not a regular file"):
                read_manifest(fd)
        finally:
            os.close(fd)
    finally:
        os.close(keep_open)


def test_a_manifest_over_the_limit_is_refused(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = new_batch(qstore.quarantine)
    raw = os.fsencode(root / "f")
    batch.items[raw] = made_up_item(raw, "pending")
    try:
        write_manifest(batch)
        size = os.stat(batch.path / "manifest.json").st_size
        monkeypatch.setattr(batches, "_MAX_MANIFEST", size)  # the limit itself is read
        assert read_manifest(batch.fd) is not None
        monkeypatch.setattr(batches, "_MAX_MANIFEST", size - 1)
        with pytest.raises(ValueError, match="absurdly large"):
            read_manifest(batch.fd)
    finally:
        batch.close()


# -- listing -----------------------------------------------------------------------------------


def test_a_directory_nobody_recorded_beside_the_items_makes_the_batch_incomplete(
    qstore: Store, root: Path
) -> None:
    target = write(root / "d" / "f", 3)
    bid = quarantine_items(qstore, [target])
    stray = Path(os.fsdecode(in_store_batch(qstore, bid, root / "other")))
    write(stray / "inside", 1)
    (info,) = list_batches([qstore.quarantine])
    assert (info.manifest, info.items) == ("incomplete", 2)  # the item, and the stray one
    assert info.problems == [f"{root / 'other'} is in the batch but not in its manifest"]
    assert info.to_json()["manifest"] == "incomplete" and "problems" not in info.to_json()


def test_a_batch_that_cannot_be_opened_is_listed_invalid_beside_the_others(
    qstore: Store, root: Path
) -> None:
    bid = quarantine_items(qstore, [write(root / "f", 3)])
    gone = qstore.quarantine / "batch-00000000T000000Z-00000000"
    gone.mkdir()
    proc = subprocess.Popen(["sleep", "600"])
    try:
        with bind_mount(Path(f"/proc/{proc.pid}"), gone):
            proc.kill()
            proc.wait()  # its /proc directory, mounted there, cannot be opened any more
            listed = {b.batch_id: b for b in list_batches([qstore.quarantine])}
    finally:
        proc.kill()
        proc.wait()
    assert set(listed) == {bid, gone.name}
    assert listed[bid].manifest == "ok" and listed[bid].items == 1
    bad = listed[gone.name]
    assert (bad.manifest, bad.items, bad.bytes, bad.created_at) == ("invalid", 0, 0, "")
    assert bad.problems == [os.strerror(errno.ESRCH)]
    assert bad.to_json()["problems"] == bad.problems

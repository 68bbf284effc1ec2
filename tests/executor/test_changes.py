"""What is recorded of an item when it moves, and how the batch's entry is compared with it.

Its owner, filesystem and parents' modes at the move (unknown, never guessed, when they cannot
be read); after, whether the batch still holds the very entry: on another filesystem, under a
new device number, changed deep inside, not examinable, or still open for writing.
"""

from __future__ import annotations

import base64
import errno
import os
import stat
import time
from pathlib import Path
from typing import Any

from hygiene_nb.executor.batches import Batch, ManifestItem, read_manifest, write_manifest
from hygiene_nb.executor.changes import changed_items, check_held, note_origin
from hygiene_nb.executor.fileops import DIR_FLAGS, open_dirs_at
from hygiene_nb.executor.filesystems import fs_identity
from hygiene_nb.fs.fingerprint import kind_of_mode, signed64
from hygiene_nb.store import Store
from tests.executor.helpers import (
    PLAN_DIGEST,
    PLAN_ID,
    in_store_batch,
    made_up_item,
    manifest_of,
    new_batch,
    open_fds,
    quarantine_items,
)
from tests.helpers import deadline, write


def record_of(raw: bytes, state: str) -> ManifestItem:
    """The manifest record of the entry at ``raw`` as it is now."""
    st = os.lstat(raw)
    return ManifestItem(
        original=os.fsdecode(raw),
        original_b64=base64.b64encode(raw).decode(),
        kind=kind_of_mode(st.st_mode),
        size=st.st_size,
        tree_bytes=None,
        dev=signed64(st.st_dev),
        inode=signed64(st.st_ino),
        mtime_ns=st.st_mtime_ns,
        plan_id=PLAN_ID,
        state=state,
    )


def held_record(qstore: Store, bid: str, original: Path) -> ManifestItem:
    (record,) = manifest_of(qstore.quarantine / bid)["items"]
    assert record["original"] == str(original)
    return ManifestItem(**record)


def check(
    qstore: Store, bid: str, item: ManifestItem, batch_fs: dict[str, Any] | None
) -> tuple[str, list[str]]:
    """``check_held`` of ``item`` in the store's batch ``bid``, against ``batch_fs``."""
    parts = item.original_raw.strip(b"/").split(b"/")
    batch_fd = os.open(qstore.quarantine / bid, DIR_FLAGS)
    try:
        parent = open_dirs_at(batch_fd, [b"tree", *parts[:-1]])
        try:
            return check_held(parent, parts[-1], item, batch_fs)
        finally:
            os.close(parent)
    finally:
        os.close(batch_fd)


def changed(qstore: Store, bid: str, *, writers: bool = False) -> list[tuple[str, list[str]]]:
    fd = os.open(qstore.quarantine / bid, DIR_FLAGS)
    try:
        found = changed_items(fd, read_manifest(fd), writers=writers)
    finally:
        os.close(fd)
    return [(i.original, what) for i, what in found]


# -- what is recorded at the move --------------------------------------------------------------


def noted(batch: Batch, raw: bytes) -> ManifestItem:
    item = record_of(raw, "pending")
    parent = os.open(os.path.dirname(raw), DIR_FLAGS)
    try:
        note_origin(batch, item, parent)
        assert item.fs == fs_identity(parent)
    finally:
        os.close(parent)
    return item


def test_without_a_root_only_the_owner_and_the_filesystem_are_recorded(
    qstore: Store, root: Path
) -> None:
    batch = new_batch(qstore.quarantine)
    try:
        item = noted(batch, os.fsencode(write(root / "d" / "f", 1)))
    finally:
        batch.close()
    assert item.uid == os.geteuid() and item.fs is not None
    assert item.parents is None and batch.root is None


def test_an_item_outside_the_root_gets_no_parents_but_the_root_its_filesystem(
    qstore: Store, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    batch = new_batch(qstore.quarantine)
    batch.root = {"path": str(root)}
    try:
        item = noted(batch, os.fsencode(write(tmp_path / "root2" / "f", 1)))  # a prefix only
        inside = noted(batch, os.fsencode(write(root / "d" / "g", 1)))
    finally:
        batch.close()
    assert item.uid == os.geteuid() and item.parents is None
    assert batch.root is not None
    fd = os.open(root, DIR_FLAGS)
    try:
        assert batch.root["fs"] == fs_identity(fd)
    finally:
        os.close(fd)
    modes = [stat.S_IMODE(os.stat(p).st_mode) for p in (root, root / "d")]
    assert [m for _, _, m in inside.parents or []] == modes  # the root and d, in order


def test_parents_that_moved_after_the_items_directory_was_opened_are_unknown(
    qstore: Store, root: Path
) -> None:
    raw = os.fsencode(write(root / "a" / "b" / "f", 1))
    batch = new_batch(qstore.quarantine)
    batch.root = {"path": str(root)}
    item = record_of(raw, "pending")
    parent = os.open(os.path.dirname(raw), DIR_FLAGS)
    try:
        os.rename(root / "a", root / "a-moved")  # the chain root/a/b is not there any more
        note_origin(batch, item, parent)
    finally:
        os.close(parent)
        batch.close()
    assert item.parents is None  # unknown: restore refuses rather than guess
    assert item.uid == os.geteuid() and item.fs is not None


# -- is it still the item that was moved? ------------------------------------------------------


def test_the_item_on_another_filesystem_than_the_batch_is_another_entry(
    qstore: Store, root: Path
) -> None:
    target = write(root / "f", 3)
    bid = quarantine_items(qstore, [target])
    item = held_record(qstore, bid, target)
    item.dev += 1  # the device number says another filesystem, and so does the batch's record
    proc = os.open("/proc", DIR_FLAGS)
    try:
        elsewhere = fs_identity(proc)
    finally:
        os.close(proc)
    state, what = check(qstore, bid, item, elsewhere)
    assert (state, what) == ("replaced", ["it is on another filesystem than the batch"])


def test_a_new_device_number_where_the_filesystem_cannot_be_told_vouches_only_untouched(
    qstore: Store, root: Path
) -> None:
    target = write(root / "f", 3)
    bid = quarantine_items(qstore, [target])
    item = held_record(qstore, bid, target)
    now = item.dev
    item.dev += 1  # as after a remount, in a batch without a filesystem identity (version 1)
    assert check(qstore, bid, item, None) == ("same", [])  # the very inode, untouched
    inside = Path(os.fsdecode(in_store_batch(qstore, bid, target)))
    with inside.open("ab") as handle:
        handle.write(b"more")
    state, what = check(qstore, bid, item, None)
    assert state == "replaced" and what[0] == f"device {now + 1} → {now}"
    assert "size 3 → 7" in what


def rewrite_until_changed(paths: list[Path], since: int) -> None:
    """Append to each of ``paths`` until its ctime is after ``since`` (timestamps are coarse)."""
    with deadline(30):
        while True:
            for path in paths:
                with path.open("ab") as handle:
                    handle.write(b"!")
            if all(os.stat(p).st_ctime_ns > since for p in paths):
                return
            time.sleep(0.01)


def test_a_change_deep_in_a_held_directory_is_found_and_no_handle_is_kept(
    qstore: Store, root: Path
) -> None:
    for sub in ("s1", "s2"):
        write(root / "cache" / sub / "f", 1)
    bid = quarantine_items(qstore, [root / "cache"])
    item = held_record(qstore, bid, root / "cache")
    assert item.ctime_ns is not None
    inside = Path(os.fsdecode(in_store_batch(qstore, bid, root / "cache")))
    # the files change, not their directories: both are entered, one is still waiting
    rewrite_until_changed([inside / "s1" / "f", inside / "s2" / "f"], item.ctime_ns)
    before = open_fds()
    state, what = check(qstore, bid, item, manifest_of(qstore.quarantine / bid)["fs"])
    assert open_fds() == before
    assert state == "changed" and what in (["s1/f inside it changed"], ["s2/f inside it changed"])


def test_an_item_that_cannot_be_examined_counts_as_changed(qstore: Store, root: Path) -> None:
    bid = quarantine_items(qstore, [write(root / "d" / "f", 3)])
    doc = manifest_of(qstore.quarantine / bid)
    batch = Batch(
        qstore.quarantine / bid,
        bid,
        os.open(qstore.quarantine / bid, DIR_FLAGS),
        doc["created_at"],
        PLAN_ID,
        PLAN_DIGEST,
        root=doc["root"],
        fs=doc.get("fs"),
    )
    long_name = os.fsencode(root / "d" / ("x" * (os.pathconf(root, "PC_NAME_MAX") + 1)))
    batch.items[long_name] = made_up_item(long_name, "moved")  # a record no entry can have
    try:
        write_manifest(batch)
    finally:
        batch.close()
    assert changed(qstore, bid) == [
        (os.fsdecode(long_name), [f"it cannot be examined ({os.strerror(errno.ENAMETOOLONG)})"])
    ]


def test_an_item_whose_directory_in_the_batch_is_gone_or_a_file(qstore: Store, root: Path) -> None:
    target = write(root / "d" / "f", 3)
    bid = quarantine_items(qstore, [target])
    mirror = Path(os.fsdecode(in_store_batch(qstore, bid, root / "d")))
    (mirror / "f").unlink()
    mirror.rmdir()
    assert changed(qstore, bid) == []  # missing from the batch: nothing of it to destroy
    write(mirror, 1)  # a file where its directory was: it cannot be examined
    assert changed(qstore, bid) == [
        (str(target), [f"it cannot be examined ({os.strerror(errno.ENOTDIR)})"])
    ]


def test_an_item_a_program_still_writes_to_counts_as_changed_for_a_purge(
    qstore: Store, root: Path
) -> None:
    target = write(root / "f", 3)
    bid = quarantine_items(qstore, [target])
    inside = in_store_batch(qstore, bid, target)
    assert changed(qstore, bid, writers=True) == []
    fd = os.open(inside, os.O_WRONLY)  # open for writing, nothing written yet
    try:
        assert changed(qstore, bid) == []  # unchanged so far
        assert changed(qstore, bid, writers=True) == [
            (str(target), ["another program has it open for writing"])
        ]
    finally:
        os.close(fd)


def test_an_entry_born_after_the_move_is_another_entry_even_with_the_same_inode_number(
    qstore: Store, root: Path
) -> None:
    """A freed inode number goes to the next file made: the record is set to what such a reuse
    gives (the number of a file made in the batch after the item moved), and the birth time
    tells them apart."""
    target = write(root / "f", 3)
    bid = quarantine_items(qstore, [target])
    item = held_record(qstore, bid, target)
    inside = Path(os.fsdecode(in_store_batch(qstore, bid, target)))
    moved_at = time.time_ns()
    time.sleep(0.02)
    inside.unlink()
    write(inside, 3)  # a newcomer, born after the move
    newcomer = os.lstat(inside)
    item.inode, item.ctime_ns, item.mtime_ns = (
        signed64(newcomer.st_ino),
        moved_at,
        newcomer.st_mtime_ns,
    )
    state, what = check(qstore, bid, item, None)
    assert state == "replaced"
    assert "a new entry with the same inode number (born after the move)" in what
